// repeat.go holds the figures of repeated runs: what each figure is, read
// from a run's Result, and each agent's median and spread over its runs,
// side by side in one table.

package scenario

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// figure is one number a run gives: its name, its unit and how to read it
// from a Result (ok false when the run has none, such as a turn a failed
// run never reached).
type figure struct {
	Name string
	Unit string
	of   func(Result) (float64, bool)
}

// figuresOf are the figures of a scenario whose runs had at most turns
// prompts: the handshake, each turn's, then the whole run's.
func figuresOf(turns int) []figure {
	dur := func(d time.Duration) (float64, bool) { return float64(d.Microseconds()) / 1000, d >= 0 }
	fs := []figure{
		{"spawn → initialize answered", "ms", func(r Result) (float64, bool) { return dur(r.Initialize) }},
		{"session/new answered", "ms", func(r Result) (float64, bool) { return dur(r.NewSession) }},
	}
	for k := range turns {
		turn := func(f func(Turn) (float64, bool)) func(Result) (float64, bool) {
			return func(r Result) (float64, bool) {
				if k >= len(r.Turns) || r.Turns[k].Answer < 0 {
					return 0, false // a failed run's unfinished turn says nothing
				}
				return f(r.Turns[k])
			}
		}
		p := fmt.Sprintf("turn %d: ", k+1)
		fs = append(fs,
			figure{p + "first update", "ms", turn(func(t Turn) (float64, bool) { return dur(t.FirstUpdate) })},
			figure{p + "answer", "ms", turn(func(t Turn) (float64, bool) { return dur(t.Answer) })},
			figure{p + "agent messages", "", turn(func(t Turn) (float64, bool) { return float64(t.Messages), true })},
			figure{p + "agent bytes", "B", turn(func(t Turn) (float64, bool) { return float64(t.Bytes), true })},
			figure{p + "model requests", "", turn(func(t Turn) (float64, bool) { return float64(t.Model.Requests), true })},
			figure{p + "model request bytes", "B", turn(func(t Turn) (float64, bool) { return float64(t.Model.Bytes), true })},
			figure{p + "tokens served", "", turn(func(t Turn) (float64, bool) { return float64(t.Model.Tokens), true })},
		)
	}
	known := func(v int64) (float64, bool) { return float64(v), v >= 0 }
	return append(fs,
		figure{"CPU", "ms", func(r Result) (float64, bool) { return float64(r.Stats.CPU.Microseconds()) / 1000, r.Stats.CPU > 0 }},
		figure{"peak RSS", "MiB", func(r Result) (float64, bool) { v, ok := known(r.Stats.PeakRSS); return v / (1 << 20), ok && v > 0 }},
		figure{"peak PSS", "MiB", func(r Result) (float64, bool) { v, ok := known(r.Stats.PeakPSS); return v / (1 << 20), ok && v > 0 }},
		figure{"processes", "", func(r Result) (float64, bool) { return float64(r.Stats.Processes), r.Stats.Processes > 0 }},
	)
}

// maxTurns is the most prompts any of the runs sent.
func maxTurns(runs [][]Result) int {
	n := 0
	for _, rs := range runs {
		for _, r := range rs {
			n = max(n, len(r.Turns))
		}
	}
	return n
}

// summary is one figure over an agent's runs: its median and spread.
type summary struct {
	N      int     `json:"n"`      // runs that gave the figure
	Median float64 `json:"median"` // of those runs
	Low    float64 `json:"low"`    // the spread: the quartiles, or min and max for fewer than 5 runs
	High   float64 `json:"high"`
	Spread string  `json:"spread"` // "IQR" or "min-max"
	// CI95 is the median's 95% interval (a percentile bootstrap seeded
	// with the comparison's seed); Mean and SD are the runs' mean and
	// sample standard deviation.
	CI95 [2]float64 `json:"ci95"`
	Mean float64    `json:"mean"`
	SD   float64    `json:"sd"`
	// Outliers are the runs (from 1) outside three interquartile ranges.
	Outliers []int `json:"outliers,omitempty"`
	// RatioToBaseline is the figure against the baseline agent's
	// (--baseline; the first agent by default); nil for the baseline.
	RatioToBaseline *ratio `json:"ratio_to_baseline,omitempty"`
}

