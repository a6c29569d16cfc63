// Command protostrings lists the string fields of Kubernetes' protobuf
// messages whose empty value JSON keeps: Go pointers to strings
// (`holderIdentity *string`, "" is not nil) and strings without
// `omitempty` (`name string `json:"name"“). Go's protobuf encoder writes a
// non-pointer string even when empty, so the wire alone cannot tell an empty
// value JSON leaves out from one it keeps; the embedded API server reads this
// list (apiserver/protos/strings.txt) to decode protobuf bodies as a real
// server does.
//
// It reads the Go types of the modules this directory's go.mod pins:
//
//	go run ./protostrings > ../../apiserver/protos/strings.txt
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

// kept returns "message field" for every string field of the package's
// protobuf messages whose empty value JSON keeps.
func kept(dir, proto string) ([]string, error) {
	files, err := parser.ParseDir(token.NewFileSet(), dir, func(info os.FileInfo) bool {
		return !strings.HasSuffix(info.Name(), "_test.go")
	}, 0)
	if err != nil {
		return nil, err
	}
	strs := map[string]bool{"string": true}
	var structs []*ast.TypeSpec
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
	var lines []string
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
			switch t := field.Type.(type) {
			case *ast.StarExpr:
				if id, ok := t.X.(*ast.Ident); ok && strs[id.Name] {
					lines = append(lines, proto+"."+ts.Name.Name+" "+name)
				}
			case *ast.Ident:
				if strs[t.Name] && !omitempty {
					lines = append(lines, proto+"."+ts.Name.Name+" "+name)
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
		lines, err := kept(filepath.Join(root, s.dir), s.proto)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		all = append(all, lines...)
	}
	sort.Strings(all)
	fmt.Println("# The string fields of Kubernetes' protobuf messages whose empty value JSON keeps (Go pointers to")
	fmt.Println("# strings, strings without omitempty): `message field`. Written by tests/real-cluster/protostrings.")
	for _, line := range all {
		fmt.Println(line)
	}
}
