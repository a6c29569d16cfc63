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
//     LabelSelector), owned whole.
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
		"policy/v1", "rbac/v1", "resource/v1", "scheduling/v1", "storage/v1",
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

// Go's own scalar types: leaves, whatever their tags.
var basic = map[string]bool{
	"bool": true, "int": true, "int32": true, "int64": true, "uint32": true, "uint64": true,
	"float32": true, "float64": true, "byte": true,
}

// facts returns the package's lines (see the command's doc).
func facts(dir, proto string) ([]string, error) {
	files, err := parser.ParseDir(token.NewFileSet(), dir, func(info os.FileInfo) bool {
		return !strings.HasSuffix(info.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	strs := map[string]bool{"string": true}
	var structs []*ast.TypeSpec
	var lines []string
	for _, pkg := range files {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range gen.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					doc := ts.Doc
					if doc == nil {
						doc = gen.Doc
					}
					if doc != nil && strings.Contains(doc.Text(), "+structType=atomic") {
						lines = append(lines, "atomic "+proto+"."+ts.Name.Name)
					}
					switch t := ts.Type.(type) {
					case *ast.Ident:
						if t.Name == "string" {
							strs[ts.Name.Name] = true
						}
					case *ast.StructType:
						structs = append(structs, ts)
					}
				}
			}
		}
	}
	structNames := map[string]bool{}
	for _, ts := range structs {
		structNames[ts.Name.Name] = true
	}
	for _, ts := range structs {
		for _, field := range ts.Type.(*ast.StructType).Fields.List {
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
			at := proto + "." + ts.Name.Name + " " + name
			switch t := field.Type.(type) {
			case *ast.StarExpr:
				if id, ok := t.X.(*ast.Ident); ok && strs[id.Name] {
					lines = append(lines, "empty "+at)
				} else if !omitempty {
					lines = append(lines, "present "+at)
				}
			case *ast.Ident:
				switch {
				case strs[t.Name]:
					if !omitempty {
						lines = append(lines, "empty "+at)
					}
				case structNames[t.Name]:
					if !leaves[t.Name] {
						lines = append(lines, "present "+at)
					}
				case !omitempty && !basic[t.Name]:
					// A named map or list (ResourceList), written as null.
					lines = append(lines, "present "+at)
				}
			case *ast.SelectorExpr:
				if !leaves[t.Sel.Name] {
					lines = append(lines, "present "+at)
				}
			case *ast.ArrayType, *ast.MapType:
				if !omitempty {
					lines = append(lines, "present "+at)
				}
			}
		}
	}
	return lines, nil
}

func main() {
	var all []string
	for _, s := range sources() {
		root, err := moduleDir(s.module)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		lines, err := facts(filepath.Join(root, s.dir), s.proto)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		all = append(all, lines...)
	}
	sort.Strings(all)
	fmt.Println("# What Kubernetes' Go types say of their protobuf messages that the .proto files do not: `empty`,")
	fmt.Println("# `present` and `atomic` lines, as tests/real-cluster/gotypes (which writes this file) documents.")
	for _, line := range all {
		fmt.Println(line)
	}
}
