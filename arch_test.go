// arch_test.go keeps the package walls up: each internal package imports
// only the packages of acpbridge its layer allows, so that imports run one
// way (the protocol and channel at the bottom; store and models know no
// session; only the root knows the SessionRecord). It also keeps the
// functions short.

package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layers says which of acpbridge's packages each internal package may
// import. A new package must be added here, with its place.
var layers = map[string][]string{
	// The bottom: they import nothing of acpbridge's but the JSON writer.
	"jsonenc":   nil,         // JSON written as encoding/json writes it
	"acp":       {"jsonenc"}, // ACP wire types, method names, codes, encoders
	"clip":      nil,         // the one truncation helper
	"shellword": nil,         // a word quoted for a POSIX shell
	"cliflag":   nil,         // flag errors and help as every command prints them
	"events":    nil,         // log records with an event name, for tests to watch
	"proc":      nil,         // child processes: groups, the keeper, the job, the sweep
	"store":     {"jsonenc"}, // session logs, locks, list, delete; knows no protocol
	// The channel and the models know the protocol, nothing above it.
	"channel": {"acp", "clip", "jsonenc"},
	"model":   {"acp", "clip", "jsonenc"},
	// The tools know the protocol and processes; MCP tools are tools.
	"tools": {"acp", "clip", "events", "jsonenc", "proc"},
	"mcp":   {"acp", "clip", "events", "proc", "tools"},
	// --fanout routes lines between channels.
	"fanout": {"acp", "channel", "clip", "events", "jsonenc", "proc"},
	// The served model answers any agent's model calls from a replay
	// fixture, read by the replay model; scenarios run transcripts
	// against agents, and serve them that model; a comparison of the
	// agents' runs is summarised and written by the report, which only
	// the scenario command uses.
	"served":   {"acp", "clip", "model", "shellword"},
	"report":   {"served", "shellword"},
	"scenario": {"acp", "cliflag", "clip", "jsonenc", "model", "proc", "report", "served", "shellword"},
	// The stored sign-in and acpbridge setup, which checks a key by
	// asking the endpoint for its models.
	"signin": {"cliflag", "model"},
}

func TestArchitecture_importsRunOneWay(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("internal")
	require.NoError(t, err)
	var seen []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		seen = append(seen, name)
		allowed, ok := layers[name]
		if !assert.True(t, ok, "internal/%s has no layer in arch_test.go: say what it may import", name) {
			continue
		}
		pkg, err := build.ImportDir(filepath.Join("internal", name), 0)
		require.NoError(t, err)
		for _, imp := range append(pkg.Imports, pkg.TestImports...) {
			if imp == "acpbridge" {
				t.Errorf("internal/%s imports the root: only the root knows the SessionRecord", name)
				continue
			}
			dep, ours := strings.CutPrefix(imp, "acpbridge/internal/")
			if ours && !slices.Contains(allowed, dep) {
				t.Errorf("internal/%s imports internal/%s, which its layer does not allow (it may import %v)", name, dep, allowed)
			}
		}
	}
	for name := range layers {
		assert.Contains(t, seen, name, "arch_test.go names internal/%s, which does not exist", name)
	}
}

// Verify that no function is over 80 lines (from func to the closing
// brace; tests and bench/ left out). Below that, functions are sized by
// meaning, not by an average: the count and the average are only logged
// (go test -run TestArchitecture_functionsAreShort -v .).
func TestArchitecture_functionsAreShort(t *testing.T) {
	t.Parallel()
	const longest = 80
	fset := token.NewFileSet()
	var funcs, lines int
	var long []string
	err := eachSource(fset, func(f *ast.File) {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok {
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				funcs, lines = funcs+1, lines+n
				if n > longest {
					long = append(long, fmt.Sprintf("%s: %s is %d lines", fset.Position(fd.Pos()), fd.Name.Name, n))
				}
			}
		}
	})
	require.NoError(t, err)
	require.NotZero(t, funcs)
	avg := float64(lines) / float64(funcs)
	t.Logf("%d functions, %.2f lines on average", funcs, avg)
	assert.Empty(t, long, "functions over %d lines", longest)
}

// The process's runtime settings are Go's, or the user's environment's:
// no code changes GOMAXPROCS while the process runs (a tool call that
// raised it for a search changed it under every other goroutine, and over
// a user's own setting). The one setting is a router's, at its start and
// only where the environment has none (routerOnOneProcessor): a router
// runs no search and no tool.
func TestArchitecture_runtimeSettingsLeftAlone(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var calls []string
	routerGuarded := false // the router's setting reads the environment's first
	err := eachSource(fset, func(f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok && fd.Name.Name == "routerOnOneProcessor" && f.Name.Name == "main" {
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					lit, ok := n.(*ast.BasicLit)
					routerGuarded = routerGuarded || ok && lit.Value == `"GOMAXPROCS"`
					return true
				})
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if ok && pkg.Name == "runtime" && sel.Sel.Name == "GOMAXPROCS" {
				if lit, ok := call.Args[0].(*ast.BasicLit); !ok || lit.Value != "0" {
					calls = append(calls, fset.Position(call.Pos()).String())
				}
			}
			return true
		})
	})
	require.NoError(t, err)
	assert.Empty(t, calls, "runtime.GOMAXPROCS set (only GOMAXPROCS(0), a read, is allowed, and the router's at its start)")
	assert.True(t, routerGuarded, "the router's setting yields to GOMAXPROCS in the environment")
}

// eachSource parses every non-test Go file of the module but bench/ and
// testdata/, and gives each to fn.
func eachSource(fset *token.FileSet, fn func(*ast.File)) error {
	return filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(f)
		return nil
	})
}

// Verify that the product binary does not link the test framework: what
// only tests do is the tests' choice, through a hook they set (fanout's
// Options.RefusedMove), not testing.Testing() in the product.
func TestArchitecture_binaryLinksNoTestFramework(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		assert.False(t, pkg == "testing" || strings.HasPrefix(pkg, "testing/") || strings.Contains(pkg, "testify"), "the binary links %s", pkg)
	}
}