// valuesOf is f's value in each run, NaN where a run did not give it.
func valuesOf(f figure, runs []Result) []float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		if v, ok := f.of(r); ok {
			vs[i] = v
		} else {
			vs[i] = math.NaN()
		}
	}
	return vs
}

// summarize is f over runs; N is 0 when no run gave it.
func summarize(f figure, runs []Result) summary {
	var vs []float64
	for _, r := range runs {
		if v, ok := f.of(r); ok {
			vs = append(vs, v)
		}
	}
	s := summary{N: len(vs)}
	if len(vs) == 0 {
		return s
	}
	slices.Sort(vs)
	s.Median = quantile(vs, 0.5)
	s.CI95 = medianCI95(vs)
	s.Mean, s.SD = meanSD(vs)
	s.Outliers = outliers(valuesOf(f, runs))
	if len(vs) < 5 {
		s.Low, s.High, s.Spread = vs[0], vs[len(vs)-1], "min-max"
	} else {
		s.Low, s.High, s.Spread = quantile(vs, 0.25), quantile(vs, 0.75), "IQR"
	}
	return s
}

// quantile is the q-quantile of sorted vs, interpolated between the two
// values it falls between.
func quantile(vs []float64, q float64) float64 {
	pos := q * float64(len(vs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(vs)-1)
	return vs[lo] + (vs[hi]-vs[lo])*(pos-float64(lo))
}

// show is the summary as a table cell: the median, then the spread when
// there are several runs.
func (s summary) show(unit string) string {
	if s.N == 0 {
		return "–"
	}
	v := func(x float64) string {
		switch unit {
		case "ms", "MiB":
			return fmt.Sprintf("%.1f", x)
		}
		return fmt.Sprintf("%.0f", x)
	}
	if s.N == 1 || s.Low == s.High {
		return v(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", v(s.Median), v(s.Low), v(s.High))
}

// passed is how many of runs passed.
func passed(runs []Result) int {
	n := 0
	for _, r := range runs {
		if r.Err == nil {
			n++
		}
	}
	return n
}

// exitedAtEOF is how many of runs passed with the agent exiting by itself
// at its stdin's end (the others it did not, and the run ended it).
func exitedAtEOF(runs []Result) int {
	n := 0
	for _, r := range runs {
		if r.Err == nil && !r.EndedByRun {
			n++
		}
	}
	return n
}

// figuresTable is the agents' figures for one scenario, side by side: a
// row per figure, a column per agent, each cell the median over its runs
// and, with several, the spread in parentheses; every line starts with
// indent.
func figuresTable(indent string, names []string, runs [][]Result) string {
	var sb strings.Builder
	n := 0
	for _, rs := range runs {
		n = max(n, len(rs))
	}
	sb.WriteString(indent + "| figure |")
	for _, name := range names {
		sb.WriteString(" " + name + " |")
	}
	sb.WriteString("\n" + indent + "|---|" + strings.Repeat("---|", len(names)) + "\n")
	sb.WriteString(indent + "| runs passed |")
	for _, rs := range runs {
		fmt.Fprintf(&sb, " %d/%d |", passed(rs), len(rs))
	}
	sb.WriteString("\n" + indent + "| exited at stdin's end |")
	for _, rs := range runs {
		fmt.Fprintf(&sb, " %d/%d |", exitedAtEOF(rs), len(rs))
	}
	sb.WriteString("\n")
	for _, f := range figuresOf(maxTurns(runs)) {
		label := f.Name
		if f.Unit != "" {
			label += " (" + f.Unit + ")"
		}
		sb.WriteString(indent + "| " + label + " |")
		for _, rs := range runs {
			sb.WriteString(" " + summarize(f, rs).show(f.Unit) + " |")
		}
		sb.WriteString("\n")
	}
	if n > 1 {
		spread := "the interquartile range"
		if n < 5 {
			spread = "min–max"
		}
		fmt.Fprintf(&sb, indent+"(median over %d runs after a warm-up run, %s in parentheses; processes: the most at once whenever every request was answered)\n", n, spread)
	}
	return sb.String()
}
