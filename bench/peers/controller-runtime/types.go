package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is MyApp's API group and version (plugins/myapp/crd.yaml).
var GroupVersion = schema.GroupVersion{Group: "example.com", Version: "v1"}

// MyAppSpec is what a MyApp asks for.
type MyAppSpec struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
	Port     int32  `json:"port"`
}

// MyAppStatus reports the Deployment's available replicas.
type MyAppStatus struct {
	AvailableReplicas int32              `json:"availableReplicas"`
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
}

// MyApp is a Deployment and a Service by one name.
type MyApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MyAppSpec    `json:"spec"`
	Status            *MyAppStatus `json:"status,omitempty"`
}

// MyAppList is a list of MyApps.
type MyAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MyApp `json:"items"`
}

// addToScheme registers MyApp and MyAppList.
func addToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MyApp{}, &MyAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// DeepCopyInto copies a MyApp into out (what controller-gen writes).
func (in *MyApp) DeepCopyInto(out *MyApp) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	if in.Status != nil {
		status := &MyAppStatus{AvailableReplicas: in.Status.AvailableReplicas}
		for i := range in.Status.Conditions {
			var c metav1.Condition
			in.Status.Conditions[i].DeepCopyInto(&c)
			status.Conditions = append(status.Conditions, c)
		}
		out.Status = status
	}
}

// DeepCopyObject implements runtime.Object.
func (in *MyApp) DeepCopyObject() runtime.Object {
	out := new(MyApp)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *MyAppList) DeepCopyObject() runtime.Object {
	out := new(MyAppList)
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]MyApp, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
