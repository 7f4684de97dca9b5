// limits.go writes report.md's "Limits of this comparison": what its
// figures do not cover, said from what the run itself knows (the served
// model, the machine and its load, the order of the runs, how many there
// were, what failed, what is estimated).

package report

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// writeLimits writes the section.
func (c *Comparison) writeLimits(md *strings.Builder) {
	md.WriteString("\n## Limits of this comparison\n\n")
	e := c.Environment
	agents := len(c.Agents)
	runs, failed, silent := 0, 0, map[string]bool{}
	for _, sr := range c.Scenarios {
		runs = max(runs, sr.Repeat)
		for _, ar := range sr.Results {
			for _, rec := range slices.Concat(ar.Runs, ar.WarmUp) {
				if !rec.Passed {
					failed++
				}
				if rec.Note != "" {
					silent[ar.Agent] = true
				}
			}
		}
	}
	item := func(format string, a ...any) { fmt.Fprintf(md, "- "+format+"\n", a...) }

	item("**The model is a recording.** Every agent was answered by acpbridge's served model, from the scenario's recorded entries, on the agent's own wire, at once: no inference time, no network, the same answers for every agent. The time figures are the agent's own work around its model calls, not what a user waits for with a real model, whose latency (seconds a call) dominates a real turn; the ratios between agents would shrink toward 1 under it.")
	if len(silent) > 0 {
		item("**Not every agent used it.** No request of %s reached the served model in some runs: it answered with a model of its own, so its figures there are not comparable.", strings.Join(sortedKeys(silent), ", "))
	}
	item("**Offline but for loopback, not sandboxed.** The model was on 127.0.0.1; what else an agent does on the network (update checks, telemetry) was neither served nor stopped, and its time is in the agent's figures.")
	machine := fmt.Sprintf("%s × %d, %s/%s", cmp.Or(e.CPU, "an unknown CPU"), e.CPUs, e.OS, e.Arch)
	load := "its load was not readable"
	if lo, hi, ok := c.sampledRange(func(rec runRecord) []float64 { return firsts(rec.LoadAverage, rec.LoadAtEnd) }); ok {
		load = fmt.Sprintf("its 1-minute load ran from %.2f to %.2f as runs began and ended", lo, hi)
	}
	item("**One machine, one sitting.** All runs ran on %s; %s. The intervals say how far each median would move if these runs were made again here, now; they do not cover another machine, another day, another load, or another version of an agent or its runtime (between two machines the ratios to a baseline have moved two- to fourfold).", machine, load)
	order := "one run per agent, in the order the agents were named"
	if runs > 1 {
		order = fmt.Sprintf("%d counted rounds after one warm-up run per agent, each round every agent once, in the order of a Williams design (each agent in each place, and after each other agent, equally often over %s)", runs, cycleWords(agents))
		if agents > 1 && runs%cycle(agents) != 0 {
			order += fmt.Sprintf("; %d rounds are not a whole number of cycles, so that balance is not exact", runs)
		}
	}
	item("**Order.** The agents ran one at a time: %s. What one agent leaves behind (files in the page cache, a warm CPU, a lingering process) falls on the next.", order)
	n := fmt.Sprintf("%d runs per agent", runs)
	if c.Threads > 1 {
		n = fmt.Sprintf("%d runs per agent, each %d sessions at once; the sessions of a run share its process and its minute of the machine, so the intervals resample runs, not sessions, and are as wide as %d runs allow", runs, c.Threads, runs)
	}
	item("**Few runs.** %s. A median's 95%% interval from so few is coarse (with 10 runs it spans about the 2nd to the 9th value); a difference inside both agents' intervals is not one this comparison can show.", n)
	if failed > 0 {
		item("**Failures.** %d runs failed (listed under each scenario, with the reason); a failed run's figures count up to where it failed, and a turn it never finished has none.", failed)
	}
	item("**Estimates.** Prompt and completion tokens are estimated the same way for every agent (the bytes of a request's text, and of an answer's, divided by 4), not by any model's tokenizer; a real model's counts differ, by an amount that differs between languages and between agents' prompts.")
	item("**Memory sampled.** Memory is sampled every 5 ms, or, where a sample of the tree takes longer than a twentieth of that, twenty times the sample's time apart (so that measuring takes at most a twentieth of a core beside the agent: a large tree is sampled less often), and whenever an agent has answered every request: a shorter peak may be missed. PSS and USS move with what other processes on the machine map of the same files (a page shared with another process is divided in PSS and leaves USS); the tree's anonymous memory does not, and is the figure to compare across runs and machines.")
}

// sortedKeys is set's keys in order.
func sortedKeys(set map[string]bool) []string {
	return slices.Sorted(maps.Keys(set))
}
