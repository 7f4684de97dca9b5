// csv.go writes a comparison's runs as CSV (--csv), for others' tools: one
// row per run and figure.

package scenario

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
)

// writeCSV writes one row per counted run and figure: the run's index
// among its agent's counted runs (from 1), the agent, the scenario, the
// turn (0 for a figure of the whole run), the figure in snake_case with its
// unit in the name, the unit, and the value (sizes in bytes). A figure a
// run did not give has no row.
func (c *comparison) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"run", "agent", "scenario", "turn", "figure", "unit", "value"})
	for _, sr := range c.Scenarios {
		figs := figuresOf(maxTurns(sr.runs))
		for i, rs := range sr.runs {
			for n, r := range rs {
				for _, fg := range figs {
					v, ok := fg.of(r)
					if !ok {
						continue
					}
					w.Write([]string{strconv.Itoa(n + 1), c.Agents[i].Name, sr.Path, strconv.Itoa(fg.Turn), fg.Key, fg.Unit, strconv.FormatFloat(v, 'f', -1, 64)})
				}
			}
		}
	}
	w.Flush()
	return errorsJoin(w.Error(), f.Close())
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	if b != nil {
		return fmt.Errorf("writing the CSV: %w", b)
	}
	return nil
}
