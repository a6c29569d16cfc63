package kubewasm

import (
	"reflect"
	"strconv"
	"strings"
)

// Go's encoding/json writes a struct field tagged `omitempty` even when
// it is the zero value (`"strategy": {}`, `"resources": {}`,
// `"creationTimestamp": null`): omitempty omits empty strings, slices,
// maps and nil pointers, never structs. k8s.io/api tags such fields
// omitempty to mean "unset", and a server-side apply that sends them
// claims fields the plugin never set. So the SDK omits what `omitzero`
// would: a field tagged omitempty (or omitzero) whose value is its type's
// zero, found by walking the Go value beside its JSON.

// zeroPaths appends to out the JSON paths (keys, and indices as decimal
// text) of the zero-valued omitempty struct fields under v.
func zeroPaths(v reflect.Value, path []string, out *[][]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroPaths(v.Elem(), path, out)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte is base64 text
		}
		for i := range v.Len() {
			zeroPaths(v.Index(i), append(path, strconv.Itoa(i)), out)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		for _, k := range v.MapKeys() {
			zeroPaths(v.MapIndex(k), append(path, k.String()), out)
		}
	case reflect.Struct:
		structZeroPaths(v, path, out)
	}
}

func structZeroPaths(v reflect.Value, path []string, out *[][]string) {
	t := v.Type()
	for i := range t.NumField() {
		field := t.Field(i)
		tag := field.Tag.Get("json")
		if tag == "-" || (!field.IsExported() && !field.Anonymous) {
			continue
		}
		name, options, _ := strings.Cut(tag, ",")
		inline := field.Anonymous && name == "" || strings.Contains(","+options+",", ",inline,")
		if inline {
			zeroPaths(v.Field(i), path, out)
			continue
		}
		if name == "" {
			name = field.Name
		}
		value := v.Field(i)
		omit := strings.Contains(","+options+",", ",omitempty,") ||
			strings.Contains(","+options+",", ",omitzero,")
		if omit && value.Kind() == reflect.Struct && value.IsZero() {
			*out = append(*out, append(append([]string(nil), path...), name))
			continue
		}
		zeroPaths(value, append(path, name), out)
	}
}

// dropPath deletes the value at path from the decoded JSON document.
func dropPath(document any, path []string) {
	for len(path) > 1 {
		switch node := document.(type) {
		case map[string]any:
			document = node[path[0]]
		case []any:
			i, err := strconv.Atoi(path[0])
			if err != nil || i < 0 || i >= len(node) {
				return
			}
			document = node[i]
		default:
			return
		}
		path = path[1:]
	}
	if node, ok := document.(map[string]any); ok && len(path) == 1 {
		delete(node, path[0])
	}
}
