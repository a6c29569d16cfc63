package main

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"kubewasm.dev/guest"
)

// MyApp is an application of Replicas copies of Image serving Port.
type MyApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              MyAppSpec    `json:"spec"`
	Status            *MyAppStatus `json:"status,omitempty"`
}

// ResourceType is example.com/v1 MyApp.
func (*MyApp) ResourceType() kubewasm.Type { return MyAppV1 }

// MyAppSpec is the desired application.
type MyAppSpec struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
	Port     int32  `json:"port"`
}

// UnmarshalJSON defaults replicas to one, as the CRD does.
func (s *MyAppSpec) UnmarshalJSON(data []byte) error {
	type spec MyAppSpec
	decoded := spec{Replicas: 1}
	if err := json.Unmarshal(data, &decoded); err != nil {
		return err
	}
	*s = MyAppSpec(decoded)
	return nil
}

// MyAppStatus is the observed application.
type MyAppStatus struct {
	AvailableReplicas int32              `json:"availableReplicas"`
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
}
