// Command gotypes lists what Kubernetes' Go types say of their protobuf
// messages that the .proto files do not, one fact a line, into
// apiserver/protos/gotypes.txt:
//
//   - `empty MESSAGE FIELD`: a string field whose empty value JSON keeps, a
//     Go pointer (a Lease's `holderIdentity *string`: "" is not nil) or a
//     string without `omitempty` (a Container's name). Go's protobuf encoder
//     writes a non-pointer string even when empty, so the wire alone cannot
//     tell an empty value JSON leaves out from one it keeps; the embedded API
//     server's protobuf decoder reads these.
//   - `present MESSAGE FIELD`: a field a zero object already has in JSON (a
//     struct that is not a pointer, a field without `omitempty`), which
//     server-side apply's field sets never record as created.
//   - `atomic MESSAGE`: a struct marked `+structType=atomic` (a
//     LabelSelector), owned whole; `atomic MESSAGE FIELD`: a list or map
//     field marked `+listType=atomic` or `+mapType=atomic` (a Service's
//     `selector`), owned whole.
//   - `zero MESSAGE FIELD JSON`: what Go's encoder writes for the field of a
//     zero object, when it writes something (`{}` for a struct, `null` for
//     a nil pointer, list or map without `omitempty`, `""`, `0`, `false`):
//     what a real server's answer holds for a field its client never sent.
//   - `omit MESSAGE FIELD`: a field Go's encoder leaves out when it holds
//     its zero value (`omitempty` on a string, number, bool, list or map
//     that is not a pointer): a real server's answer never has `""`, `0`,
//     `false` or `[]` there.
//   - `type MESSAGE FIELD GOTYPE`: a field whose Go type names a type that
//     is neither a struct nor a builtin (`v1.RestartPolicy`, a string;
//     `[]v1.Capability`), as `reflect.Type.String()` prints it, the
//     pointer a decoder sees through left out: the OpenAPI schema says only
//     `string`, and a real server's decoding errors name the Go type.
//
// It reads the Go types of the modules this directory's go.mod pins:
//
//	go run ./gotypes > ../../apiserver/protos/gotypes.txt
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// A package of Go types and the protobuf package its messages are in
// (shortened as in apiserver/protos).
type source struct {
	module, dir, proto string
}

func sources() []source {
	var all []source
	for _, gv := range []string{
		"admissionregistration/v1", "apps/v1", "authentication/v1", "authorization/v1",
		"autoscaling/v1", "autoscaling/v2", "batch/v1", "certificates/v1", "coordination/v1",
		"core/v1", "discovery/v1", "events/v1", "flowcontrol/v1", "networking/v1", "node/v1",
		"policy/v1", "rbac/v1", "resource/v1", "scheduling/v1", "scheduling/v1alpha3", "storage/v1",
	} {
		all = append(all, source{"k8s.io/api", gv, "api." + strings.ReplaceAll(gv, "/", ".")})
	}
	return append(all,
		source{"k8s.io/apimachinery", "pkg/apis/meta/v1", "apimachinery.pkg.apis.meta.v1"},
		source{"k8s.io/apiextensions-apiserver", "pkg/apis/apiextensions/v1",
			"apiextensions_apiserver.pkg.apis.apiextensions.v1"},
		source{"k8s.io/kube-aggregator", "pkg/apis/apiregistration/v1",
			"kube_aggregator.pkg.apis.apiregistration.v1"},
	)
}

func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Struct types that JSON writes as something else than an object.
var leaves = map[string]bool{
	"Time": true, "MicroTime": true, "Duration": true, "Quantity": true,
	"IntOrString": true, "RawExtension": true, "FieldsV1": true, "JSON": true,
}

// What a zero leaf struct writes in JSON (its MarshalJSON).
var leafZero = map[string]string{
	"Time": "null", "MicroTime": "null", "Duration": `"0s"`, "Quantity": `"0"`,
	"IntOrString": "0", "RawExtension": "null", "FieldsV1": "null", "JSON": "null",
}

// A type declaration of one package.
type decl struct {
	spec *ast.TypeSpec
	doc  *ast.CommentGroup
}

// decls parses the package in dir.
func decls(dir string) ([]decl, error) {
	files, err := parser.ParseDir(token.NewFileSet(), dir, func(info os.FileInfo) bool {
		return !strings.HasSuffix(info.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var all []decl
	for _, pkg := range files {
		for _, file := range pkg.Files {
			for _, d := range file.Decls {
				gen, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range gen.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						doc := ts.Doc
						if doc == nil {
							doc = gen.Doc
						}
						all = append(all, decl{ts, doc})
					}
				}
			}
		}
	}
	return all, nil
}

// The shape JSON gives a Go type: "struct", "leaf NAME", "string", "bool",
// "number", "collection" (a list or map), or "pointer " and the pointee's.
type shapes map[string]ast.Expr

func (named shapes) of(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.StarExpr:
		return "pointer " + named.of(t.X)
	case *ast.ArrayType, *ast.MapType:
		return "collection"
	case *ast.StructType:
		return "struct"
	case *ast.SelectorExpr:
		return named.name(t.Sel.Name)
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "string"
		case "bool":
			return "bool"
		case "int", "int32", "int64", "uint32", "uint64", "float32", "float64", "byte":
			return "number"
		}
		return named.name(t.Name)
	}
	return "other"
}

// name is the shape of the named type name, declared in any package read.
func (named shapes) name(name string) string {
	if _, leaf := leafZero[name]; leaf {
		return "leaf " + name
	}
	if t, ok := named[name]; ok {
		return named.of(t)
	}
	return "other"
}

