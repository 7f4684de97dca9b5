// explore_test.go drives list_directory, find_files, search_text and
// update_plan on a generated tree (nested .gitignore files, a .git
// directory, a binary file, a link out, a 10,000-match file) in ask mode:
// none of them asks permission.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeTree writes files (path → content) below dir.
func makeTree(t testing.TB, dir string, files map[string]string) {
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func exploreTree(t *testing.T) func(ta *testAgent) {
	return func(ta *testAgent) {
		var many strings.Builder
		for i := range 10000 {
			fmt.Fprintf(&many, "needle %d\n", i)
		}
		makeTree(t, ta.cwd, map[string]string{
			".gitignore":       "*.log\nbuild/\n",
			"sub/.gitignore":   "secret.txt\n!keep.log\n",
			".git/config":      "Hello from git\n",
			"a.go":             "package a\n\nfunc Hello() {}\n",
			"sub/b.go":         "package sub\n// hello again\n",
			"sub/deep/c.go":    "package deep\n",
			"sub/secret.txt":   "Hello secret\n",
			"sub/keep.log":     "Hello kept log\n",
			"x.log":            "Hello ignored\n",
			"build/out.go":     "Hello build\n",
			"bin.dat":          "Hello\x00binary\n",
			"many/needles.txt": many.String(),
		})
		require.NoError(t, os.Symlink("/etc", filepath.Join(ta.cwd, "etc")))
	}
}

// Verify each exploring tool on the tree, in ask mode, with no permission
// request.
func TestExplore_tools(t *testing.T) {
	t.Parallel()
	results, requests := runToolCallsIn(t, "ask", inProcess, `{}`, exploreTree(t),
		[2]string{"list_directory", `{}`},
		[2]string{"find_files", `{"pattern":"**/*.go"}`},
		[2]string{"find_files", `{"pattern":"*.go","path":"sub"}`},
		[2]string{"search_text", `{"pattern":"hello","ignore_case":true}`},
		[2]string{"search_text", `{"pattern":"Hello","glob":"*.go"}`},
		[2]string{"search_text", `{"pattern":"needle"}`},
		[2]string{"search_text", `{"pattern":"(unclosed"}`},
		[2]string{"list_directory", `{"path":"../.."}`},
		[2]string{"find_files", `{"pattern":"**","path":"etc"}`},
		[2]string{"update_plan", `{"entries":[{"content":"Look around","status":"completed"},{"content":"Fix it","status":"in_progress","priority":"high"}]}`},
		[2]string{"update_plan", `{"entries":[{"content":"x","status":"done"}]}`},
	)
	assert.Empty(t, requests, "an exploring tool asked the client for something (permission?)")
	require.Len(t, results, 11)
	assert.Equal(t, ".git/\n.gitignore\na.go\nbin.dat\nbuild/\netc@\nmany/\nsub/\nx.log\n", results[0].text, "list_directory lists everything, ignored or not")
	assert.Equal(t, "a.go\nsub/b.go\nsub/deep/c.go\n", results[1].text, "find_files skips build/ (ignored)")
	assert.Equal(t, "b.go\n", results[2].text, "relative to path; * does not cross directories")
	assert.Equal(t, "a.go:3:func Hello() {}\nsub/b.go:2:// hello again\nsub/keep.log:1:Hello kept log\n", results[3].text,
		"search_text skips .git, *.log (but keep.log, re-included below), build/, secret.txt, the binary file and the link")
	assert.Equal(t, "a.go:3:func Hello() {}\n", results[4].text)
	assert.Equal(t, 500+1, strings.Count(results[5].text, "\n"), "capped at 500 matches, with a note")
	assert.Contains(t, results[5].text, "[search_text: stopped at 500 matches")
	assert.Equal(t, "failed", results[6].status)
	assert.Contains(t, results[6].text, "missing closing )", "the regexp's own message")
	assert.Equal(t, "failed", results[7].status)
	assert.Contains(t, results[7].text, "outside the session's directories")
	assert.Equal(t, "failed", results[8].status, "a link out of the roots is not walked")
	assert.Equal(t, "Plan recorded: 2 entries (1 completed, 1 in progress, 0 pending).", results[9].text)
	assert.Equal(t, "failed", results[10].status)
	assert.Contains(t, results[10].text, `status "done"`)
}

// Verify what the model receives from the exploring tools, with replay's
// expect: each result is checked where the next model call reads it.
func TestExplore_modelReceives(t *testing.T) {
	t.Parallel()
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"s","name":"search_text","input":{"pattern":"hello","ignore_case":true,"glob":"**/*.go"}}}]}`,
		`{"expect":"sub/b.go:2:// hello again","chunks":[{"toolCall":{"id":"f","name":"find_files","input":{"pattern":"**/c.go"}}}]}`,
		`{"expect":"sub/deep/c.go","chunks":[{"toolCall":{"id":"l","name":"list_directory","input":{"path":"sub"}}}]}`,
		`{"expect":"b.go\ndeep/\nkeep.log\nsecret.txt","chunks":[{"text":"Explored."}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	exploreTree(t)(ta)
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "explore")
	require.Nil(t, r.Error, "a model expect failed")
	for _, u := range ups {
		assert.NotContains(t, u, "request_permission")
	}
}
