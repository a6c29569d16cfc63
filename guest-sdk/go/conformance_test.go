package kubewasm

// The shared conformance fixtures (tests/conformance/reads.json and
// writes.json), which the host runs too: the harness must answer every
// case as the host does.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type fixtureType struct {
	Group      string `json:"group"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Plural     string `json:"plural"`
	Namespaced bool   `json:"namespaced"`
}

func (t fixtureType) Type() Type {
	return Type{Group: t.Group, Version: t.Version, Kind: t.Kind, Plural: t.Plural, Namespaced: t.Namespaced}
}

type fixtureKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type fixtureDeclaration struct {
	Name            string      `json:"name"`
	Version         string      `json:"version"`
	Primary         fixtureType `json:"primary"`
	PrimaryVerbs    []Verb      `json:"primaryVerbs"`
	PrimarySelector string      `json:"primarySelector"`
	Secondaries     []struct {
		Type          fixtureType `json:"type"`
		Verbs         []Verb      `json:"verbs"`
		LabelSelector string      `json:"labelSelector"`
	} `json:"secondaries"`
}

func (d fixtureDeclaration) declaration() *Declaration {
	declaration := NewDeclaration(d.Name, d.Version, d.Primary.Type()).Verbs(d.PrimaryVerbs...).
		Selecting(d.PrimarySelector)
	for _, s := range d.Secondaries {
		declaration.Secondary(Secondary{Type: s.Type.Type(), Verbs: s.Verbs, LabelSelector: s.LabelSelector})
	}
	return declaration
}

func fixtures(t *testing.T, name string, v any) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "tests", "conformance", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(text, v); err != nil {
		t.Fatal(err)
	}
}

// reader reads one case's way, as plugin code does.
type reader struct {
	declaration *Declaration
	read        func(*Context) (map[string]any, error)
	got         map[string]any
}

func (r *reader) Declare() *Declaration { return r.declaration }

func (r *reader) Reconcile(ctx *Context) (*Outcome, error) {
	got, err := r.read(ctx)
	r.got = got
	return NewOutcome(), err
}

func TestTheHarnessAnswersEveryReadAsTheHostDoes(t *testing.T) {
	var file struct {
		Scenarios []struct {
			Name        string             `json:"name"`
			Declaration fixtureDeclaration `json:"declaration"`
			Objects     []json.RawMessage  `json:"objects"`
			Cases       []struct {
				Read          string         `json:"read"`
				Type          fixtureType    `json:"type"`
				Key           fixtureKey     `json:"key"`
				Namespace     *string        `json:"namespace"`
				LabelSelector string         `json:"labelSelector"`
				Expect        map[string]any `json:"expect"`
			} `json:"cases"`
		} `json:"scenarios"`
	}
	fixtures(t, "reads.json", &file)
	checked := 0
	for _, scenario := range file.Scenarios {
		for i, c := range scenario.Cases {
			t.Run(fmt.Sprintf("%s/%d", scenario.Name, i+1), func(t *testing.T) {
				r := &reader{declaration: scenario.Declaration.declaration()}
				r.read = func(ctx *Context) (map[string]any, error) {
					if c.Read == "get" {
						var object map[string]any
						err := ctx.GetOf(c.Type.Type(), Key(c.Key), &object)
						if errors.Is(err, ErrNotFound) {
							return map[string]any{"found": false}, nil
						}
						return map[string]any{"found": err == nil}, err
					}
					var list struct {
						Items []struct {
							Metadata struct{ Namespace, Name string } `json:"metadata"`
						} `json:"items"`
					}
					options := []ListOption{MatchingSelector(c.LabelSelector)}
					if c.Namespace != nil {
						options = append(options, InNamespace(*c.Namespace))
					}
					if err := ctx.ListOf(c.Type.Type(), &list, options...); err != nil {
						return nil, err
					}
					items := []any{}
					for _, item := range list.Items {
						items = append(items, Key(item.Metadata).String())
					}
					return map[string]any{"items": items}, nil
				}
				h := NewHarness(r)
				for _, object := range scenario.Objects {
					h.Object(object)
				}
				got := map[string]any{}
				if _, err := h.Reconcile(Key{Namespace: "default", Name: "any"}); err != nil {
					text := err.Error()
					switch {
					case errors.Is(err, ErrReadDenied):
						got["denied"] = strings.TrimPrefix(text, "read denied: ")
					case strings.HasPrefix(text, fmt.Sprintf("invalid label selector `%s`", c.LabelSelector)):
						got["invalidSelector"] = c.LabelSelector
					default:
						got["error"] = text
					}
				} else {
					got = r.got
				}
				if !reflect.DeepEqual(got, c.Expect) {
					t.Errorf("got %v, want %v", got, c.Expect)
				}
			})
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d cases", checked)
	}
}

// writer returns one case's actions.
type writer struct {
	declaration *Declaration
	actions     []map[string]json.RawMessage
}

func (w *writer) Declare() *Declaration { return w.declaration }

func (w *writer) Reconcile(*Context) (*Outcome, error) {
	out := NewOutcome()
	for _, a := range w.actions {
		switch {
		case a["apply"] != nil:
			var options []ApplyOption
			var owned *bool
			if raw, ok := a["owned"]; ok {
				_ = json.Unmarshal(raw, &owned)
			}
			if owned != nil && !*owned {
				options = append(options, NotOwned)
			}
			out.Apply(a["apply"], options...)
		case a["applyStatus"] != nil:
			out.ApplyStatus(a["applyStatus"])
		case a["delete"] != nil:
			var d struct {
				Type fixtureType `json:"type"`
				Key  fixtureKey  `json:"key"`
			}
			if err := json.Unmarshal(a["delete"], &d); err != nil {
				return nil, err
			}
			out.DeleteKey(d.Type.Type(), Key(d.Key), Preconditions{})
		default:
			var e struct{ Reason, Action, Note string }
			if err := json.Unmarshal(a["event"], &e); err != nil {
				return nil, err
			}
			out.Event(Event{Reason: e.Reason, Action: e.Action, Note: e.Note})
		}
	}
	return out, nil
}

func TestTheHarnessRefusesEveryWriteTheHostRefuses(t *testing.T) {
	var file struct {
		Scenarios []struct {
			Name        string             `json:"name"`
			Declaration fixtureDeclaration `json:"declaration"`
			Key         fixtureKey         `json:"key"`
			Primary     json.RawMessage    `json:"primary"`
			Cases       []struct {
				Actions []map[string]json.RawMessage `json:"actions"`
				Expect  map[string]any               `json:"expect"`
			} `json:"cases"`
		} `json:"scenarios"`
	}
	fixtures(t, "writes.json", &file)
	checked := 0
	for _, scenario := range file.Scenarios {
		for i, c := range scenario.Cases {
			t.Run(fmt.Sprintf("%s/%d", scenario.Name, i+1), func(t *testing.T) {
				h := NewHarness(&writer{declaration: scenario.Declaration.declaration(), actions: c.Actions}).
					Object(scenario.Primary)
				got := map[string]any{"ok": true}
				if _, err := h.Reconcile(Key(scenario.Key)); err != nil {
					got = map[string]any{"denied": err.Error()}
				}
				if !reflect.DeepEqual(got, c.Expect) {
					t.Errorf("got %v, want %v", got, c.Expect)
				}
			})
			checked++
		}
	}
	if checked < 7 {
		t.Errorf("only %d cases", checked)
	}
}