// goType prints a field's type as reflect.Type.String() does, a top-level
// pointer left out (a decoder sees through it), declared in package pkg;
// custom is whether it names a type that is neither a struct, a leaf nor a
// builtin.
func (named shapes) goType(t ast.Expr, pkg string, top bool) (printed string, custom bool) {
	switch t := t.(type) {
	case *ast.StarExpr:
		inner, custom := named.goType(t.X, pkg, false)
		if top {
			return inner, custom
		}
		return "*" + inner, custom
	case *ast.ArrayType:
		inner, custom := named.goType(t.Elt, pkg, false)
		return "[]" + inner, custom
	case *ast.MapType:
		key, customKey := named.goType(t.Key, pkg, false)
		value, customValue := named.goType(t.Value, pkg, false)
		return "map[" + key + "]" + value, customKey || customValue
	case *ast.SelectorExpr:
		// An import alias (`metav1`, `corev1`) ends with the package's name.
		alias := fmt.Sprint(t.X)
		if at := strings.LastIndex(alias, "v"); at >= 0 {
			alias = alias[at:]
		}
		return alias + "." + t.Sel.Name, named.custom(t.Sel.Name)
	case *ast.Ident:
		switch t.Name {
		case "string", "bool", "int", "int32", "int64", "uint32", "uint64", "float32", "float64":
			return t.Name, false
		case "byte":
			return "uint8", false
		}
		return pkg + "." + t.Name, named.custom(t.Name)
	}
	return "", false
}

// custom is whether the named type is a string, bool, number, list or map
// under another name.
func (named shapes) custom(name string) bool {
	switch named.name(name) {
	case "string", "bool", "number", "collection":
		return true
	}
	return false
}

// facts returns the lines of one package's declarations (see the command's
// doc), the shapes of every package read at hand.
func facts(all []decl, proto, pkg string, named shapes) []string {
	var lines []string
	for _, d := range all {
		if d.doc != nil && strings.Contains(d.doc.Text(), "+structType=atomic") {
			lines = append(lines, "atomic "+proto+"."+d.spec.Name.Name)
		}
		st, ok := d.spec.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag := reflect.StructTag(strings.Trim(field.Tag.Value, "`"))
			if tag.Get("protobuf") == "" {
				continue
			}
			name, options, _ := strings.Cut(tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			omitempty := strings.Contains(","+options+",", ",omitempty,")
			// Go 1.24's `omitzero` leaves out a zero struct too.
			omitzero := strings.Contains(","+options+",", ",omitzero,")
			omitempty = omitempty || omitzero
			at := proto + "." + d.spec.Name.Name + " " + name
			if field.Doc != nil {
				doc := field.Doc.Text()
				if strings.Contains(doc, "+listType=atomic") || strings.Contains(doc, "+mapType=atomic") {
					lines = append(lines, "atomic "+at)
				}
			}
			add := func(fact string) {
				kind, json, _ := strings.Cut(fact, " ")
				lines = append(lines, strings.TrimSuffix(kind+" "+at+" "+json, " "))
			}
			if printed, custom := named.goType(field.Type, pkg, true); custom {
				add("type " + printed)
			}
			shape := named.of(field.Type)
			switch {
			case shape == "pointer string":
				add("empty")
				if !omitempty {
					add("present")
					add("zero null")
				}
			case strings.HasPrefix(shape, "pointer "):
				if !omitempty {
					add("present")
					add("zero null")
				}
			case shape == "string":
				if !omitempty {
					add("empty")
					add(`zero ""`)
				} else {
					add("omit")
				}
			case shape == "struct" && !omitzero:
				add("present")
				add("zero {}")
			case strings.HasPrefix(shape, "leaf ") && !omitzero:
				add("zero " + leafZero[strings.TrimPrefix(shape, "leaf ")])
			case shape == "bool" && !omitempty:
				add("zero false")
			case shape == "number" && !omitempty:
				add("zero 0")
			case shape == "collection" && !omitempty:
				add("present")
				add("zero null")
			case shape == "bool" || shape == "number" || shape == "collection":
				add("omit")
			}
		}
	}
	return lines
}

func main() {
	type read struct {
		decls      []decl
		proto, pkg string
	}
	var packages []read
	named := shapes{}
	for _, s := range sources() {
		root, err := moduleDir(s.module)
		if err == nil {
			var all []decl
			all, err = decls(filepath.Join(root, s.dir))
			for _, d := range all {
				named[d.spec.Name.Name] = d.spec.Type
			}
			packages = append(packages, read{all, s.proto, filepath.Base(s.dir)})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// Types the API's fields use from packages of no message of their own
	// (a `types.UID`): read for their shapes only.
	root, err := moduleDir("k8s.io/apimachinery")
	if err == nil {
		var uses []decl
		uses, err = decls(filepath.Join(root, "pkg/types"))
		for _, d := range uses {
			named[d.spec.Name.Name] = d.spec.Type
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var all []string
	for _, p := range packages {
		all = append(all, facts(p.decls, p.proto, p.pkg, named)...)
	}
	sort.Strings(all)
	fmt.Println("# What Kubernetes' Go types say of their protobuf messages that the .proto files do not: `empty`,")
	fmt.Println("# `present`, `atomic`, `zero`, `omit` and `type` lines, as tests/real-cluster/gotypes (which writes this file) documents.")
	for _, line := range all {
		fmt.Println(line)
	}
}
