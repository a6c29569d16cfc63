package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The annotation a source lists its target namespaces in, and the label a
// copy names its source by (`namespace.name`): plugins/configmap-replicator's.
const (
	replicateTo = "kubewasm.dev/replicate-to"
	replicaOf   = "kubewasm.dev/replica-of"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// replicator is plugins/configmap-replicator as a controller-runtime user
// writes it: every ConfigMap a primary, and a copy's change mapped to its
// source. (The plugin's managed finalizer on sources is left out: a copy
// whose source is gone deletes itself on its own reconcile.)
type replicator struct {
	client.Client
	owner client.FieldOwner
}

// setupReplicator registers the replicator with mgr under name.
func setupReplicator(mgr ctrl.Manager, name string, workers int) error {
	r := &replicator{Client: mgr.GetClient(), owner: client.FieldOwner(name)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&corev1.ConfigMap{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(sourceOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// sourceOf maps a copy to its source.
func sourceOf(_ context.Context, object client.Object) []reconcile.Request {
	namespace, name, ok := strings.Cut(object.GetLabels()[replicaOf], ".")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}}}
}

// targets are the namespaces a source lists, valid and without its own;
// nil when it lists none.
func targets(source *corev1.ConfigMap) []string {
	listed, ok := source.Annotations[replicateTo]
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for _, ns := range strings.Split(listed, ",") {
		ns = strings.TrimSpace(ns)
		if dnsLabel.MatchString(ns) && ns != source.Namespace {
			seen[ns] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func label(source *corev1.ConfigMap) string {
	return source.Namespace + "." + source.Name
}

// Reconcile puts a source's copies in line with it, or a copy with its
// source.
func (r *replicator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var object corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &object); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if of, ok := object.Labels[replicaOf]; ok {
		return ctrl.Result{}, r.syncCopy(ctx, &object, of)
	}
	listed := targets(&object)
	if listed == nil {
		return ctrl.Result{}, nil
	}
	for _, namespace := range listed {
		var existing corev1.ConfigMap
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: object.Name}, &existing)
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		if err == nil && existing.Labels[replicaOf] == "" {
			continue // not a copy: never overwritten
		}
		if err := r.Apply(ctx, copyOf(&object, namespace), r.owner, client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("applying the copy in %s: %w", namespace, err)
		}
	}
	var copies corev1.ConfigMapList
	if err := r.List(ctx, &copies, client.MatchingLabels{replicaOf: label(&object)}); err != nil {
		return ctrl.Result{}, err
	}
	for i := range copies.Items {
		if !slices.Contains(listed, copies.Items[i].Namespace) {
			if err := r.Delete(ctx, &copies.Items[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, nil
}

// syncCopy deletes a copy whose source is gone or no longer lists its
// namespace, and puts back one edited by hand.
func (r *replicator) syncCopy(ctx context.Context, copied *corev1.ConfigMap, of string) error {
	namespace, name, _ := strings.Cut(of, ".")
	var source corev1.ConfigMap
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &source)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err != nil || !slices.Contains(targets(&source), copied.Namespace) {
		return client.IgnoreNotFound(r.Delete(ctx, copied))
	}
	if maps.Equal(copied.Data, source.Data) && maps.EqualFunc(copied.BinaryData, source.BinaryData, slices.Equal) {
		return nil
	}
	return r.Apply(ctx, copyOf(&source, copied.Namespace), r.owner, client.ForceOwnership)
}

// copyOf is the copy of source in namespace.
func copyOf(source *corev1.ConfigMap, namespace string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(source.Name, namespace).
		WithLabels(map[string]string{replicaOf: label(source)}).
		WithData(source.Data).
		WithBinaryData(source.BinaryData)
}
