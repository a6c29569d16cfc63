//go:build wasip1

package kubewasm

// The component side: the contract's exports answered by the Reconciler
// given to Export, reads and logs through the host's imports.

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	exports "kubewasm.dev/guest/internal/wit/exports/export_kubewasm_controller_plugin"
	_ "kubewasm.dev/guest/internal/wit/exports/wit_exports"
	"kubewasm.dev/guest/internal/wit/imports/kubewasm_controller_cache"
	"kubewasm.dev/guest/internal/wit/imports/kubewasm_controller_log"
	plugin "kubewasm.dev/guest/internal/wit/imports/kubewasm_controller_plugin"
	types "kubewasm.dev/guest/internal/wit/imports/kubewasm_controller_types"
	witTypes "kubewasm.dev/guest/internal/witpkg/types"
)

func init() { exports.Exported = component{} }

// component answers the exports with the exported Reconciler.
type component struct{}

// declaration is the exported Reconciler's, built once per instance.
var declaration *Declaration

// declared is the declaration, built on first use (an instance is entered
// by one call at a time).
func declared() *Declaration {
	if declaration == nil {
		declaration = exported.Declare()
	}
	return declaration
}

func (component) Declare() plugin.Declaration {
	if exported == nil {
		panic("kubewasm: no Reconciler: call kubewasm.Export from the main package's init")
	}
	d := declared()
	if err := d.Err(); err != nil {
		panic(fmt.Sprintf("kubewasm: the declaration of %q: %v", d.Name, err))
	}
	out := plugin.Declaration{
		Name:             d.Name,
		Version:          d.Version,
		Primary:          witType(d.Primary),
		PrimaryVerbs:     witVerbs(d.PrimaryVerbs),
		PrimarySelector:  d.PrimarySelector,
		ManagedFinalizer: d.ManagedFinalizer,
		ResyncSeconds:    optional(d.ResyncSeconds),
		MaxConcurrency:   optional(d.MaxConcurrency),
		ConfigSchema:     optionalString(d.ConfigSchema),
		Schedule:         optionalString(d.Schedule),
	}
	for _, s := range d.Secondaries {
		out.Secondaries = append(out.Secondaries, plugin.Secondary{
			Type:          witType(s.Type),
			Verbs:         witVerbs(s.Verbs),
			LabelSelector: s.LabelSelector,
			Mapping:       witMapping(s.Mapping),
			Prune:         s.Prune,
		})
	}
	return out
}

func (component) Reconcile(r plugin.Request) witTypes.Result[plugin.Outcome, plugin.Failure] {
	return outcome(call(exported.Reconcile, requestContext(r)))
}

func (component) Finalize(r plugin.Request) witTypes.Result[plugin.Outcome, plugin.Failure] {
	return outcome(call(func(ctx *Context) (*Outcome, error) { return finalize(exported, ctx) },
		requestContext(r)))
}

func (component) Scheduled(r plugin.ScheduledRequest) witTypes.Result[plugin.Outcome, plugin.Failure] {
	ctx := &Context{Type: declared().Primary, config: r.Config, host: host{}}
	at, err := time.Parse(time.RFC3339Nano, r.ScheduledAt)
	if err != nil {
		return failure[plugin.Outcome](fmt.Errorf("scheduled-at %q: %w", r.ScheduledAt, err))
	}
	ctx.ScheduledAt = at
	return outcome(call(func(ctx *Context) (*Outcome, error) { return scheduled(exported, ctx) }, ctx))
}

func (component) MapKeys(r plugin.MapRequest) witTypes.Result[[]types.ObjectKey, plugin.Failure] {
	var meta struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(r.Object), &meta); err != nil {
		return failure[[]types.ObjectKey](fmt.Errorf("the changed object: %w", err))
	}
	ctx := &Context{
		Key:     Key{Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name},
		Type:    sdkType(r.Type),
		Deleted: r.Deleted,
		config:  r.Config,
		changed: r.Object,
		host:    host{},
	}
	if r.Previous.IsSome() {
		ctx.previous = r.Previous.Some()
	}
	var keys []Key
	err := recovered(func() (err error) {
		keys, err = mapKeys(exported, ctx)
		return err
	})
	if err != nil {
		return failure[[]types.ObjectKey](err)
	}
	out := make([]types.ObjectKey, len(keys))
	for i, k := range keys {
		out[i] = witKey(k)
	}
	return witTypes.Ok[[]types.ObjectKey, plugin.Failure](out)
}

func requestContext(r plugin.Request) *Context {
	ctx := &Context{
		Key:     Key{Namespace: r.Key.Namespace.SomeOr(""), Name: r.Key.Name},
		Type:    sdkType(r.Type),
		Retries: r.Retries,
		config:  r.Config,
		host:    host{},
	}
	if r.LastFailure.IsSome() {
		ctx.LastFailure = r.LastFailure.Some()
	}
	return ctx
}

// call runs f, a panic turned into its error (with where it happened).
func call(f func(*Context) (*Outcome, error), ctx *Context) (out *Outcome, err error) {
	err = recovered(func() (err error) {
		out, err = f(ctx)
		return err
	})
	return out, err
}

