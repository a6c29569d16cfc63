// The MyApp operator in Go: for each example.com/v1 MyApp it desires a
// Deployment and a Service of the same name, both owned by the MyApp, and
// reports the Deployment's available replicas in the MyApp's status. The
// same logic as plugins/myapp (Rust), replaying the same fixtures to the
// same bytes.
package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"kubewasm.dev/guest"
)

// Operator is the plugin.
type Operator struct{}

func init() { kubewasm.Export(Operator{}) }

// Declare reconciles MyApps, owning their Deployments and Services.
func (Operator) Declare() *kubewasm.Declaration {
	return kubewasm.NewDeclaration("myapp", "0.1.0", &MyApp{}).
		Verbs(kubewasm.ApplyStatus).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{})
}

// Reconcile desires the MyApp's Deployment and Service, and its status.
func (Operator) Reconcile(ctx *kubewasm.Context) (*kubewasm.Outcome, error) {
	var app MyApp
	if err := ctx.Primary(&app); err != nil {
		// Gone from the cache: the garbage collector removes what we own.
		return nil, kubewasm.IgnoreNotFound(err)
	}
	var observed appsv1.Deployment
	found := true
	if err := ctx.Get(ctx.Key, &observed); err != nil {
		if kubewasm.IgnoreNotFound(err) != nil {
			return nil, err
		}
		found = false
	}
	var deployment *appsv1.Deployment
	if found {
		deployment = &observed
	}
	return kubewasm.NewOutcome().
		Apply(DesiredDeployment(&app)).
		Apply(DesiredService(&app)).
		ApplyStatus(WithStatus(&app, deployment, metav1.NewTime(ctx.Now()))), nil
}

// labels are on everything made for app; the instance label selects its
// pods.
func labels(app *MyApp) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "myapp",
		"app.kubernetes.io/instance":   app.Name,
		"app.kubernetes.io/managed-by": "kubewasm-myapp",
	}
}

func selector(app *MyApp) map[string]string {
	return map[string]string{"app.kubernetes.io/instance": app.Name}
}

func childMetadata(app *MyApp) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace, Labels: labels(app)}
}

// DesiredDeployment is the Deployment app asks for.
func DesiredDeployment(app *MyApp) *appsv1.Deployment {
	replicas := app.Spec.Replicas
	return &appsv1.Deployment{
		ObjectMeta: childMetadata(app),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector(app)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(app)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: app.Spec.Image,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: app.Spec.Port}},
				}}},
			},
		},
	}
}

// DesiredService is the Service app asks for.
func DesiredService(app *MyApp) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: childMetadata(app),
		Spec: corev1.ServiceSpec{
			Selector: selector(app),
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Port:       app.Spec.Port,
				TargetPort: intstr.FromInt32(app.Spec.Port),
			}},
		},
	}
}

// WithStatus is app with the status its observed Deployment (nil: none
// yet) implies. The Available condition keeps its transition time while
// its status does not change, so a steady state writes an identical status
// (a no-op for the API server).
func WithStatus(app *MyApp, observed *appsv1.Deployment, now metav1.Time) *MyApp {
	var available int32
	if observed != nil {
		available = observed.Status.AvailableReplicas
	}
	wanted := app.Spec.Replicas
	status, reason := metav1.ConditionFalse, "DeploymentPending"
	message := "the Deployment does not exist yet"
	switch {
	case observed == nil:
	case available >= wanted:
		status, reason = metav1.ConditionTrue, "ReplicasAvailable"
		message = fmt.Sprintf("%d of %d replicas available", available, wanted)
	default:
		reason = "ReplicasUnavailable"
		message = fmt.Sprintf("%d of %d replicas available", available, wanted)
	}
	transition := now
	if app.Status != nil {
		for _, c := range app.Status.Conditions {
			if c.Type == "Available" && c.Status == status {
				transition = c.LastTransitionTime
			}
		}
	}
	return &MyApp{
		ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace},
		Spec:       app.Spec,
		Status: &MyAppStatus{
			AvailableReplicas: available,
			Conditions: []metav1.Condition{{
				Type:               "Available",
				Status:             status,
				ObservedGeneration: app.Generation,
				LastTransitionTime: transition,
				Reason:             reason,
				Message:            message,
			}},
		},
	}
}

func main() {}
