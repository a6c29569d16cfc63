// Package kubewasm writes kubewasm controller plugins in Go.
//
// A plugin is a Reconciler, exported once from the main package's init:
//
//	type Hello struct{}
//
//	func (Hello) Declare() *kubewasm.Declaration {
//		return kubewasm.NewDeclaration("hello", "0.1.0", &corev1.ConfigMap{}).
//			Owns(&appsv1.Deployment{})
//	}
//
//	func (Hello) Reconcile(ctx *kubewasm.Context) (*kubewasm.Outcome, error) {
//		var cm corev1.ConfigMap
//		if err := ctx.Primary(&cm); err != nil {
//			return nil, kubewasm.IgnoreNotFound(err)
//		}
//		return kubewasm.NewOutcome().Apply(&appsv1.Deployment{...}), nil
//	}
//
//	func init() { kubewasm.Export(Hello{}) }
//
// Reads (Context.Get, Context.List) come from the host's caches, limited to
// the declared types; writes are the desired actions of an Outcome, which
// the host checks against the declaration and performs. Objects are the
// k8s.io/api structs (or unstructured ones) as JSON. kubewasmtest runs a
// Reconciler natively under `go test`, with the host's rules.
package kubewasm

import "time"

// Reconciler is a plugin's logic. It may also be a Finalizer, a KeyMapper
// and a Scheduler.
type Reconciler interface {
	// Declare says what the plugin reconciles, reads and writes; called
	// once, at load.
	Declare() *Declaration
	// Reconcile answers one primary key with the desired actions; an
	// error fails the call and the host retries the key with backoff.
	// Level-triggered: it sees the key, never the event.
	Reconcile(ctx *Context) (*Outcome, error)
}

// Finalizer cleans up for a primary being deleted (with
// Declaration.Finalizer); the finalizer goes once Finalize succeeds with
// no requeue.
type Finalizer interface {
	Finalize(ctx *Context) (*Outcome, error)
}

// KeyMapper maps a changed object of a type declared with the Custom
// mapping (Context.Changed, Context.Previous, Context.Deleted) to the
// primary keys to reconcile.
type KeyMapper interface {
	MapKeys(ctx *Context) ([]Key, error)
}

// Scheduler runs on the declared Cron schedule (Context.ScheduledAt):
// there is no primary, so applies are NotOwned and events say what they
// are about.
type Scheduler interface {
	Scheduled(ctx *Context) (*Outcome, error)
}

// exported is the Reconciler the component's exports call.
var exported Reconciler

// Export makes r the plugin: call it once, from the main package's init.
func Export(r Reconciler) { exported = r }

// finalize is r's Finalize, or nothing to do.
func finalize(r Reconciler, ctx *Context) (*Outcome, error) {
	if f, ok := r.(Finalizer); ok {
		return f.Finalize(ctx)
	}
	return NewOutcome(), nil
}

// mapKeys is r's MapKeys, or no key.
func mapKeys(r Reconciler, ctx *Context) ([]Key, error) {
	if m, ok := r.(KeyMapper); ok {
		return m.MapKeys(ctx)
	}
	return nil, nil
}

// scheduled is r's Scheduled, or nothing to do.
func scheduled(r Reconciler, ctx *Context) (*Outcome, error) {
	if s, ok := r.(Scheduler); ok {
		return s.Scheduled(ctx)
	}
	return NewOutcome(), nil
}

// backend is where reads and log records go: the host's imports in a
// component, the fixtures of kubewasmtest natively.
type backend interface {
	get(t Type, key Key) (text string, found bool, err error)
	list(t Type, namespace, selector string) ([]string, error)
	log(level Level, message string, fields [][2]string)
	now() time.Time
}
