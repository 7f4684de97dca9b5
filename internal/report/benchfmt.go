// benchfmt.go writes a comparison's runs in Go's benchmark format
// (--benchfmt), so that benchstat can compare agents with its own
// statistics: `benchstat -col /agent FILE`.

package report

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// WriteBenchfmt writes one benchmark line per counted run (with --threads,
// per session) of each scenario and agent: named
// BenchmarkScenario/<file>/agent=<name>, one iteration, then each figure
// the run gave as a value and a unit named by the figure (its unit in the
// name: "turn1-answer-ms", "peak-pss-bytes"). benchstat compares the
// agents with -col /agent; its intervals treat every line as independent,
// which a session of a --threads run is not (the report's resample runs).
func (c *Comparison) WriteBenchfmt(path string) error {
	var b strings.Builder
	e := c.Environment
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\n", runtime.GOOS, runtime.GOARCH)
	if e.CPU != "" {
		fmt.Fprintf(&b, "cpu: %s\n", e.CPU)
	}
	fmt.Fprintf(&b, "pkg: acpbridge/scenario\nacpbridge: %s\n", e.Acpbridge)
	for _, sr := range c.Scenarios {
		figs := figuresOf(maxTurns(sr.runs))
		name := benchName(strings.TrimSuffix(filepath.Base(sr.Path), filepath.Ext(sr.Path)))
		for i, rs := range sr.runs {
			for _, r := range rs {
				fmt.Fprintf(&b, "BenchmarkScenario/%s/agent=%s 1", name, benchName(c.Agents[i].Name))
				for _, f := range figs {
					if v, ok := f.of(r); ok {
						fmt.Fprintf(&b, " %s %s", strconv.FormatFloat(v, 'f', -1, 64), strings.ReplaceAll(f.id(), "_", "-"))
					}
				}
				b.WriteString("\n")
			}
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// benchName is s as a part of a benchmark's name: no spaces or slashes.
func benchName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '/' || r == '\t' {
			return '_'
		}
		return r
	}, s)
}
