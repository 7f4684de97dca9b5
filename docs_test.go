// docs_test.go keeps the docs true to the code: every test, fuzz target and
// benchmark they cite exists, every fuzz target is listed, and the README
// states no measured figure of its own (each lives in docs/performance.md,
// with its command, and the README links there), so two pages cannot
// disagree.

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/events"
)

func TestDocs_consistent(t *testing.T) {
	t.Parallel()
	funcs := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	var fuzz []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
			if strings.HasPrefix(m[1], "Fuzz") {
				fuzz = append(fuzz, m[1])
			}
		}
		return nil
	})
	require.NoError(t, err)

	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	cited := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z]\\w*)`")
	for _, path := range append(docs, "README.md") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			assert.True(t, funcs[m[1]], "%s cites %s, which no test file declares", path, m[1])
		}
	}
	reliability, err := os.ReadFile("docs/reliability.md")
	require.NoError(t, err)
	for _, f := range fuzz {
		assert.Contains(t, string(reliability), "`"+f+"`", "docs/reliability.md lists every fuzz target")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	figure := regexp.MustCompile(`\d[\d.,]*\s?(ms|µs)\b`)
	assert.Empty(t, figure.FindAllString(string(readme), -1), "the README states no timing of its own: link to docs/performance.md")
}

// Verify that docs/design.md lists every event of internal/events, and
// names none that is not there.
func TestDocs_eventsListed(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/design.md")
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		listed[m[1]] = true
	}
	for _, name := range events.All() {
		assert.True(t, listed[string(name)], "docs/design.md's events list lacks %s", name)
		delete(listed, string(name))
	}
	assert.Empty(t, listed, "docs/design.md lists events internal/events does not have")
}
