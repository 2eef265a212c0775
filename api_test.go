package safetensors_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateAPI = flag.Bool("update-api", false, "rewrite the api/*.txt files from the packages' exported names")

// apiPackages are the module's public packages, each with the file under
// api/ that records its exported API.
var apiPackages = map[string]string{
	".":          "safetensors.txt",
	"check":      "check.txt",
	"checkpoint": "checkpoint.txt",
	"dataset":    "dataset.txt",
	"diff":       "diff.txt",
	"load":       "load.txt",
	"quant":      "quant.txt",
	"remote":     "remote.txt",
	"signing":    "signing.txt",
	"verify":     "verify.txt",
}

// TestAPI fails when a package's exported API differs from the one its
// file under api/ records, so that every change to the API is deliberate
// and shows in review: change the API, run
//
//	go test -run '^TestAPI$' -update-api .
//
// and commit the files with the change.
func TestAPI(t *testing.T) {
	for dir, file := range apiPackages {
		got := strings.Join(exportedAPI(t, dir), "\n") + "\n"
		path := filepath.Join("api", file)
		if *updateAPI {
			require.NoError(t, os.MkdirAll("api", 0o755))
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run go test -run '^TestAPI$' -update-api . to record the API")
		if string(want) != got {
			t.Errorf("the exported API of %s differs from %s:\n%s\nIf the change is meant, run go test -run '^TestAPI$' -update-api . and commit %s", dir, path, lineDiff(string(want), got), path)
		}
	}
}

// lineDiff lists the lines only in want ("-") and only in got ("+").
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if l != "" && !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if l != "" && !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// exportedAPI lists, one line each and sorted, the exported functions,
// methods, types (with their exported fields and methods of interfaces),
// constants and variables of the package in dir, read from its source
// files for every platform (parameter names left out, as Go's own api
// files do).
func exportedAPI(t *testing.T, dir string) []string {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	pkg := "github.com/safetensors-go/safetensors"
	if dir != "." {
		pkg += "/" + dir
	}
	seen := map[string]bool{}
	add := func(s string) { seen["pkg "+pkg+", "+s] = true }
	expr := func(e ast.Expr) string {
		var b bytes.Buffer
		require.NoError(t, printer.Fprint(&b, fset, e))
		return strings.Join(strings.Fields(b.String()), " ")
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				sig := expr(unnamed(d.Type))
				sig = strings.TrimPrefix(sig, "func")
				if d.Recv == nil {
					add("func " + d.Name.Name + sig)
					continue
				}
				recv := expr(d.Recv.List[0].Type)
				if !ast.IsExported(strings.TrimLeft(strings.SplitN(recv, "[", 2)[0], "*")) {
					continue
				}
				add("method (" + recv + ") " + d.Name.Name + sig)
			case *ast.GenDecl:
				var typ string // a const group's type, carried from spec to spec
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						head := "type " + s.Name.Name
						if s.TypeParams != nil {
							head += expr(&ast.IndexListExpr{X: ast.NewIdent(""), Indices: fieldTypes(s.TypeParams)})
						}
						switch x := s.Type.(type) {
						case *ast.StructType:
							add(head + " struct")
							for _, fl := range x.Fields.List {
								for _, n := range fl.Names {
									if n.IsExported() {
										add(head + " struct, " + n.Name + " " + expr(fl.Type))
									}
								}
								if len(fl.Names) == 0 {
									add(head + " struct, embedded " + expr(fl.Type))
								}
							}
						case *ast.InterfaceType:
							add(head + " interface")
							for _, m := range x.Methods.List {
								if len(m.Names) == 0 {
									add(head + " interface, " + expr(m.Type))
									continue
								}
								for _, n := range m.Names {
									if ft, ok := m.Type.(*ast.FuncType); ok {
										add(head + " interface, " + n.Name + strings.TrimPrefix(expr(unnamed(ft)), "func"))
									}
								}
							}
						default:
							eq := " "
							if s.Assign.IsValid() {
								eq = " = "
							}
							add(head + eq + expr(s.Type))
						}
					case *ast.ValueSpec:
						if s.Type != nil {
							typ = expr(s.Type)
						} else if d.Tok == token.VAR || len(s.Values) > 0 && d.Tok == token.CONST && !usesIota(s.Values) {
							typ = ""
						}
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							line := strings.ToLower(d.Tok.String()) + " " + n.Name
							if typ != "" {
								line += " " + typ
							}
							add(line)
						}
					}
				}
			}
		}
	}
	lines := make([]string, 0, len(seen))
	for l := range seen {
		lines = append(lines, l)
	}
	slices.Sort(lines)
	return lines
}

func usesIota(values []ast.Expr) bool {
	found := false
	for _, v := range values {
		ast.Inspect(v, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == "iota" {
				found = true
			}
			return true
		})
	}
	return found
}

// unnamed returns a copy of a function type without parameter names.
func unnamed(ft *ast.FuncType) *ast.FuncType {
	strip := func(fl *ast.FieldList) *ast.FieldList {
		if fl == nil {
			return nil
		}
		out := &ast.FieldList{}
		for _, f := range fl.List {
			n := max(1, len(f.Names))
			for range n {
				out.List = append(out.List, &ast.Field{Type: f.Type})
			}
		}
		return out
	}
	return &ast.FuncType{TypeParams: ft.TypeParams, Params: strip(ft.Params), Results: strip(ft.Results)}
}

// fieldTypes returns a type parameter list's names and constraints as
// expressions "T Number".
func fieldTypes(fl *ast.FieldList) []ast.Expr {
	var out []ast.Expr
	for _, f := range fl.List {
		for _, n := range f.Names {
			out = append(out, &ast.BinaryExpr{X: n, Op: token.ILLEGAL, Y: f.Type})
		}
	}
	return out
}
