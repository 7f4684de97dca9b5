// differences.go holds where two agents' runs of one scenario differ, as
// the scenario runner found it, and how a reader is shown it.

package report

import (
	"fmt"
	"strings"
)

// Differences is where one pair of agents differ, from each agent's
// first counted run. SameAs names an earlier pair whose
// differences these repeat, its names put for these ("acpbridge and
// codex": fanout differs from codex as acpbridge does); Lines is then
// empty.
type Differences struct {
	A      string   `json:"a"`
	B      string   `json:"b"`
	Lines  []string `json:"lines"` // none: they sent the same lines
	SameAs string   `json:"same_as,omitempty"`
}

// ShowDifferences is where each pair of agents differs, as a terminal
// and report.md show it.
func ShowDifferences(all []Differences) string {
	var sb strings.Builder
	for _, p := range all {
		switch {
		case p.SameAs != "":
			fmt.Fprintf(&sb, "  %s and %s differ as %s do\n", p.A, p.B, p.SameAs)
		case len(p.Lines) == 0:
			fmt.Fprintf(&sb, "  %s and %s sent the same lines (chunks joined; ids and times as variables)\n", p.A, p.B)
		default:
			fmt.Fprintf(&sb, "  where %s and %s differ, the turns first (values: %s / %s):\n", p.A, p.B, p.A, p.B)
			for _, d := range p.Lines {
				sb.WriteString("    " + d + "\n")
			}
		}
	}
	return sb.String()
}
