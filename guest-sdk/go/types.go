package kubewasm

import (
	"fmt"
	"slices"
)

// Type is a Kubernetes resource type: group (empty for the core group),
// version, kind, the plural of its URLs and its scope.
type Type struct {
	Group      string
	Version    string
	Kind       string
	Plural     string
	Namespaced bool
}

// APIVersion is the type's apiVersion: "group/version", or "version" for
// the core group.
func (t Type) APIVersion() string {
	if t.Group == "" {
		return t.Version
	}
	return t.Group + "/" + t.Version
}

func (t Type) String() string { return t.APIVersion() + " " + t.Kind }

// same reports whether u is t by group, version and kind (how the host
// matches types).
func (t Type) same(u Type) bool {
	return t.Group == u.Group && t.Version == u.Version && t.Kind == u.Kind
}

// Key is an object's identity: its namespace ("" for a cluster-scoped
// object) and its name.
type Key struct {
	Namespace string
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Verb is what a plugin may do with a type; the host grants only what the
// declaration names.
type Verb string

// The verbs, spelled as in the contract.
const (
	Get         Verb = "get"
	List        Verb = "list"
	Watch       Verb = "watch"
	Apply       Verb = "apply"
	ApplyStatus Verb = "apply-status"
	Delete      Verb = "delete"
)

var verbs = []Verb{Get, List, Watch, Apply, ApplyStatus, Delete}

// Mapping says how changes of a secondary type map to primary keys.
type Mapping struct {
	kind  string
	label string
}

var (
	// NoMapping: the type is read, its changes trigger nothing.
	NoMapping = Mapping{kind: "none"}
	// OwnerReferences: a change queues the object's owners of the
	// primary's type.
	OwnerReferences = Mapping{kind: "owner-references"}
	// Custom: the reconciler's MapKeys says which primaries a change
	// queues.
	Custom = Mapping{kind: "custom"}
	// Reads: reads as triggers; a change queues the primaries whose last
	// successful reconcile read the object.
	Reads = Mapping{kind: "reads"}
)

// Label maps a change to the primary named by the value of label key
// (`name`, or `namespace.name`).
func Label(key string) Mapping { return Mapping{kind: "label", label: key} }

// Secondary is a type other than the primary that a plugin reads or
// writes.
type Secondary struct {
	Type          Type
	Verbs         []Verb
	LabelSelector string
	Mapping       Mapping
	// Prune: the owned children of this type form a set; those a
	// reconcile no longer applies are deleted by the host.
	Prune bool
}

// Declaration is what a plugin declares once, at load. Build it from
// NewDeclaration with its methods; a mistake (an unknown verb, a Go type
// the SDK cannot name) is kept and reported by Err, and the host refuses
// the plugin at load with it.
type Declaration struct {
	Name             string
	Version          string
	Primary          Type
	PrimaryVerbs     []Verb
	PrimarySelector  string
	Secondaries      []Secondary
	ManagedFinalizer bool
	ResyncSeconds    *uint32
	MaxConcurrency   *uint32
	ConfigSchema     string
	Schedule         string
	err              error
}

// NewDeclaration declares a plugin of this name and version reconciling
// objects of primary: a k8s.io/api object (`&appsv1.Deployment{}`) or a
// Type.
func NewDeclaration(name, version string, primary any) *Declaration {
	d := &Declaration{Name: name, Version: version}
	d.Primary = d.typeOf(primary)
	return d
}

// Err is the first mistake made building the declaration, if any.
func (d *Declaration) Err() error { return d.err }

func (d *Declaration) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *Declaration) typeOf(object any) Type {
	t, err := TypeOf(object)
	if err != nil {
		d.fail(err)
	}
	return t
}

func (d *Declaration) checked(vs []Verb) []Verb {
	for _, v := range vs {
		if !slices.Contains(verbs, v) {
			d.fail(fmt.Errorf("unknown verb %q: expected one of %v", v, verbs))
		}
	}
	return slices.Clone(vs)
}

