package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldOwner is the field manager of every apply.
const fieldOwner = client.FieldOwner("controller-runtime-myapp")

type reconciler struct {
	client.Client
}

// Reconcile applies the MyApp's Deployment and Service and its status.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var app MyApp
	if err := r.Get(ctx, req.NamespacedName, &app); err != nil {
		// Gone: the garbage collector removes what it owned.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.Apply(ctx, desiredDeployment(&app), fieldOwner, client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying the Deployment: %w", err)
	}
	if err := r.Apply(ctx, desiredService(&app), fieldOwner, client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying the Service: %w", err)
	}
	var observed appsv1.Deployment
	found := true
	if err := r.Get(ctx, req.NamespacedName, &observed); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		found = false
	}
	status, err := statusOf(&app, &observed, found)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Status().Apply(ctx, status, fieldOwner, client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying the status: %w", err)
	}
	return ctrl.Result{}, nil
}

// labels are on everything made for app; the instance label selects its Pods.
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

func owner(app *MyApp) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(GroupVersion.String()).
		WithKind("MyApp").
		WithName(app.Name).
		WithUID(app.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// desiredDeployment is the Deployment app asks for.
func desiredDeployment(app *MyApp) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(labels(app)).
		WithOwnerReferences(owner(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(app.Spec.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels(app)).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").
					WithImage(app.Spec.Image).
					WithPorts(corev1ac.ContainerPort().
						WithName("http").
						WithContainerPort(app.Spec.Port))))))
}

// desiredService is the Service app asks for.
func desiredService(app *MyApp) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(app.Name, app.Namespace).
		WithLabels(labels(app)).
		WithOwnerReferences(owner(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(selector(app)).
			WithPorts(corev1ac.ServicePort().
				WithName("http").
				WithPort(app.Spec.Port).
				WithTargetPort(intstr.FromInt32(app.Spec.Port))))
}

// statusOf is app's status as its observed Deployment implies it (found:
// whether there is one). The Available condition keeps its transition time
// while its status does not change, so a steady state applies an identical
// status.
func statusOf(app *MyApp, observed *appsv1.Deployment, found bool) (runtime.ApplyConfiguration, error) {
	available := observed.Status.AvailableReplicas
	wanted := app.Spec.Replicas
	condition := metav1.Condition{
		Type:               "Available",
		ObservedGeneration: app.Generation,
		Message:            fmt.Sprintf("%d of %d replicas available", available, wanted),
	}
	switch {
	case !found:
		available = 0
		condition.Status, condition.Reason = metav1.ConditionFalse, "DeploymentPending"
		condition.Message = "the Deployment does not exist yet"
	case available >= wanted:
		condition.Status, condition.Reason = metav1.ConditionTrue, "ReplicasAvailable"
	default:
		condition.Status, condition.Reason = metav1.ConditionFalse, "ReplicasUnavailable"
	}
	condition.LastTransitionTime = metav1.Now()
	if app.Status != nil {
		for _, previous := range app.Status.Conditions {
			if previous.Type == condition.Type && previous.Status == condition.Status {
				condition.LastTransitionTime = previous.LastTransitionTime
			}
		}
	}
	status := &MyApp{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "MyApp"},
		ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace},
		Status: &MyAppStatus{
			AvailableReplicas: available,
			Conditions:        []metav1.Condition{condition},
		},
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return nil, err
	}
	// The spec is not the status's to apply.
	delete(fields, "spec")
	unstructured.RemoveNestedField(fields, "metadata", "creationTimestamp")
	return client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: fields}), nil
}
