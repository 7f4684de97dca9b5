// csv.go writes a comparison's runs as CSV (--csv), for others' tools: one
// row per run and figure.

package report

import (
	"encoding/csv"
	"errors"
	"os"
	"strconv"
)

// WriteCSV writes one row per counted run (under --threads, per session)
// and figure: the run (its place in the order the scenario's counted runs
// of every agent ran, from 1), the
// round (from 1), the session (its number among the run's --threads, else
// empty), the agent, the scenario, whether the run (session) passed, the
// turn (0 for a figure of the whole run), the figure in snake_case with its
// unit in the name, the unit, and the value (sizes in bytes). A figure a
// run did not give has no row.
func (c *Comparison) WriteCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"run", "round", "session", "agent", "scenario", "passed", "turn", "figure", "unit", "value"})
	for _, sr := range c.Scenarios {
		figs := figuresOf(maxTurns(sr.runs))
		for i, rs := range sr.runs {
			for _, r := range rs {
				session := ""
				if r.Session > 0 {
					session = strconv.Itoa(r.Session)
				}
				for _, fg := range figs {
					v, ok := fg.of(r)
					if !ok {
						continue
					}
					w.Write([]string{strconv.Itoa(r.Seq), strconv.Itoa(r.Round), session, c.Agents[i].Name, sr.Path, strconv.FormatBool(r.Err == nil),
						strconv.Itoa(fg.Turn), fg.Key, fg.Unit, strconv.FormatFloat(v, 'f', -1, 64)})
				}
			}
		}
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}
