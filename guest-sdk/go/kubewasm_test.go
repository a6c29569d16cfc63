package kubewasm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestTypeOfShouldNameK8sAPIStructsAndTheirLists(t *testing.T) {
	for object, want := range map[any]Type{
		&appsv1.Deployment{}:  {Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Namespaced: true},
		&corev1.Namespace{}:   {Version: "v1", Kind: "Namespace", Plural: "namespaces"},
		&rbacv1.ClusterRole{}: {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Plural: "clusterroles"},
	} {
		if got, err := TypeOf(object); err != nil || got != want {
			t.Errorf("TypeOf(%T) = %v, %v; want %v", object, got, err, want)
		}
	}
	if got, err := typeFor(&appsv1.DeploymentList{}, "List"); err != nil || got.Kind != "Deployment" {
		t.Errorf("a list's type: %v, %v", got, err)
	}
	if _, err := TypeOf(&struct{}{}); err == nil || !strings.Contains(err.Error(), "give a kubewasm.Type") {
		t.Errorf("an unknown struct: %v", err)
	}
}

func TestADeclarationShouldImplyTheVerbsItsMappingsAndSetsNeed(t *testing.T) {
	d := NewDeclaration("demo", "0.1.0", &corev1.ConfigMap{}).
		Verbs(ApplyStatus).
		Owns(&appsv1.Deployment{}).
		OwnsSet(&corev1.Service{}).
		Watches(&corev1.Secret{}, Label("example.com/owner")).
		Reads(&corev1.Namespace{})
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	verbs := func(i int) string {
		var names []string
		for _, v := range d.Secondaries[i].Verbs {
			names = append(names, string(v))
		}
		return strings.Join(names, ",")
	}
	for i, want := range []string{"get,list,apply,delete,watch", "get,list,apply,delete,watch", "get,list,watch", "get,list"} {
		if got := verbs(i); got != want {
			t.Errorf("secondary %d: verbs %s, want %s", i, got, want)
		}
	}
	if !d.Secondaries[1].Prune || d.Secondaries[0].Prune {
		t.Error("only OwnsSet prunes")
	}
	bad := NewDeclaration("demo", "0.1.0", &corev1.ConfigMap{}).Verbs("patch").Owns(&struct{}{})
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), `unknown verb "patch"`) {
		t.Errorf("the first mistake is kept: %v", err)
	}
}

type configMaps struct{}

func (configMaps) Declare() *Declaration {
	return NewDeclaration("copier", "0.1.0", &corev1.ConfigMap{}).Owns(&appsv1.Deployment{}).
		Reads(&corev1.Secret{})
}

func (configMaps) Reconcile(ctx *Context) (*Outcome, error) {
	var cm corev1.ConfigMap
	if err := ctx.Primary(&cm); err != nil {
		return nil, IgnoreNotFound(err)
	}
	var secrets corev1.SecretList
	if err := ctx.List(&secrets, InNamespace(cm.Namespace), MatchingLabels{"app": cm.Name}); err != nil {
		return nil, err
	}
	replicas := int32(len(secrets.Items))
	ctx.Logger().Info("reconciled", "secrets", len(secrets.Items))
	return NewOutcome().
		Apply(&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
		}).
		RequeueAfter(90 * time.Second), nil
}

