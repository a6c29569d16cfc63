package kubewasm

import (
	"fmt"
	"reflect"
	"strings"
)

// Typed is a Go type of a custom resource that says its resource type
// (a list type says its items'): `kubewasm types --lang go --crd FILE`
// writes the Type values.
type Typed interface {
	ResourceType() Type
}

// TypeOf is the resource type of object: a Type as it is, a Typed's, or
// that of a pointer to a struct of k8s.io/api (`&appsv1.Deployment{}`,
// `&corev1.ConfigMap{}`), named by the table `kubewasm types --lang go`
// generates from the Kubernetes version kubewasm serves.
func TypeOf(object any) (Type, error) {
	switch o := object.(type) {
	case Type:
		return o, nil
	case *Type:
		return *o, nil
	case Typed:
		return o.ResourceType(), nil
	case nil:
		return Type{}, fmt.Errorf("no type: nil")
	}
	return typeNamed(object, "")
}

// typeNamed is the type of the k8s.io/api struct object points to, its Go
// name less suffix (`List`, for a list of it).
func typeNamed(object any, suffix string) (Type, error) {
	t := reflect.TypeOf(object)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return Type{}, fmt.Errorf("no type: nil")
	}
	name := t.PkgPath() + "." + strings.TrimSuffix(t.Name(), suffix)
	if found, ok := builtinTypes[name]; ok {
		return found, nil
	}
	return Type{}, fmt.Errorf("%s is not a resource type kubewasm knows: give a kubewasm.Type", name)
}
