// figures.go holds the figures of a comparison: what each figure is and
// how it is read from what a run measured (Run), each agent's median and
// spread over its runs, and the agents side by side in one table.

package report

import (
	"acpbridge/internal/served"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// figure is one number a run gives: its key (snake_case, the unit in the
// name, as --json and --csv carry it), the turn it is of (from 1; 0 for
// the whole run), its name for a reader, its unit ("ms", "bytes" or ""
// for a count), and how to read it from a Run (ok false when the run
// has none, such as a turn a failed run never reached).
type figure struct {
	Key  string
	Turn int
	Name string
	Unit string
	of   func(Run) (float64, bool)
}

// id is the figure's key with its turn: "turn1_answer_ms".
func (f figure) id() string {
	if f.Turn == 0 {
		return f.Key
	}
	return fmt.Sprintf("turn%d_%s", f.Turn, f.Key)
}

// label is the figure as a reader sees it: its turn, name and the unit
// it is shown in (memory in MiB).
func (f figure) label() string {
	name := f.Name
	if f.Turn > 0 {
		name = fmt.Sprintf("turn %d: %s", f.Turn, name)
	}
	if u := f.shownUnit(); u != "" {
		name += " (" + u + ")"
	}
	return name
}

// shownUnit is the unit a table or chart shows the figure in: memory in
// MiB, other sizes in bytes.
func (f figure) shownUnit() string {
	if f.Unit == "bytes" && f.memory() {
		return "MiB"
	}
	return f.Unit
}

// memory reports whether f is one of the tree's memory figures.
func (f figure) memory() bool {
	return strings.HasPrefix(f.Key, "peak_") || f.Key == "rss_peaks_sum_bytes"
}

// shown is v in the figure's shown unit.
func (f figure) shown(v float64) float64 {
	if f.shownUnit() == "MiB" {
		return v / (1 << 20)
	}
	return v
}

// figuresOf are the figures of a scenario whose runs had at most turns
// prompts: the handshake, each turn's, then the whole run's.
func figuresOf(turns int) []figure {
	dur := func(d time.Duration) (float64, bool) { return float64(d.Microseconds()) / 1000, d >= 0 }
	fs := []figure{
		{"spawn_to_initialize_ms", 0, "spawn → initialize answered", "ms", func(r Run) (float64, bool) { return dur(r.Initialize) }},
		{"session_new_ms", 0, "session/new answered", "ms", func(r Run) (float64, bool) { return dur(r.NewSession) }},
	}
	for k := range turns {
		turnOK := func(f func(Turn) (float64, bool)) func(Run) (float64, bool) {
			return func(r Run) (float64, bool) {
				if k >= len(r.Turns) || r.Turns[k].Answer < 0 {
					return 0, false // a failed run's unfinished turn says nothing
				}
				return f(r.Turns[k])
			}
		}
		turn := func(f func(Turn) float64) func(Run) (float64, bool) {
			return turnOK(func(t Turn) (float64, bool) { return f(t), true })
		}
		// A session of --threads owns no model figures: the model's calls
		// meanwhile are every session's (the whole run's rows have them).
		model := func(f func(served.Count) int64) func(Run) (float64, bool) {
			return turnOK(func(t Turn) (float64, bool) {
				if t.Model == nil {
					return 0, false
				}
				return float64(f(*t.Model)), true
			})
		}
		fs = append(fs,
			// A turn with no output has no first output (missing, never 0);
			// an error answer is no answer time.
			figure{"first_output_ms", k + 1, "first output", "ms", turnOK(func(t Turn) (float64, bool) { return dur(t.FirstOutput) })},
			figure{"answer_ms", k + 1, "answer", "ms", turnOK(func(t Turn) (float64, bool) {
				if t.Failed {
					return 0, false
				}
				return dur(t.Answer)
			})},
			figure{"cpu_ms", k + 1, "CPU of the tree", "ms", turnOK(func(t Turn) (float64, bool) { return dur(t.CPU) })},
			figure{"agent_messages", k + 1, "agent messages", "", turn(func(t Turn) float64 { return float64(t.Messages) })},
			figure{"agent_bytes", k + 1, "agent messages' size", "bytes", turn(func(t Turn) float64 { return float64(t.Bytes) })},
			figure{"model_requests", k + 1, "model requests", "", model(func(c served.Count) int64 { return int64(c.Requests) })},
			figure{"model_request_bytes", k + 1, "model requests' size", "bytes", model(func(c served.Count) int64 { return c.Bytes })},
			figure{"prompt_tokens_estimated", k + 1, "prompt tokens, estimated", "", model(func(c served.Count) int64 { return c.PromptTokens })},
			figure{"completion_tokens_estimated", k + 1, "completion tokens, estimated", "", model(func(c served.Count) int64 { return c.CompletionTokens })},
			figure{"tokens_served", k + 1, "tokens served (the fixture's usage)", "", model(func(c served.Count) int64 { return c.Tokens })},
		)
	}
	known := func(v int64) (float64, bool) { return float64(v), v > 0 }
	whole := func(f func(served.Count) int64) func(Run) (float64, bool) {
		return func(r Run) (float64, bool) {
			if r.Model == nil {
				return 0, false
			}
			return float64(f(*r.Model)), true
		}
	}
	return append(fs,
		figure{"model_requests_total", 0, "model requests, the whole run", "", whole(func(c served.Count) int64 { return int64(c.Requests) })},
		figure{"prompt_tokens_estimated_total", 0, "prompt tokens, estimated, the whole run", "", whole(func(c served.Count) int64 { return c.PromptTokens })},
		figure{"cpu_ms", 0, "CPU, user + system, the whole run", "ms", func(r Run) (float64, bool) { return float64(r.Stats.CPU.Microseconds()) / 1000, r.Stats.CPU > 0 }},
		figure{"peak_pss_bytes", 0, "peak PSS of the tree", "bytes", func(r Run) (float64, bool) { return known(r.Stats.PeakPSS) }},
		figure{"peak_uss_bytes", 0, "peak USS of the tree (private pages)", "bytes", func(r Run) (float64, bool) { return known(r.Stats.PeakUSS) }},
		figure{"peak_anon_bytes", 0, "peak anonymous memory of the tree", "bytes", func(r Run) (float64, bool) { return known(r.Stats.PeakAnon) }},
		figure{"rss_peaks_sum_bytes", 0, "sum of per-process peak RSS (an upper bound)", "bytes", func(r Run) (float64, bool) { return known(r.Stats.PeakRSS) }},
		figure{"processes", 0, "processes", "", func(r Run) (float64, bool) { return float64(r.Stats.Processes), r.Stats.Processes > 0 }},
	)
}

// foldedFigures are the figures a terminal shows of runs of turns
// prompts: the handshake, the first turn's, the rest (from three turns on)
// folded into one row per figure (turns 2–N: the total over them, or for the first output the
// median of theirs), and the whole run's. The JSON, the CSV and report.md
// keep every turn's.
func foldedFigures(turns int) []figure {
	all := figuresOf(turns)
	if turns <= 2 {
		return all // nothing to fold: turn 2 is its own row
	}
	var out, rest, whole []figure
	byKey := map[string][]figure{}
	for _, f := range all {
		switch {
		case f.Turn == 0 && len(byKey) == 0:
			out = append(out, f) // the handshake
		case f.Turn == 0:
			whole = append(whole, f)
		case f.Turn == 1:
			out = append(out, f)
			byKey[f.Key] = nil
		default:
			byKey[f.Key] = append(byKey[f.Key], f)
		}
	}
	for _, f := range out {
		if f.Turn != 1 || len(byKey[f.Key]) == 0 {
			continue
		}
		rest = append(rest, foldTurns(f, byKey[f.Key], turns))
	}
	return slices.Concat(out, rest, whole)
}

// foldTurns is one row for a figure's turns 2–N (each turn's figure in
// turns): for the first output the median of the turns that had one, for
// the rest their total, missing when a turn has none (a run that failed
// before the end: a total over fewer turns would not compare).
func foldTurns(first figure, turns []figure, n int) figure {
	median := first.Key == "first_output_ms"
	how := "total"
	if median {
		how = "median of the turns"
	}
	f := figure{Key: fmt.Sprintf("turns_2_to_%d_%s", n, first.Key), Name: fmt.Sprintf("turns 2–%d: %s, %s", n, first.Name, how), Unit: first.Unit}
	f.of = func(r Run) (float64, bool) {
		var vs []float64
		for _, t := range turns {
			v, ok := t.of(r)
			if !ok && !median {
				return 0, false
			}
			if ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			return 0, false
		}
		if median {
			return quantile(slices.Sorted(slices.Values(vs)), 0.5), true
		}
		total := 0.0
		for _, v := range vs {
			total += v
		}
		return total, true
	}
	return f
}

// maxTurns is the most prompts any of the runs sent.
func maxTurns(runs [][]Run) int {
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
	N      int     `json:"n"`      // values: runs that gave the figure, or with --threads their sessions
	Runs   int     `json:"runs"`   // runs that gave it: the unit its interval resamples
	Median float64 `json:"median"` // of those runs
	Low    float64 `json:"low"`    // the spread: the quartiles, or min and max for fewer than 5 runs
	High   float64 `json:"high"`
	Spread string  `json:"spread"` // "IQR" or "min-max"
	// CI95 is the median's 95% interval (a bootstrap drawing runs, seeded
	// with the comparison's seed); Mean and SD are the values' mean and
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
func valuesOf(f figure, runs []Run) []float64 {
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

// byRound is f's values in runs grouped by the round they ran in (a
// round's: one, or one per session under --threads; none where the run
// gave none), in round order: what intervals resample and ratios pair.
// A Run with no round (a run of its own) is a round of its own.
func byRound(f figure, runs []Run) [][]float64 {
	var rounds [][]float64
	for i, r := range runs {
		k := r.Round
		if k <= 0 {
			k = i + 1
		}
		for len(rounds) < k {
			rounds = append(rounds, nil)
		}
		if v, ok := f.of(r); ok {
			rounds[k-1] = append(rounds[k-1], v)
		}
	}
	return rounds
}

// summarize is f over runs; N is 0 when no run gave it.
func summarize(f figure, runs []Run) summary {
	rounds := byRound(f, runs)
	vs := slices.Concat(rounds...)
	s := summary{N: len(vs)}
	for _, r := range rounds {
		s.Runs += btoi(len(r) > 0)
	}
	if len(vs) == 0 {
		return s
	}
	slices.Sort(vs)
	s.Median = quantile(vs, 0.5)
	s.CI95 = medianCI95(rounds)
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

// cell is the summary as a table cell, in f's shown unit: the median,
// then with several runs its 95% interval in brackets.
func (s summary) cell(f figure) string {
	if s.N == 0 {
		return "–"
	}
	v := func(x float64) string {
		x = f.shown(x)
		if f.Unit == "ms" || f.shownUnit() == "MiB" {
			return fmt.Sprintf("%.1f", x)
		}
		return fmt.Sprintf("%.0f", x)
	}
	if s.N == 1 || s.CI95[0] == s.CI95[1] {
		return v(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", v(s.Median), v(s.CI95[0]), v(s.CI95[1]))
}

// cell is the ratio as a table cell: "1.52× [1.40–1.66]".
func (r *ratio) cell() string {
	if r == nil {
		return "–"
	}
	if r.CI95[0] == r.CI95[1] {
		return fmt.Sprintf("%.2f×", r.Median)
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", r.Median, r.CI95[0], r.CI95[1])
}

// Passed is how many of runs passed.
func Passed(runs []Run) int {
	n := 0
	for _, r := range runs {
		if r.Err == nil {
			n++
		}
	}
	return n
}

// anyGave reports whether any run of any agent gave f.
func anyGave(f figure, runs [][]Run) bool {
	for _, rs := range runs {
		for _, r := range rs {
			if _, ok := f.of(r); ok {
				return true
			}
		}
	}
	return false
}

// runsPassed is how many of the runs that runs' sessions (each a Run) make
// up passed in every session, and how many runs there were.
func runsPassed(runs []Run) (ok, all int) {
	failed := map[int]bool{}
	for i, r := range runs {
		k := r.Round
		if k <= 0 {
			k = -i - 1 // a run of its own
		}
		failed[k] = failed[k] || r.Err != nil
	}
	for _, f := range failed {
		ok += btoi(!f)
	}
	return ok, len(failed)
}

// exitedAtEOF is how many of runs passed with the agent exiting by itself
// at its stdin's end (the others it did not, and the run ended it).
func exitedAtEOF(runs []Run) int {
	n := 0
	for _, r := range runs {
		if r.Err == nil && !r.EndedByRun {
			n++
		}
	}
	return n
}

// Table is the agents' figures for one scenario as a terminal shows them
// (figuresTable): folded, turns 2–N are one row per figure
// (foldedFigures), else every turn has its rows.
func Table(indent string, names []string, runs [][]Run, baseline, threads int, folded bool) string {
	figs := figuresOf(maxTurns(runs))
	if folded {
		figs = foldedFigures(maxTurns(runs))
	}
	return figuresTable(indent, names, runs, baseline, threads, figs)
}

// figuresTable is the agents' figures for one scenario, side by side: a
// row per figure of figs, a column per agent (the median over its runs
// and, with several, the median's 95% interval) and after each agent but
// the baseline its ratio to the baseline (with several runs, paired by
// round, and its interval); threads is how many sessions each run had at
// once. Every line starts with indent.
func figuresTable(indent string, names []string, runs [][]Run, baseline, threads int, figs []figure) string {
	var sb strings.Builder
	n := 0
	for _, rs := range runs {
		n = max(n, len(rs))
	}
	ratios := n > 1 && len(runs) > 1 && baseline < len(runs)
	row := func(first string, cells func(i int) (own, ratio string)) {
		sb.WriteString(indent + "| " + first + " |")
		for i := range runs {
			own, r := cells(i)
			sb.WriteString(" " + own + " |")
			if ratios && i != baseline {
				sb.WriteString(" " + r + " |")
			}
		}
		sb.WriteString("\n")
	}
	row("figure", func(i int) (string, string) { return names[i], names[i] + " ÷ " + names[baseline] })
	row("---", func(int) (string, string) { return "---", "---" })
	if threads > 1 {
		row("runs passed (every session)", func(i int) (string, string) {
			ok, all := runsPassed(runs[i])
			return fmt.Sprintf("%d/%d", ok, all), ""
		})
		row("sessions passed", func(i int) (string, string) { return fmt.Sprintf("%d/%d", Passed(runs[i]), len(runs[i])), "" })
	} else {
		row("runs passed", func(i int) (string, string) { return fmt.Sprintf("%d/%d", Passed(runs[i]), len(runs[i])), "" })
	}
	row("exited at stdin's end", func(i int) (string, string) { return fmt.Sprintf("%d/%d", exitedAtEOF(runs[i]), len(runs[i])), "" })
	for _, f := range figs {
		if !anyGave(f, runs) {
			continue // no agent gave it (a session's model figures under --threads): the footnote says why
		}
		row(f.label(), func(i int) (string, string) {
			own := summarize(f, runs[i]).cell(f)
			if !ratios || i == baseline {
				return own, ""
			}
			return own, pairedRatio(byRound(f, runs[i]), byRound(f, runs[baseline])).cell()
		})
	}
	if n > 1 {
		if threads > 1 {
			_, all := runsPassed(runs[0])
			fmt.Fprintf(&sb, indent+"(%d runs after a warm-up run, each %d sessions at once: a session's figures are the median over every session of every run, the agent's (CPU, memory, processes, the whole run's model figures) over its runs; a session owns no model figures, which are every session's; the 95%% interval in brackets resamples runs, whose sessions are not independent", all, threads)
		} else {
			fmt.Fprintf(&sb, indent+"(median over %d runs after a warm-up run, its 95%% interval in brackets", n)
		}
		if ratios {
			fmt.Fprintf(&sb, "; ratios to %s paired by round, with their 95%% interval", names[baseline])
		}
		sb.WriteString("; processes: the most at once whenever every request was answered)\n")
	}
	return sb.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