func TestTheHarnessShouldRunAReconcilerOverItsObjects(t *testing.T) {
	secret := func(name, app string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
			Labels: map[string]string{"app": app}}}
	}
	h := NewHarness(configMaps{}).
		Object(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", UID: "u-1"}}).
		Object(secret("a", "web")).Object(secret("b", "web")).Object(secret("c", "db"))
	out, err := h.Reconcile(Key{Namespace: "team-a", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	applied := out.Applied()
	if len(applied) != 1 {
		t.Fatalf("applied %d objects", len(applied))
	}
	var fields map[string]any
	if err := json.Unmarshal(applied[0], &fields); err != nil {
		t.Fatal(err)
	}
	if fields["apiVersion"] != "apps/v1" || fields["kind"] != "Deployment" {
		t.Errorf("apiVersion and kind filled in: %s", applied[0])
	}
	if _, ok := fields["status"]; ok {
		t.Errorf("no empty status sent: %s", applied[0])
	}
	if strings.Contains(string(applied[0]), "creationTimestamp") {
		t.Errorf("no null creationTimestamp sent: %s", applied[0])
	}
	if !strings.Contains(string(applied[0]), `"replicas":2`) {
		t.Errorf("two Secrets of the app: %s", applied[0])
	}
	if d, ok := out.Requeue(); !ok || d != 90*time.Second {
		t.Errorf("requeue %v %v", d, ok)
	}
	if len(h.Logs) != 1 || h.Logs[0].Fields[0] != [2]string{"secrets", "2"} {
		t.Errorf("logs %v", h.Logs)
	}

	// Gone: nothing to do.
	if out, err := NewHarness(configMaps{}).Reconcile(Key{Namespace: "team-a", Name: "web"}); err != nil ||
		len(out.Applied()) != 0 {
		t.Errorf("gone: %v %v", out, err)
	}
}

func TestAReadOfAnUndeclaredTypeShouldBeDeniedAsTheHostDeniesIt(t *testing.T) {
	h := NewHarness(configMaps{}).Object(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web",
		Namespace: "team-a", UID: "u-1"}})
	ctx := h.context(Key{Namespace: "team-a", Name: "web"})
	var pods corev1.PodList
	err := ctx.List(&pods)
	if !errors.Is(err, ErrReadDenied) || err.Error() !=
		"read denied: plugin `copier` may not list v1 Pod: the type was not declared" {
		t.Errorf("%v", err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	if err := ctx.Get(Key{Namespace: "team-a", Name: "web"}, u); err != nil || u.GetUID() != "u-1" {
		t.Errorf("an unstructured read: %v %v", u, err)
	}
}

// mirror copies each ConfigMap labelled `mirror` into a Secret; it maps a
// Secret back to its ConfigMap by that label, cleans up on finalize and
// reports on a schedule.
type mirror struct{}

func (mirror) Declare() *Declaration {
	return NewDeclaration("mirror", "0.1.0", &corev1.ConfigMap{}).
		Watches(&corev1.Secret{}, Custom).Finalizer().Cron("@hourly")
}

func (mirror) Reconcile(*Context) (*Outcome, error) { return NewOutcome(), nil }

func (mirror) Finalize(ctx *Context) (*Outcome, error) {
	return NewOutcome().Event(Event{Reason: "Finalized", Action: "Finalize", Note: ctx.Key.Name}), nil
}

func (mirror) MapKeys(ctx *Context) ([]Key, error) {
	var secret, before corev1.Secret
	if err := ctx.Changed(&secret); err != nil {
		return nil, err
	}
	keys := []Key{{Namespace: secret.Namespace, Name: secret.Labels["mirror"]}}
	if found, err := ctx.Previous(&before); err != nil {
		return nil, err
	} else if found && before.Labels["mirror"] != secret.Labels["mirror"] {
		keys = append(keys, Key{Namespace: before.Namespace, Name: before.Labels["mirror"]})
	}
	if ctx.Deleted {
		keys = keys[:1]
	}
	return keys, nil
}

func (mirror) Scheduled(ctx *Context) (*Outcome, error) {
	return NewOutcome().Event(Event{Reason: "Report", Action: "Report", Note: ctx.ScheduledAt.Format(time.RFC3339),
		Regarding: &Regarding{Type: Type{Version: "v1", Kind: "ConfigMap"}, Key: Key{Namespace: "ops", Name: "report"}}}), nil
}

func TestMapKeysFinalizeAndScheduledShouldRunThroughTheHarness(t *testing.T) {
	h := NewHarness(mirror{})
	secret := func(owner string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "team-a",
			Labels: map[string]string{"mirror": owner}}}
	}
	secretType, _ := TypeOf(&corev1.Secret{})
	keys, err := h.MapKeys(secretType, secret("b"), secret("a"), false)
	if err != nil || len(keys) != 2 || keys[0].Name != "b" || keys[1].Name != "a" {
		t.Errorf("a Secret moved from a to b: %v %v", keys, err)
	}
	if keys, err := h.MapKeys(secretType, secret("b"), nil, true); err != nil || len(keys) != 1 {
		t.Errorf("deleted: %v %v", keys, err)
	}
	out, err := h.Finalize(Key{Namespace: "team-a", Name: "web"})
	if err != nil || len(out.Events()) != 1 || out.Events()[0].Note != "web" {
		t.Errorf("finalize: %v %v", out, err)
	}
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	out, err = h.Scheduled(at)
	if err != nil || out.Events()[0].Note != "2026-12-05T03:00:00Z" {
		t.Errorf("scheduled: %v %v", out, err)
	}
	d := h.declaration
	if !d.ManagedFinalizer || d.Schedule != "@hourly" || d.Secondaries[0].Mapping != Custom {
		t.Errorf("declaration %+v", d)
	}
}
