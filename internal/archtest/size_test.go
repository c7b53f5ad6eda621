package archtest

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Size limits for hand-written Go: a file a reader can hold in mind, a
// function that fits a few screens.
const (
	maxFileLines = 900
	maxFuncLines = 150
)

// generated matches the header `go generate` tools write
// (https://go.dev/s/generatedcode).
var generated = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// TestSizeLimits walks every .go file of the repository (the nested
// test/compat and test/bench modules included), skipping generated ones,
// and names each file over maxFileLines and each function or function
// literal over maxFuncLines.
func TestSizeLimits(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".pb.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if isGenerated(src) {
			return nil
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if n := fset.Position(f.FileEnd).Line; n > maxFileLines {
			t.Errorf("%s: %d lines, more than %d: split it by concern", rel, n, maxFileLines)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			switch fn := n.(type) {
			case *ast.FuncDecl:
				if fn.Body == nil {
					return true
				}
				what = "func " + fn.Name.Name
				if fn.Recv != nil && len(fn.Recv.List) == 1 {
					what = "method " + recvType(fn.Recv.List[0].Type) + "." + fn.Name.Name
				}
			case *ast.FuncLit:
				what = "function literal"
			default:
				return true
			}
			start, end := fset.Position(n.Pos()), fset.Position(n.End())
			if lines := end.Line - start.Line + 1; lines > maxFuncLines {
				t.Errorf("%s:%d: %s: %d lines, more than %d", rel, start.Line, what, lines, maxFuncLines)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, checked, "no Go files found under %s", root)
}

// isGenerated reports whether src carries the generated-code header before
// its package clause.
func isGenerated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if generated.MatchString(line) {
			return true
		}
	}
	return false
}

// recvType names a method's receiver type without its pointer or type
// parameters.
func recvType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvType(x.X)
	case *ast.IndexExpr:
		return recvType(x.X)
	case *ast.IndexListExpr:
		return recvType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// repoRoot is the directory of the gantry module's go.mod, above this
// package's directory.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module "+module+"\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod of %s above the test's directory", module)
		dir = parent
	}
}
