package kubewasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Harness runs a Reconciler natively, under `go test`: objects stand in
// for the host's caches, and reads and writes are checked against the
// declaration as the host checks them (a write the host would refuse fails
// the call with the host's exact refusal), held to the host's answers by
// the shared conformance fixtures.
//
//	h := kubewasm.NewHarness(MyApp{}).Object(&app)
//	out, err := h.Reconcile(kubewasm.Key{Namespace: "default", Name: "shop"})
type Harness struct {
	reconciler  Reconciler
	declaration *Declaration
	objects     []map[string]json.RawMessage
	config      string
	// Clock is what Context.Now answers (zero: the wall clock).
	Clock time.Time
	// Logs are the records the calls logged.
	Logs []LogRecord
}

// LogRecord is one record a call logged.
type LogRecord struct {
	Level   Level
	Message string
	Fields  [][2]string
}

// NewHarness is a harness of r, with no object and an empty configuration.
func NewHarness(r Reconciler) *Harness {
	return &Harness{reconciler: r, declaration: r.Declare(), config: "{}"}
}

// Object puts object in the cache (its apiVersion and kind from its Go
// type when unset); it panics on an object that does not encode, a test's
// own mistake.
func (h *Harness) Object(object any) *Harness {
	text, err := encode(object, true)
	if err != nil {
		panic(fmt.Sprintf("kubewasm.Harness.Object: %v", err))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil {
		panic(fmt.Sprintf("kubewasm.Harness.Object: %v", err))
	}
	h.objects = append(h.objects, fields)
	return h
}

// Config sets the plugin's configuration (encoded as JSON).
func (h *Harness) Config(config any) *Harness {
	text, err := json.Marshal(config)
	if err != nil {
		panic(fmt.Sprintf("kubewasm.Harness.Config: %v", err))
	}
	h.config = string(text)
	return h
}

// Reconcile runs Reconcile for key.
func (h *Harness) Reconcile(key Key) (*Outcome, error) {
	return h.run(h.reconciler.Reconcile, h.context(key))
}

// Finalize runs Finalize for key.
func (h *Harness) Finalize(key Key) (*Outcome, error) {
	return h.run(func(ctx *Context) (*Outcome, error) { return finalize(h.reconciler, ctx) }, h.context(key))
}

// Scheduled runs Scheduled for the time at the schedule named.
func (h *Harness) Scheduled(at time.Time) (*Outcome, error) {
	ctx := h.context(Key{})
	ctx.ScheduledAt = at
	return h.run(func(ctx *Context) (*Outcome, error) { return scheduled(h.reconciler, ctx) }, ctx)
}

// MapKeys runs MapKeys for changed, an object of the secondary type t (with
// previous, its state before the change, if any; or deleted: changed is
// its last state): the primary keys the host would queue.
func (h *Harness) MapKeys(t Type, changed, previous any, deleted bool) ([]Key, error) {
	text, err := encode(changed, true)
	if err != nil {
		return nil, err
	}
	var meta struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(text), &meta); err != nil {
		return nil, err
	}
	ctx := h.context(Key{Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name})
	ctx.Type, ctx.changed, ctx.Deleted = t, text, deleted
	if previous != nil {
		if ctx.previous, err = encode(previous, true); err != nil {
			return nil, err
		}
	}
	return mapKeys(h.reconciler, ctx)
}

func (h *Harness) context(key Key) *Context {
	return &Context{Key: key, Type: h.declaration.Primary, config: h.config, host: h}
}

func (h *Harness) run(call func(*Context) (*Outcome, error), ctx *Context) (*Outcome, error) {
	out, err := call(ctx)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = NewOutcome()
	}
	if out.err != nil {
		return nil, out.err
	}
	return out, h.checkWrites(out, ctx.Key)
}

// checkWrites holds an outcome to the host's write rules
// (kubewasm_runtime::action::plan, held to its answers by
// tests/conformance/writes.json): every apply, status apply and delete
// needs its verb declared on its type; its target's scope, namespace and
// name must be valid (a namespaced object without a namespace goes to the
// primary's), its labels too; an owned child needs the primary cached and
// in its namespace.
func (h *Harness) checkWrites(out *Outcome, key Key) error {
	for i, a := range out.actions {
		var err error
		switch a.kind {
		case deleteAction:
			var declared Type
			if declared, err = h.granted(a.target, Delete); err == nil {
				err = checkTarget(declared, a.key)
			}
		case applyAction, applyStatusAction:
			verb := Apply
			if a.kind == applyStatusAction {
				verb = ApplyStatus
			}
			var declared Type
			var target Key
			declared, target, err = h.checkObject(a.object, verb, key)
			if err == nil && a.kind == applyAction && a.owned {
				err = h.checkOwner(declared, target, key)
			}
		}
		var denied *deniedError
		switch {
		case errors.As(err, &denied):
			return fmt.Errorf("action #%d denied: plugin `%s` %s", i+1, h.declaration.Name, denied.why)
		case err != nil:
			return fmt.Errorf("action #%d is invalid: %w", i+1, err)
		}
	}
	return nil
}

// deniedError is a write or read the grants refuse.
type deniedError struct{ why string }

func (e *deniedError) Error() string { return e.why }

// granted is the declared form of t, if verb is declared on it; else the
// host's denial.
func (h *Harness) granted(t Type, verb Verb) (Type, error) {
	declared, held, _, ok := h.declaration.held(t)
	switch {
	case !ok:
		return Type{}, &deniedError{fmt.Sprintf("may not %s %s: the type was not declared", verb, t)}
	case !slices.Contains(held, verb):
		return Type{}, &deniedError{fmt.Sprintf("may not %s %s: the verb was not declared for this type", verb, t)}
	}
	return declared, nil
}

