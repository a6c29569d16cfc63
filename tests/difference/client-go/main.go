// Command client-go records the requests of a client-go program as the
// difference tool's sequence (tests/difference/sequences/client-go.txt):
// the typed clientset of client-go v0.37, as controllers and
// controller-runtime use it, sends the bodies of built-in types as protobuf
// and asks for protobuf first (`Accept: application/vnd.kubernetes.protobuf,
// application/json`). Each request is written as the tool reads it: `METHOD
// PATH?QUERY`, then the content type and the `Accept` it sent, then the
// body (protobuf in base64); the namespace is `{ns}`.
//
//	go run . -kubeconfig KUBECONFIG > ../sequences/client-go.txt
//
// The requests run against the cluster of KUBECONFIG (either server: their
// answers are not recorded, only what client-go sends), in a namespace made
// for the run and deleted after it, neither recorded.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// recorder writes every request it forwards in the sequence form.
type recorder struct {
	next      http.RoundTripper
	namespace string
	out       *strings.Builder
}

func (r *recorder) RoundTrip(request *http.Request) (*http.Response, error) {
	var body []byte
	if request.Body != nil {
		read, err := io.ReadAll(request.Body)
		if err != nil {
			return nil, err
		}
		body = read
		request.Body = io.NopCloser(bytes.NewReader(body))
	}
	target := strings.ReplaceAll(request.URL.Path, "/namespaces/"+r.namespace+"/", "/namespaces/{ns}/")
	if request.URL.RawQuery != "" {
		target += "?" + request.URL.RawQuery
	}
	headers := request.Header.Get("Content-Type")
	if accept := request.Header.Get("Accept"); accept != "" {
		headers = strings.TrimSpace(headers + " Accept: " + accept)
	}
	text := string(body)
	if strings.HasPrefix(request.Header.Get("Content-Type"), protobuf) {
		text = base64.StdEncoding.EncodeToString(body)
	}
	if r.out.Len() > 0 {
		r.out.WriteString("\n---\n")
	}
	fmt.Fprintf(r.out, "%s %s\n%s\n%s", request.Method, target, headers, text)
	return r.next.RoundTrip(request)
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the cluster the requests run against")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	ctx := context.Background()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	namespace, err := admin.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "client-go-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer admin.CoreV1().Namespaces().Delete(ctx, namespace.Name, metav1.DeleteOptions{})

	recorded := &recorder{namespace: namespace.Name, out: &strings.Builder{}}
	config.Wrap(func(next http.RoundTripper) http.RoundTripper {
		recorded.next = next
		return recorded
	})
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	requests(ctx, client, namespace.Name)
	fmt.Println(recorded.out.String())
	return nil
}

// requests are what a controller's client sends; the answers, errors
// included, are the difference tool's to compare.
func requests(ctx context.Context, client *kubernetes.Clientset, ns string) {
	labels := map[string]string{"difference": "client-go"}
	settings := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: labels}, Data: data}
	}
	configMaps := client.CoreV1().ConfigMaps(ns)
	configMaps.Create(ctx, settings(map[string]string{"a": "1"}), metav1.CreateOptions{})
	configMaps.Create(ctx, settings(nil), metav1.CreateOptions{})
	configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name"}}, metav1.CreateOptions{})
	configMaps.Get(ctx, "settings", metav1.GetOptions{})
	// No resourceVersion: an unconditional update, the same whenever replayed.
	configMaps.Update(ctx, settings(map[string]string{"a": "1", "b": ""}), metav1.UpdateOptions{FieldManager: "client-go"})
	configMaps.List(ctx, metav1.ListOptions{LabelSelector: "difference=client-go"})
	configMaps.Patch(ctx, "settings", types.StrategicMergePatchType, []byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{})
	configMaps.Get(ctx, "missing", metav1.GetOptions{})

	// A leader election's Lease: an empty holder is kept, not dropped.
	leases := client.CoordinationV1().Leases(ns)
	empty, seconds := "", int32(15)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leader", Labels: labels},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &empty, LeaseDurationSeconds: &seconds},
	}
	leases.Create(ctx, lease, metav1.CreateOptions{})
	holder, transitions := "replica-0", int32(1)
	lease.Spec.HolderIdentity, lease.Spec.LeaseTransitions = &holder, &transitions
	leases.Update(ctx, lease, metav1.UpdateOptions{})
	leases.Get(ctx, "leader", metav1.GetOptions{})

	replicas := int32(2)
	deployments := client.AppsV1().Deployments(ns)
	deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}, metav1.CreateOptions{})
	deployments.GetScale(ctx, "web", metav1.GetOptions{})
	deployments.UpdateScale(ctx, "web", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
	}, metav1.UpdateOptions{})

	// In `default`, as old clients write them: an Event's body names its
	// object's namespace, which a recorded body cannot change.
	client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "client-go.18a2b3c4d5e6f708"},
		InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"},
		Reason:         "Scaled",
		Message:        "scaled to 3",
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "client-go"},
	}, metav1.CreateOptions{})

	// Deletes: their DeleteOptions are protobuf too.
	foreground := metav1.DeletePropagationForeground
	dryRun := []string{metav1.DryRunAll}
	deployments.Delete(ctx, "web", metav1.DeleteOptions{DryRun: dryRun})
	deployments.Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &foreground})
	configMaps.Delete(ctx, "settings", metav1.DeleteOptions{})
	configMaps.Delete(ctx, "settings", metav1.DeleteOptions{})
	leases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "difference=client-go"})
	leases.List(ctx, metav1.ListOptions{})
}