// Verbs adds verbs on the primary beyond the implied get, list and watch.
func (d *Declaration) Verbs(vs ...Verb) *Declaration {
	d.PrimaryVerbs = append(d.PrimaryVerbs, d.checked(vs)...)
	return d
}

// Selecting reconciles only the primaries matching a label selector
// (`app=web,!legacy`).
func (d *Declaration) Selecting(selector string) *Declaration {
	d.PrimarySelector = selector
	return d
}

// Secondary declares a type other than the primary.
func (d *Declaration) Secondary(s Secondary) *Declaration {
	s.Verbs = d.checked(s.Verbs)
	if s.Mapping.kind == "" {
		s.Mapping = NoMapping
	}
	if s.Mapping != NoMapping && !slices.Contains(s.Verbs, Watch) {
		s.Verbs = append(s.Verbs, Watch)
	}
	if s.Prune && !slices.Contains(s.Verbs, Delete) {
		s.Verbs = append(s.Verbs, Delete)
	}
	d.Secondaries = append(d.Secondaries, s)
	return d
}

// Owns declares children of this type (`&appsv1.Deployment{}`) that the
// plugin applies and deletes, mapped back to their owner.
func (d *Declaration) Owns(object any) *Declaration {
	return d.Secondary(Secondary{
		Type:    d.typeOf(object),
		Verbs:   []Verb{Get, List, Apply, Delete},
		Mapping: OwnerReferences,
	})
}

// OwnsSet declares owned children of this type that form a set: those a
// reconcile no longer applies are deleted by the host.
func (d *Declaration) OwnsSet(object any) *Declaration {
	return d.Secondary(Secondary{
		Type:    d.typeOf(object),
		Verbs:   []Verb{Get, List, Apply, Delete},
		Mapping: OwnerReferences,
		Prune:   true,
	})
}

// Watches declares a type whose changes queue primaries by mapping.
func (d *Declaration) Watches(object any, mapping Mapping) *Declaration {
	return d.Secondary(Secondary{Type: d.typeOf(object), Verbs: []Verb{Get, List}, Mapping: mapping})
}

// Reads declares a type the plugin only reads.
func (d *Declaration) Reads(object any) *Declaration {
	return d.Secondary(Secondary{Type: d.typeOf(object), Verbs: []Verb{Get, List}})
}

// Finalizer asks the host to manage the finalizer `kubewasm.dev/<name>`
// and call Finalize before a primary goes.
func (d *Declaration) Finalizer() *Declaration {
	d.ManagedFinalizer = true
	return d
}

// Resync reconciles every primary again after this many seconds.
func (d *Declaration) Resync(seconds uint32) *Declaration {
	d.ResyncSeconds = &seconds
	return d
}

// Concurrency asks for at most n reconciles at once.
func (d *Declaration) Concurrency(n uint32) *Declaration {
	d.MaxConcurrency = &n
	return d
}

// Cron asks for Scheduled calls on a cron schedule, in UTC: five fields as
// a CronJob's, six with seconds first, or a macro (`@hourly`).
func (d *Declaration) Cron(schedule string) *Declaration {
	d.Schedule = schedule
	return d
}

// Schema sets the JSON Schema (JSON text) the configuration must match.
func (d *Declaration) Schema(schema string) *Declaration {
	d.ConfigSchema = schema
	return d
}

// held is the declared form of t, the verbs held on it and its declared
// selector; ok false when t was not declared.
func (d *Declaration) held(t Type) (declared Type, held []Verb, selector string, ok bool) {
	if d.Primary.same(t) {
		return d.Primary, append([]Verb{Get, List, Watch}, d.PrimaryVerbs...), d.PrimarySelector, true
	}
	for _, s := range d.Secondaries {
		if s.Type.same(t) {
			return s.Type, s.Verbs, s.LabelSelector, true
		}
	}
	return Type{}, nil, "", false
}
