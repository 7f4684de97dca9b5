// Package report holds a comparison of agents: the same scenarios run by
// several agents (or by one, several times), and what a reader is given to
// compare them. The scenario runner measures each run (Run: its
// handshake's and each turn's times, messages and model calls, its
// process tree's memory, CPU and processes); this package summarises the
// runs and writes them down.
//
// A comparison is fair by construction where it can be: every agent is
// answered by the same served model from the same recorded entries, and
// the agents take turns in the order of a Williams design (williams.go), so
// that each runs in each place and after each other agent equally often.
// Where it cannot be, it says so: report.md's "Limits of this comparison"
// (limits.go) states, from what the run itself knows, what its figures do
// not cover.
//
// Each figure is defined once, in figures.go (what it reads from a Run,
// its key and unit) and for readers in report.md's "Figures" section
// (figureDefinitions). An agent's figure over its counted runs is the
// median with a seeded bootstrap 95% interval that resamples runs (a run's
// sessions under --threads together); a ratio to the baseline agent is
// the ratio of the medians, paired by round, with its own interval
// (stats.go).
//
// A comparison is written as a terminal table (Table), JSON (WriteJSON),
// a row per run and figure in CSV (WriteCSV), Go's benchmark format for
// benchstat (WriteBenchfmt), and a directory of report.md and SVG charts
// (WriteReport).
package report
