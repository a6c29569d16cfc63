package main

import (
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"kubewasm.dev/guest"
)

func myapp() *MyApp {
	return &MyApp{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default", UID: "u1", Generation: 4},
		Spec:       MyAppSpec{Replicas: 3, Image: "nginx:1.27", Port: 8080},
	}
}

func deployment(available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
		Status:     appsv1.DeploymentStatus{AvailableReplicas: available},
	}
}

var key = kubewasm.Key{Namespace: "default", Name: "demo"}

func TestReconcileShouldDesireDeploymentServiceAndStatus(t *testing.T) {
	h := kubewasm.NewHarness(Operator{}).Object(myapp()).Object(deployment(2))
	h.Clock = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out, err := h.Reconcile(key)
	if err != nil {
		t.Fatal(err)
	}
	applied := out.Applied()
	if len(applied) != 2 {
		t.Fatalf("applied %d objects", len(applied))
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(applied[0], &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if d.Kind != "Deployment" || *d.Spec.Replicas != 3 || c.Image != "nginx:1.27" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("the Deployment: %s", applied[0])
	}
	var status MyApp
	if err := json.Unmarshal(out.Statuses()[0], &status); err != nil {
		t.Fatal(err)
	}
	cond := status.Status.Conditions[0]
	if status.Status.AvailableReplicas != 2 || cond.Status != metav1.ConditionFalse || cond.ObservedGeneration != 4 {
		t.Errorf("the status: %s", out.Statuses()[0])
	}
	// The harness's clock, as the host's: a condition's time is the call's.
	if !cond.LastTransitionTime.Time.Equal(h.Clock) {
		t.Errorf("transition time %v", cond.LastTransitionTime)
	}
}

func TestReconcileOfADeletedMyAppShouldDoNothing(t *testing.T) {
	out, err := kubewasm.NewHarness(Operator{}).Reconcile(key)
	if err != nil || len(out.Applied())+len(out.Statuses()) != 0 {
		t.Errorf("%v %v", out, err)
	}
}

func TestStatusShouldKeepTransitionTimeWhileUnchanged(t *testing.T) {
	app := myapp()
	first := WithStatus(app, deployment(3), metav1.NewTime(time.Unix(0, 0)))
	app.Status = first.Status
	later := metav1.NewTime(time.Unix(1000, 0))
	second := WithStatus(app, deployment(3), later)
	a, _ := json.Marshal(first.Status)
	b, _ := json.Marshal(second.Status)
	if string(a) != string(b) {
		t.Errorf("steady state writes the same status: %s then %s", a, b)
	}
	none := WithStatus(app, nil, later)
	if c := none.Status.Conditions[0]; c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Equal(&later) {
		t.Errorf("no Deployment: %v", c)
	}
}
