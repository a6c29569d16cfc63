// Command controller-runtime-myapp is the MyApp operator of plugins/myapp
// (or, with --configmap-replicator, plugins/configmap-replicator) written as
// a controller-runtime user writes it: a manager whose cache
// watches MyApps and the Deployments and Services they own, a reconcile that
// applies both children by server-side apply under its own field manager and
// the MyApp's status from the cached Deployment.
//
// It runs as kubewasm's host runs by default, so the engine bench compares
// like with like: two reconciles at a time (kubewasm's per-plugin
// concurrency), no client-side rate limit (kubewasm's client has none), no
// leader election. The kubeconfig comes from --kubeconfig or $KUBECONFIG.
package main

import (
	"flag"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	metrics := flag.String("metrics-bind-address", "0", "where /metrics listens; 0 turns it off")
	workers := flag.Int("max-concurrent-reconciles", 2, "reconciles running at once")
	replicate := flag.String("configmap-replicator", "",
		"run plugins/configmap-replicator under this name instead of the MyApp operator")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(*metrics, *workers, *replicate); err != nil {
		fmt.Fprintln(os.Stderr, "controller-runtime-myapp:", err)
		os.Exit(1)
	}
}

func run(metrics string, workers int, replicate string) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := addToScheme(scheme); err != nil {
		return err
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// A negative QPS turns client-go's token bucket off, as kubewasm's
	// client has none.
	config.QPS = -1
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: metrics},
	})
	if err != nil {
		return err
	}
	if replicate != "" {
		err = setupReplicator(mgr, replicate, workers)
	} else {
		err = setupMyApp(mgr, workers)
	}
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// setupMyApp registers the MyApp operator with mgr.
func setupMyApp(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&MyApp{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(&reconciler{Client: mgr.GetClient()})
}
