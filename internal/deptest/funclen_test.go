package deptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFunctionLines bounds every function of the module's non-test Go
// code: one longer does more than one thing, and its parts get names of
// their own.
const maxFunctionLines = 100

// TestNoFunctionOverMaxLines walks the module's non-test Go files (vendored
// and node_modules trees aside) and fails on a function longer than
// maxFunctionLines, naming it.
func TestNoFunctionOverMaxLines(t *testing.T) {
	root := filepath.Join("..", "..")
	files := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "node_modules" || name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(files, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := files.Position(fn.Pos()), files.Position(fn.End())
			if lines := end.Line - start.Line + 1; lines > maxFunctionLines {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: %s is %d lines, more than %d: give its parts names of their own", rel, start.Line, fn.Name.Name, lines, maxFunctionLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
