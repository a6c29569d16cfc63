package kubewasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// ErrNotFound is what Get returns when the cache holds no such object
// (test it with errors.Is, or drop it with IgnoreNotFound).
var ErrNotFound = errors.New("not found")

// ErrReadDenied wraps the host's refusal of a read the declaration does
// not grant; the text says which type and verb.
var ErrReadDenied = errors.New("read denied")

// IgnoreNotFound is err, unless it is ErrNotFound.
func IgnoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Context is one call: the key reconciled and reads from the host's
// caches, shaped like controller-runtime's client.Reader. Reads see the
// cluster as of the last watch event the host processed.
type Context struct {
	// Key is the primary's (empty in Scheduled).
	Key Key
	// Type is the primary's (in MapKeys, the changed object's).
	Type Type
	// Retries counts the failures of this key in a row before this call.
	Retries uint32
	// LastFailure is why the previous attempt failed, if it did.
	LastFailure string
	// Deleted, in MapKeys: the changed object was deleted (the object
	// given is its last state).
	Deleted bool
	// ScheduledAt, in Scheduled: the time the schedule named.
	ScheduledAt time.Time

	config   string
	changed  string
	previous string
	host     backend
}

// Config decodes the plugin's configuration (JSON; `{}` when none is set)
// into v.
func (c *Context) Config(v any) error {
	text := c.config
	if text == "" {
		text = "{}"
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}

// Changed, in MapKeys, decodes the changed object into v (a deleted
// object's last state).
func (c *Context) Changed(v any) error {
	return json.Unmarshal([]byte(c.changed), v)
}

// Previous, in MapKeys, decodes a modified object's state before the
// change into v; false for an object created, listed or deleted. Map it
// too: its keys are the primaries the object left.
func (c *Context) Previous(v any) (bool, error) {
	if c.previous == "" {
		return false, nil
	}
	return true, json.Unmarshal([]byte(c.previous), v)
}

// Now is the time of the call: the host's clock for it (frozen for the
// call; `kubewasm replay --now` sets it), or the harness's.
func (c *Context) Now() time.Time { return c.host.now() }

// Logger is a structured logger whose records the host forwards to its
// own log, with the plugin's name and the key attached.
func (c *Context) Logger() *slog.Logger { return slog.New(handler{host: c.host}) }

// Primary decodes the primary object into v; ErrNotFound once it is gone.
func (c *Context) Primary(v any) error { return c.read(c.Type, c.Key, v) }

// Get decodes the object of key into v, whose type says what to read: a
// k8s.io/api struct, or an object whose apiVersion and kind are set
// (`*unstructured.Unstructured`). ErrNotFound when the cache has none.
func (c *Context) Get(key Key, v any) error {
	t, err := typeFor(v, "")
	if err != nil {
		return err
	}
	return c.read(t, key, v)
}

// GetOf decodes the object of type t and key into v (any struct, a map,
// json.RawMessage); ErrNotFound when the cache has none.
func (c *Context) GetOf(t Type, key Key, v any) error { return c.read(t, key, v) }

func (c *Context) read(t Type, key Key, v any) error {
	text, found, err := c.host.get(t, key)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%s %q: %w", t, key, ErrNotFound)
	}
	return json.Unmarshal([]byte(text), v)
}

// ListOption narrows a List: InNamespace, MatchingLabels,
// MatchingSelector.
type ListOption interface {
	applyToList(*listOptions)
}

type listOptions struct {
	namespace string
	selector  []string
}

// InNamespace lists one namespace only.
type InNamespace string

func (n InNamespace) applyToList(o *listOptions) { o.namespace = string(n) }

// MatchingLabels lists the objects carrying every one of these labels.
type MatchingLabels map[string]string

func (m MatchingLabels) applyToList(o *listOptions) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		o.selector = append(o.selector, k+"="+m[k])
	}
}

// MatchingSelector lists the objects a label selector takes
// (`app=web,tier in (a,b),!legacy`).
type MatchingSelector string

func (s MatchingSelector) applyToList(o *listOptions) {
	if s != "" {
		o.selector = append(o.selector, string(s))
	}
}

// List decodes into list (a k8s.io/api list, `&appsv1.DeploymentList{}`,
// or one whose apiVersion and kind are set) the objects of its item type
// the options take, ordered by namespace then name.
func (c *Context) List(list any, options ...ListOption) error {
	t, err := typeFor(list, "List")
	if err != nil {
		return err
	}
	return c.ListOf(t, list, options...)
}

// ListOf decodes into list (a struct with `items`, or a map) the objects
// of type t the options take, ordered by namespace then name.
func (c *Context) ListOf(t Type, list any, options ...ListOption) error {
	var o listOptions
	for _, option := range options {
		option.applyToList(&o)
	}
	texts, err := c.host.list(t, o.namespace, strings.Join(o.selector, ","))
	if err != nil {
		return err
	}
	items := make([]json.RawMessage, len(texts))
	for i, text := range texts {
		items[i] = json.RawMessage(text)
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": t.APIVersion(),
		"kind":       t.Kind + "List",
		"items":      items,
	})
	if err != nil {
		return err
	}
	return json.Unmarshal(body, list)
}

// kinded is an object that says its apiVersion and kind
// (`*unstructured.Unstructured` once they are set).
type kinded interface {
	GetAPIVersion() string
	GetKind() string
}

// typeFor is the type v holds (less suffix, `List`, for a list): a
// Typed's, the apiVersion and kind v says (the host matches a read's type
// by them), or a k8s.io/api struct's.
func typeFor(v any, suffix string) (Type, error) {
	if t, ok := v.(Typed); ok {
		return t.ResourceType(), nil
	}
	if k, ok := v.(kinded); ok && k.GetKind() != "" {
		group, version, found := strings.Cut(k.GetAPIVersion(), "/")
		if !found {
			group, version = "", group
		}
		return Type{Group: group, Version: version, Kind: strings.TrimSuffix(k.GetKind(), suffix)}, nil
	}
	return typeNamed(v, suffix)
}
