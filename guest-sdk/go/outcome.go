package kubewasm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// Outcome is a successful reconcile: the desired actions, performed in
// order by the host's applier (which checks each against the
// declaration), and an optional requeue. Chain its methods.
//
// Children are never pruned implicitly: an object no longer applied stays
// unless its type was declared with OwnsSet. To remove it, Delete it.
type Outcome struct {
	actions []action
	// requeue is the RequeueAfter asked for, if any.
	requeue *time.Duration
	// finalizer is what NeedsFinalizer said, if it did.
	finalizer *bool
	// err is the first object that could not be encoded.
	err error
}

// actionKind is an action's kind, as the contract names it.
type actionKind string

const (
	applyAction       actionKind = "apply"
	applyStatusAction actionKind = "apply-status"
	deleteAction      actionKind = "delete"
	eventAction       actionKind = "event"
)

type action struct {
	kind actionKind
	// object is the JSON text of an apply or a status apply.
	object string
	owned  bool
	force  bool
	// target is the type and key of a delete.
	target        Type
	key           Key
	preconditions Preconditions
	event         Event
}

// NewOutcome is an outcome with no action.
func NewOutcome() *Outcome { return &Outcome{} }

// ApplyOption changes how Apply applies.
type ApplyOption int

const (
	// NotOwned: the primary is not set as the object's controller owner
	// (the garbage collector leaves it when the primary goes).
	NotOwned ApplyOption = iota + 1
	// NoForce: an apply that would take over fields another field manager
	// (a person's `kubectl apply`) set to other values fails with a
	// conflict naming them, and the key is retried. For partial applies of
	// objects people also edit.
	NoForce
)

// Apply applies object (a k8s.io/api struct, an unstructured object, or
// anything that encodes to a Kubernetes object as JSON) by server-side
// apply under the plugin's field manager: owned by the primary and
// forcing its fields, unless options say otherwise. Its apiVersion and
// kind are filled in from its Go type when unset.
func (o *Outcome) Apply(object any, options ...ApplyOption) *Outcome {
	text, err := encode(object, false)
	if err != nil {
		o.fail(err)
		return o
	}
	a := action{kind: applyAction, object: text, owned: true, force: true}
	for _, option := range options {
		switch option {
		case NotOwned:
			a.owned = false
		case NoForce:
			a.force = false
		}
	}
	o.actions = append(o.actions, a)
	return o
}

// ApplyStatus applies object's status (its identity and `status` are
// sent).
func (o *Outcome) ApplyStatus(object any) *Outcome {
	text, err := encode(object, true)
	if err != nil {
		o.fail(err)
		return o
	}
	o.actions = append(o.actions, action{kind: applyStatusAction, object: text})
	return o
}

// Preconditions are what must still hold for a delete: the object's uid
// (empty: the uid the host's cache held for it, so a recreated object of
// the same name is never deleted by mistake) and resourceVersion (empty:
// any).
type Preconditions struct {
	UID             string
	ResourceVersion string
}

// Delete deletes object (its type, name and namespace are read from it)
// while preconditions hold.
func (o *Outcome) Delete(object any, preconditions Preconditions) *Outcome {
	t, err := typeFor(object, "")
	if err != nil {
		o.fail(err)
		return o
	}
	text, err := encode(object, false)
	if err != nil {
		o.fail(err)
		return o
	}
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(text), &meta); err != nil {
		o.fail(err)
		return o
	}
	return o.DeleteKey(t, Key{Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name}, preconditions)
}

// DeleteKey deletes the object of type t and key while preconditions
// hold.
func (o *Outcome) DeleteKey(t Type, key Key, preconditions Preconditions) *Outcome {
	o.actions = append(o.actions, action{kind: deleteAction, target: t, key: key, preconditions: preconditions})
	return o
}

// Event is a Kubernetes event (events.k8s.io/v1) to record, about the
// primary unless Regarding is set.
type Event struct {
	Reason  string
	Action  string
	Note    string
	Warning bool
	// Regarding is the object it is about, of a declared type; nil: the
	// primary.
	Regarding *Regarding
}

// Regarding names an object by type and key.
type Regarding struct {
	Type Type
	Key  Key
}

// Event records e.
func (o *Outcome) Event(e Event) *Outcome {
	o.actions = append(o.actions, action{kind: eventAction, event: e})
	return o
}

// RequeueAfter reconciles the key again after d, even with no change.
func (o *Outcome) RequeueAfter(d time.Duration) *Outcome {
	o.requeue = &d
	return o
}

// NeedsFinalizer says whether this primary needs the managed finalizer
// (the default: yes). Ignored without Declaration.Finalizer.
func (o *Outcome) NeedsFinalizer(needed bool) *Outcome {
	o.finalizer = &needed
	return o
}

func (o *Outcome) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// encode is object's JSON text with its apiVersion and kind filled in from
// its Go type when unset, and without its zero-valued omitempty struct
// fields (zero.go: `"strategy": {}`, `"creationTimestamp": null`), which
// server-side apply would take as set; a status apply keeps its status.
// Its keys come out sorted at every level, as the other SDKs write them.
func encode(object any, status bool) (string, error) {
	raw, err := json.Marshal(object)
	if err != nil {
		return "", fmt.Errorf("cannot encode %T: %w", object, err)
	}
	// Numbers kept as written (a float64 would turn 1000000 into 1e+06).
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var fields map[string]any
	if err := decoder.Decode(&fields); err != nil || fields == nil {
		return "", fmt.Errorf("%T is no object: %s", object, raw)
	}
	if _, ok := fields["kind"]; !ok {
		if t, err := TypeOf(object); err == nil {
			fields["apiVersion"], fields["kind"] = t.APIVersion(), t.Kind
		}
	}
	var zero [][]string
	zeroPaths(reflect.ValueOf(object), nil, &zero)
	for _, path := range zero {
		if status && len(path) == 1 && path[0] == "status" {
			continue
		}
		dropPath(fields, path)
	}
	text, err := json.Marshal(fields)
	return string(text), err
}

// Applied are the objects applied, in order, as JSON (decode one with
// json.Unmarshal into its k8s.io/api struct).
func (o *Outcome) Applied() []json.RawMessage { return o.objects(applyAction) }

// Statuses are the objects whose status is applied, in order, as JSON.
func (o *Outcome) Statuses() []json.RawMessage { return o.objects(applyStatusAction) }

func (o *Outcome) objects(kind actionKind) []json.RawMessage {
	var objects []json.RawMessage
	for _, a := range o.actions {
		if a.kind == kind {
			objects = append(objects, json.RawMessage(a.object))
		}
	}
	return objects
}

// Deleted are the objects deleted, in order.
func (o *Outcome) Deleted() []Regarding {
	var deleted []Regarding
	for _, a := range o.actions {
		if a.kind == deleteAction {
			deleted = append(deleted, Regarding{Type: a.target, Key: a.key})
		}
	}
	return deleted
}

// Events are the events recorded, in order.
func (o *Outcome) Events() []Event {
	var events []Event
	for _, a := range o.actions {
		if a.kind == eventAction {
			events = append(events, a.event)
		}
	}
	return events
}

// Requeue is the RequeueAfter asked for; false without one.
func (o *Outcome) Requeue() (time.Duration, bool) {
	if o.requeue == nil {
		return 0, false
	}
	return *o.requeue, true
}

// Finalizer is what NeedsFinalizer said; false (second) when it said
// nothing.
func (o *Outcome) Finalizer() (needed, said bool) {
	if o.finalizer == nil {
		return false, false
	}
	return *o.finalizer, true
}
