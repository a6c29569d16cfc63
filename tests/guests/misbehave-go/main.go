// A Go test plugin that misbehaves on request (config `mode`): `ok` applies a
// copy of its ConfigMap, `error` fails, `panic` panics, `loop` never returns,
// `goroutine` hands the CPU to a goroutine that never ends, `oom` allocates
// until the memory limit stops it, `sleep` sleeps for an hour,
// `flood-actions` returns 1,200 applies, `bad-name` applies a ConfigMap named
// `a/b`, `language` returns an event whose note is `go`. A Secret maps to the
// ConfigMaps its label `target` names, now and before; `finalize` and
// `scheduled` record an event.
package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"kubewasm.dev/guest"
)

type misbehave struct{}

func init() { kubewasm.Export(misbehave{}) }

func (misbehave) Declare() *kubewasm.Declaration {
	return kubewasm.NewDeclaration("misbehave-go", "0.1.0", &corev1.ConfigMap{}).
		Verbs(kubewasm.Apply).
		Watches(&corev1.Secret{}, kubewasm.Custom).
		Cron("@hourly").
		Schema(`{"type": "object", "required": ["mode"], "properties": {"mode": {"type": "string"}}}`)
}

// hoard keeps what oom allocates reachable.
var hoard [][]byte

func (misbehave) Reconcile(ctx *kubewasm.Context) (*kubewasm.Outcome, error) {
	var config struct{ Mode string }
	if err := ctx.Config(&config); err != nil {
		return nil, err
	}
	out := kubewasm.NewOutcome()
	switch config.Mode {
	case "ok":
		var cm corev1.ConfigMap
		if err := ctx.Primary(&cm); err != nil {
			return nil, err
		}
		return out.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name + "-copy"}, Data: cm.Data}), nil
	case "language":
		return out.Event(kubewasm.Event{Reason: "Language", Action: "Reconcile", Note: "go"}), nil
	case "error":
		return nil, errors.New("misbehave-go was asked to fail")
	case "panic":
		panic("misbehave-go was asked to panic")
	case "loop":
		for n := 0; ; n++ {
			_ = n
		}
	case "goroutine":
		go func() {
			for {
			}
		}()
		runtime.Gosched()
		return out, nil
	case "oom":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "sleep":
		time.Sleep(time.Hour)
		return out, nil
	case "flood-actions":
		for i := range 1200 {
			out.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}})
		}
		return out, nil
	case "bad-name":
		return out.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a/b"}}, kubewasm.NotOwned), nil
	}
	return nil, fmt.Errorf("unknown mode %q", config.Mode)
}

func (misbehave) MapKeys(ctx *kubewasm.Context) ([]kubewasm.Key, error) {
	var now, before corev1.Secret
	if err := ctx.Changed(&now); err != nil {
		return nil, err
	}
	target, ok := now.Labels["target"]
	if !ok {
		return nil, fmt.Errorf("secret %s has no label `target`", now.Name)
	}
	keys := []kubewasm.Key{{Namespace: now.Namespace, Name: target}}
	if found, err := ctx.Previous(&before); err != nil {
		return nil, err
	} else if found && before.Labels["target"] != target {
		keys = append(keys, kubewasm.Key{Namespace: before.Namespace, Name: before.Labels["target"]})
	}
	return keys, nil
}

func (misbehave) Finalize(ctx *kubewasm.Context) (*kubewasm.Outcome, error) {
	return kubewasm.NewOutcome().Event(kubewasm.Event{Reason: "Finalized", Action: "Finalize", Note: ctx.Key.Name}), nil
}

func (misbehave) Scheduled(ctx *kubewasm.Context) (*kubewasm.Outcome, error) {
	configMap, err := kubewasm.TypeOf(&corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	return kubewasm.NewOutcome().Event(kubewasm.Event{
		Reason: "Scheduled", Action: "Report", Note: ctx.ScheduledAt.Format(time.RFC3339),
		Regarding: &kubewasm.Regarding{Type: configMap, Key: kubewasm.Key{Namespace: "default", Name: "cm"}},
	}), nil
}

func main() {}