func recovered(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

func failure[T any](err error) witTypes.Result[T, plugin.Failure] {
	return witTypes.Err[T](plugin.Failure{Message: err.Error()})
}

// outcome is the contract's form of a call's answer.
func outcome(o *Outcome, err error) witTypes.Result[plugin.Outcome, plugin.Failure] {
	if err == nil && o != nil {
		err = o.err
	}
	if err != nil {
		return failure[plugin.Outcome](err)
	}
	if o == nil {
		o = NewOutcome()
	}
	out := plugin.Outcome{
		RequeueAfterMs: witTypes.None[uint64](),
		Finalizer:      witTypes.None[bool](),
	}
	if o.requeue != nil {
		out.RequeueAfterMs = witTypes.Some(uint64(o.requeue.Milliseconds()))
	}
	if o.finalizer != nil {
		out.Finalizer = witTypes.Some(*o.finalizer)
	}
	for _, a := range o.actions {
		out.Actions = append(out.Actions, witAction(a))
	}
	return witTypes.Ok[plugin.Outcome, plugin.Failure](out)
}

func witAction(a action) plugin.Action {
	switch a.kind {
	case applyAction:
		return plugin.MakeActionApply(plugin.Apply{Object: a.object, Owned: a.owned, Force: a.force})
	case applyStatusAction:
		return plugin.MakeActionApplyStatus(a.object)
	case deleteAction:
		return plugin.MakeActionDelete(plugin.Deletion{
			Type: witType(a.target),
			Key:  witKey(a.key),
			Preconditions: plugin.Preconditions{
				Uid:             optionalString(a.preconditions.UID),
				ResourceVersion: optionalString(a.preconditions.ResourceVersion),
			},
		})
	default:
		e := plugin.Event{
			Regarding: witTypes.None[witTypes.Tuple2[types.ResourceType, types.ObjectKey]](),
			Type:      plugin.EventType_Normal,
			Reason:    a.event.Reason,
			Action:    a.event.Action,
			Note:      a.event.Note,
		}
		if a.event.Warning {
			e.Type = plugin.EventType_Warning
		}
		if r := a.event.Regarding; r != nil {
			e.Regarding = witTypes.Some(witTypes.Tuple2[types.ResourceType, types.ObjectKey]{
				F0: witType(r.Type), F1: witKey(r.Key),
			})
		}
		return plugin.MakeActionEvent(e)
	}
}

func witType(t Type) types.ResourceType {
	return types.ResourceType{Group: t.Group, Version: t.Version, Kind: t.Kind, Plural: t.Plural,
		Namespaced: t.Namespaced}
}

func sdkType(t types.ResourceType) Type {
	return Type{Group: t.Group, Version: t.Version, Kind: t.Kind, Plural: t.Plural, Namespaced: t.Namespaced}
}

func witKey(k Key) types.ObjectKey {
	return types.ObjectKey{Namespace: optionalString(k.Namespace), Name: k.Name}
}

var verbCodes = map[Verb]types.Verb{
	Get: types.Verb_Get, List: types.Verb_List, Watch: types.Verb_Watch,
	Apply: types.Verb_Apply, ApplyStatus: types.Verb_ApplyStatus, Delete: types.Verb_Delete,
}

func witVerbs(vs []Verb) []types.Verb {
	out := make([]types.Verb, len(vs))
	for i, v := range vs {
		out[i] = verbCodes[v]
	}
	return out
}

func witMapping(m Mapping) plugin.Mapping {
	switch m.kind {
	case OwnerReferences.kind:
		return plugin.MakeMappingOwnerReferences()
	case "label":
		return plugin.MakeMappingLabel(m.label)
	case Custom.kind:
		return plugin.MakeMappingCustom()
	case Reads.kind:
		return plugin.MakeMappingReads()
	default:
		return plugin.MakeMappingNone()
	}
}

func optional(v *uint32) witTypes.Option[uint32] {
	if v == nil {
		return witTypes.None[uint32]()
	}
	return witTypes.Some(*v)
}

func optionalString(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

// host reads and logs through the host's imports.
type host struct{}

func (host) get(t Type, key Key) (string, bool, error) {
	result := kubewasm_controller_cache.Get(witType(t), witKey(key))
	if result.IsErr() {
		return "", false, cacheError(result.Err())
	}
	found := result.Ok()
	if found.IsNone() {
		return "", false, nil
	}
	return found.Some(), true, nil
}

func (host) list(t Type, namespace, selector string) ([]string, error) {
	result := kubewasm_controller_cache.List(witType(t), optionalString(namespace), selector)
	if result.IsErr() {
		return nil, cacheError(result.Err())
	}
	return result.Ok(), nil
}

func cacheError(e kubewasm_controller_cache.CacheError) error {
	if e.Tag() == kubewasm_controller_cache.CacheError_Denied {
		return fmt.Errorf("%w: %s", ErrReadDenied, e.Denied())
	}
	return fmt.Errorf("%s", e.InvalidSelector())
}

var levelCodes = map[Level]kubewasm_controller_log.Level{
	LevelTrace: kubewasm_controller_log.Level_Trace, LevelDebug: kubewasm_controller_log.Level_Debug,
	LevelInfo: kubewasm_controller_log.Level_Info, LevelWarn: kubewasm_controller_log.Level_Warn,
	LevelError: kubewasm_controller_log.Level_Error,
}

func (host) log(level Level, message string, fields [][2]string) {
	pairs := make([]witTypes.Tuple2[string, string], len(fields))
	for i, f := range fields {
		pairs[i] = witTypes.Tuple2[string, string]{F0: f[0], F1: f[1]}
	}
	kubewasm_controller_log.Log(levelCodes[level], message, pairs)
}

// now is the wall clock the host gives the call.
func (host) now() time.Time { return time.Now().UTC() }