func (h *Harness) checkObject(text string, verb Verb, key Key) (Type, Key, error) {
	var object map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &object); err != nil {
		return Type{}, Key{}, err
	}
	apiVersion, kind := stringField(object, "apiVersion"), stringField(object, "kind")
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	declared, err := h.granted(Type{Group: group, Version: version, Kind: kind}, verb)
	if err != nil {
		return Type{}, Key{}, err
	}
	var meta struct {
		Name      *string `json:"name"`
		Namespace *string `json:"namespace"`
	}
	if raw, ok := object["metadata"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	if meta.Name == nil {
		return Type{}, Key{}, errors.New("object lacks `metadata.name`")
	}
	target := Key{Name: *meta.Name}
	switch {
	case meta.Namespace != nil:
		target.Namespace = *meta.Namespace
	case declared.Namespaced:
		target.Namespace = key.Namespace
	}
	if err := checkTarget(declared, target); err != nil {
		return Type{}, Key{}, err
	}
	return declared, target, labelsError(object)
}

func checkTarget(t Type, target Key) error {
	switch {
	case t.Namespaced && target.Namespace == "":
		return fmt.Errorf("%s `%s` needs a namespace", t, target.Name)
	case !t.Namespaced && target.Namespace != "":
		return fmt.Errorf("%s is cluster-scoped but `%s` names namespace `%s`", t, target.Name, target.Namespace)
	case target.Namespace != "":
		if err := namespaceError(target.Namespace); err != nil {
			return err
		}
	}
	return nameError(t, target.Name)
}

func (h *Harness) checkOwner(t Type, child, key Key) error {
	primary := h.declaration.Primary
	cannot := fmt.Sprintf("cannot own %s `%s`", t, child)
	cached := h.find(primary, key)
	switch {
	case cached == nil:
		return fmt.Errorf("%s: the primary `%s` is not in the cache", cannot, key)
	case metadata(cached).UID == nil:
		return fmt.Errorf("%s: the primary has no uid", cannot)
	case primary.Namespaced && key.Namespace != child.Namespace:
		return fmt.Errorf("%s: an owner reference cannot cross namespaces (primary `%s`)", cannot, key)
	}
	return nil
}

// meta is what the harness reads of an object's metadata.
type meta struct {
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	UID       *string         `json:"uid"`
	Labels    json.RawMessage `json:"labels"`
}

func metadata(object map[string]json.RawMessage) meta {
	var m meta
	if raw, ok := object["metadata"]; ok {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

// labels are an object's string labels (others are no label to a
// selector).
func (m meta) labels() map[string]string {
	var all map[string]any
	_ = json.Unmarshal(m.Labels, &all)
	labels := map[string]string{}
	for k, v := range all {
		if s, ok := v.(string); ok {
			labels[k] = s
		}
	}
	return labels
}

func stringField(object map[string]json.RawMessage, name string) string {
	var s string
	_ = json.Unmarshal(object[name], &s)
	return s
}

func (h *Harness) find(t Type, key Key) map[string]json.RawMessage {
	for _, o := range h.objects {
		m := metadata(o)
		if stringField(o, "apiVersion") == t.APIVersion() && stringField(o, "kind") == t.Kind &&
			m.Name == key.Name && m.Namespace == key.Namespace {
			return o
		}
	}
	return nil
}

// visible are the objects of t a read with verb may see: the declared
// selector's.
func (h *Harness) visible(t Type, verb Verb) (Type, []map[string]json.RawMessage, error) {
	declared, err := h.granted(t, verb)
	if err != nil {
		return Type{}, nil, fmt.Errorf("%w: plugin `%s` %s", ErrReadDenied, h.declaration.Name, err)
	}
	_, _, selector, _ := h.declaration.held(t)
	requirements, err := parseSelector(selector)
	if err != nil {
		return Type{}, nil, err
	}
	var seen []map[string]json.RawMessage
	for _, o := range h.objects {
		if stringField(o, "apiVersion") == declared.APIVersion() && stringField(o, "kind") == declared.Kind &&
			matches(requirements, metadata(o).labels()) {
			seen = append(seen, o)
		}
	}
	return declared, seen, nil
}

func (h *Harness) get(t Type, key Key) (string, bool, error) {
	declared, objects, err := h.visible(t, Get)
	if err != nil || !isValidName(declared, key.Name) {
		return "", false, err
	}
	for _, o := range objects {
		if m := metadata(o); m.Name == key.Name && m.Namespace == key.Namespace {
			text, err := json.Marshal(o)
			return string(text), true, err
		}
	}
	return "", false, nil
}

func (h *Harness) list(t Type, namespace, selector string) ([]string, error) {
	requirements, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	_, objects, err := h.visible(t, List)
	if err != nil {
		return nil, err
	}
	var found []map[string]json.RawMessage
	for _, o := range objects {
		m := metadata(o)
		if (namespace == "" || m.Namespace == namespace) && matches(requirements, m.labels()) {
			found = append(found, o)
		}
	}
	slices.SortFunc(found, func(a, b map[string]json.RawMessage) int {
		ma, mb := metadata(a), metadata(b)
		return strings.Compare(ma.Namespace+"\x00"+ma.Name, mb.Namespace+"\x00"+mb.Name)
	})
	texts := make([]string, len(found))
	for i, o := range found {
		text, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		texts[i] = string(text)
	}
	return texts, nil
}

func (h *Harness) log(level Level, message string, fields [][2]string) {
	h.Logs = append(h.Logs, LogRecord{Level: level, Message: message, Fields: fields})
}

func (h *Harness) now() time.Time {
	if h.Clock.IsZero() {
		return time.Now().UTC()
	}
	return h.Clock
}
