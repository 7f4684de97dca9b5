// report_test.go checks what a comparison's reader sees: the table's
// intervals and ratios, the charts, the per-turn counts, the folded
// differences, the token estimate and the versions found.

package scenario

import (
	"acpbridge/internal/served"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runOf is a run that answered initialize after init and its one turn with
// the given kinds sent.
func runOf(init time.Duration, sent map[string]int) Result {
	return Result{Initialize: init, NewSession: -1,
		Turns: []Turn{{FirstOutput: time.Millisecond, Answer: 2 * time.Millisecond, Sent: sent}}}
}

// Verify the table: a cell is the median and its 95% interval, each
// agent but the baseline has a ratio column (paired by round), memory is
// shown in MiB.
func TestFiguresTable_intervalsAndRatios(t *testing.T) {
	a := []Result{runOf(10*time.Millisecond, nil), runOf(11*time.Millisecond, nil), runOf(12*time.Millisecond, nil)}
	b := []Result{runOf(20*time.Millisecond, nil), runOf(22*time.Millisecond, nil), runOf(24*time.Millisecond, nil)}
	for i := range a {
		a[i].Stats.PeakPSS, b[i].Stats.PeakPSS = 10<<20, 5<<20
	}
	table := figuresTable("", []string{"a", "b"}, [][]Result{a, b}, 0, 1, figuresOf(1))
	assert.Contains(t, table, "| figure | a | b | b ÷ a |")
	assert.Contains(t, table, "| spawn → initialize answered (ms) | 11.0 [10.0–12.0] | 22.0 [20.0–24.0] | 2.00× |", "every round's ratio is 2")
	assert.Contains(t, table, "| peak PSS of the tree (MiB) | 10.0 | 5.0 | 0.50× |")
	assert.Contains(t, table, "ratios to a paired by round")

	// The baseline named second: the ratio column follows the first.
	table = figuresTable("", []string{"a", "b"}, [][]Result{a, b}, 1, 1, figuresOf(1))
	assert.Contains(t, table, "| figure | a | a ÷ b | b |")
	assert.Contains(t, table, "| 0.50× |")
}

// Verify a figure's chart: dots and intervals, never a bar from a floor
// (on a log axis its length would be the floor's, not the value's); a log
// axis said when the values span more than 20×; n under every agent, runs
// and sessions told apart; a dot per run; the medians' labels each in its
// own agent's column (they never meet the dots or each other); no
// interval on a constant figure.
func TestDotChart(t *testing.T) {
	wide := dotChart("start (ms)", "coding.txtar", []series{
		{name: "fast", sum: summary{N: 3, Runs: 3, Median: 2, CI95: [2]float64{1.5, 2.5}}, runs: []float64{1.5, 2, 2.5}},
		{name: "slow", sum: summary{N: 15, Runs: 3, Median: 400, CI95: [2]float64{380, 420}}, runs: []float64{380, 400, 420}},
	})
	assert.Contains(t, wide, "log axis")
	assert.Contains(t, wide, ">n = 3 runs<")
	assert.Contains(t, wide, ">n = 3 runs, 15 sessions<", "--threads: runs and sessions")
	assert.Equal(t, 6, strings.Count(wide, "<circle"), "a dot per run")
	assert.Contains(t, wide, `>1000</text>`, "a tick at each power of ten")
	for _, m := range regexp.MustCompile(`<rect [^>]*height="([0-9.]+)"`).FindAllStringSubmatch(wide, -1) {
		assert.Equal(t, "3", m[1], "only the medians' marks: no bar from the axis's floor")
	}
	labels := regexp.MustCompile(`<text x="([0-9.]+)" y="[0-9.]+" font-size="11">(2|400)</text>`).FindAllStringSubmatch(wide, -1)
	require.Len(t, labels, 2, "each median written once")
	dots := regexp.MustCompile(`<circle cx="([0-9.]+)"`).FindAllStringSubmatch(wide, -1)
	for _, l := range labels {
		x, _ := strconv.ParseFloat(l[1], 64)
		for _, d := range dots {
			cx, _ := strconv.ParseFloat(d[1], 64)
			assert.False(t, x <= cx && cx < x+30, "the label at %v clears the dot at %v", x, cx)
		}
	}
	x0, _ := strconv.ParseFloat(labels[0][1], 64)
	x1, _ := strconv.ParseFloat(labels[1][1], 64)
	assert.Greater(t, x1-x0, 100.0, "the two agents' labels apart")

	flat := dotChart("processes", "coding.txtar", []series{
		{name: "a", sum: summary{N: 3, Median: 1, CI95: [2]float64{1, 1}}, runs: []float64{1, 1, 1}},
		{name: "b", sum: summary{N: 3, Median: 2, CI95: [2]float64{2, 2}}, runs: []float64{2, 2, 2}},
	})
	assert.Contains(t, flat, "linear axis")
	assert.Equal(t, 6, strings.Count(flat, "<circle"))
	assert.NotContains(t, flat, `stroke-width="2"`, "no interval on a constant figure")

	ratios := ratioChart("coding.txtar", "a", []ratioRow{{figure: "CPU (ms)", agent: "b", r: &ratio{Median: 3, CI95: [2]float64{2, 4}, Rounds: 10}}})
	assert.Contains(t, ratios, "ratio to a")
	assert.Contains(t, ratios, "b: CPU (ms) (n = 10)", "n on the ratio chart")
	assert.Contains(t, ratios, ">1×</text>")
}

// Verify the per-turn counts of what each agent sent: the median over its
// runs, a kind one agent never sent counted 0 for it.
func TestSentTable(t *testing.T) {
	a := []Result{
		runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 3, "request session/request_permission": 1}),
		runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 5, "request session/request_permission": 1}),
	}
	b := []Result{runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 1})}
	table := sentTable([]string{"a", "b"}, [][]Result{a, b})
	assert.Contains(t, table, "| turn | message | a | b |")
	assert.Contains(t, table, "| 1 | update agent_message_chunk | 4 | 1 |")
	assert.Contains(t, table, "| 1 | request session/request_permission | 1 | 0 |")
}

// Verify the kinds a turn counts.
func TestSentKind(t *testing.T) {
	m := func(s string) *string { return &s }
	assert.Equal(t, "update tool_call", sentKind(m("session/update"), false, "tool_call"))
	assert.Equal(t, "request fs/read_text_file", sentKind(m("fs/read_text_file"), true, ""))
	assert.Equal(t, "notification $/cancel_request", sentKind(m("$/cancel_request"), false, ""))
	assert.Equal(t, "", sentKind(nil, true, ""), "a response is not counted")
}

// Verify that a pair whose differences repeat an earlier pair's is
// folded into it, and a pair that differs otherwise is not.
func TestCompareAll_foldsRepeatedPairs(t *testing.T) {
	line := func(text string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`)
	}
	res := func(text string) Result { return Result{Received: [][]byte{line(text)}} }
	names := []string{"acpbridge", "fanout", "codex", "other"}
	diffs := compareAll(names, []Result{res("hi"), res("hi"), res("hello"), res("bye")}, 0, 0)
	byPair := map[string]pairDifferences{}
	for _, d := range diffs {
		byPair[d.A+"/"+d.B] = d
	}
	assert.Empty(t, byPair["acpbridge/fanout"].Lines)
	assert.Empty(t, byPair["acpbridge/fanout"].SameAs)
	assert.NotEmpty(t, byPair["acpbridge/codex"].Lines)
	assert.Equal(t, "acpbridge and codex", byPair["fanout/codex"].SameAs)
	assert.Empty(t, byPair["fanout/codex"].Lines)
	assert.Empty(t, byPair["codex/other"].SameAs, "different values are not folded")
	assert.Contains(t, showDifferences(diffs), "fanout and codex differ as acpbridge and codex do")
}

// Verify what a reader is told of an agent's versions: the name and
// version from its answer to initialize, and the ACP package of a Node
// script that names it (not of a wrapper that happens to lie beside one).
func TestVersions(t *testing.T) {
	assert.Equal(t, "codex-acp 0.16.0", agentInfo([][]byte{
		[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"codex-acp","version":"0.16.0"}}}`)}))
	assert.Equal(t, "", agentInfo([][]byte{[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)}))

	dir := t.TempDir()
	sdk := filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")
	require.NoError(t, os.MkdirAll(sdk, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sdk, "package.json"), []byte(`{"name":"@agentclientprotocol/sdk","version":"0.9.1"}`), 0o644))
	script := filepath.Join(dir, "dist", "index.js")
	require.NoError(t, os.MkdirAll(filepath.Dir(script), 0o755))
	require.NoError(t, os.WriteFile(script, []byte("import * as acp from \"@agentclientprotocol/sdk\";\n"), 0o644))
	assert.Equal(t, "@agentclientprotocol/sdk 0.9.1", sdkOf(script), "a script that imports it")
	wrapper := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec codex-acp \"$@\"\n"), 0o755))
	assert.Equal(t, "", sdkOf(wrapper), "a wrapper beside the package, which names none, is credited with none")
	assert.Equal(t, "", sdkOf(""))
}

// Verify the table under --threads: the unit is the run. Two runs of three
// sessions, one session failed: runs passed counts runs (1/2) and sessions
// passed sessions (5/6); a session owns no model figures (the served
// model's calls meanwhile are every session's), so no per-turn model row
// has a value, while the whole run's do, once per run.
func TestFiguresTable_threadsByRun(t *testing.T) {
	var rs []Result
	for round := 1; round <= 2; round++ {
		for s := 1; s <= 3; s++ {
			r := runOf(time.Duration(round)*time.Millisecond, nil)
			r.Round, r.Session = round, s
			if s == 1 {
				r.Model = &served.Count{Requests: 7}
			}
			if round == 2 && s == 3 {
				r.Err = errors.New("a session failed")
			}
			rs = append(rs, r)
		}
	}
	table := figuresTable("", []string{"a"}, [][]Result{rs}, 0, 3, figuresOf(1))
	assert.Contains(t, table, "| runs passed (every session) | 1/2 |")
	assert.Contains(t, table, "| sessions passed | 5/6 |")
	assert.NotContains(t, table, "| turn 1: model requests |", "a session owns no model figures: no row")
	assert.NotContains(t, table, "| turn 1: tokens served")
	assert.Contains(t, table, "| model requests, the whole run | 7 |")
	assert.Contains(t, table, "resamples runs")
	s := summarize(figuresOf(1)[0], rs) // spawn → initialize: per run
	assert.Equal(t, 6, s.N)
	assert.Equal(t, 2, s.Runs)
}

// Verify report.md's "Limits of this comparison", written from what the run
// knows: the served model, the machine and its load as sampled, the order
// and whether the rounds balance it, n (runs, and sessions with
// --threads), the failures counted, an agent that used a model of its own
// named.
func TestLimits(t *testing.T) {
	rec := func(passed bool, note string, load float64) runRecord {
		return runRecord{Passed: passed, Note: note, LoadAverage: []float64{load, 1, 1}, LoadAtEnd: []float64{load + 1, 1, 1}}
	}
	c := &comparison{Threads: 1, Environment: environment{CPU: "Test CPU", CPUs: 2, OS: "linux", Arch: "amd64"},
		Agents: []agentRecord{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Scenarios: []scenarioRecord{{Repeat: 4, Results: []agentResults{
			{Agent: "a", Runs: []runRecord{rec(true, "", 0.5), rec(false, "", 2)}},
			{Agent: "b", Runs: []runRecord{rec(true, "no request reached the served model", 1)}},
		}}}}
	var md strings.Builder
	c.writeLimits(&md)
	text := md.String()
	for _, want := range []string{
		"## Limits of this comparison",
		"**The model is a recording.**",
		"No request of b reached the served model",
		"All runs ran on Test CPU × 2, linux/amd64; its 1-minute load ran from 0.50 to 3.00",
		"4 counted rounds", "Williams design", "each cycle of 6 rounds", "4 rounds are not a whole number of cycles",
		"4 runs per agent.",
		"1 runs failed",
		"not by any model's tokenizer",
	} {
		assert.Contains(t, text, want)
	}
	c.Threads = 5
	c.Scenarios[0].Repeat = 6
	md.Reset()
	c.writeLimits(&md)
	assert.Contains(t, md.String(), "6 runs per agent, each 5 sessions at once", "n as runs and sessions")
	assert.NotContains(t, md.String(), "not a whole number of cycles", "6 rounds are a whole cycle of 3 agents")
}

// Verify the terminal's table: the first turn's figures, turns 2–N folded
// into one row per figure (answer times added up, first output the median
// of the turns), the whole run's after; a run that did not finish every
// turn gives no total (it would not compare), and the table's length does
// not grow with the turns.
func TestFoldedFigures(t *testing.T) {
	turn := func(first, answer time.Duration) Turn {
		return Turn{FirstOutput: first, Answer: answer, Model: &served.Count{Requests: 2}}
	}
	full := Result{Initialize: time.Millisecond, NewSession: -1, Stats: Stats{CPU: 7 * time.Millisecond}, Turns: []Turn{turn(1, 10), turn(3*time.Millisecond, 20*time.Millisecond), turn(5*time.Millisecond, 30*time.Millisecond), turn(4*time.Millisecond, 40*time.Millisecond)}}
	cut := full
	cut.Turns = append([]Turn{}, full.Turns...)
	cut.Turns[3].Answer = -1
	figs := foldedFigures(4)
	get := func(key string, r Result) (float64, bool) {
		for _, f := range figs {
			if f.Key == key {
				return f.of(r)
			}
		}
		t.Fatalf("no %s among %d figures", key, len(figs))
		return 0, false
	}
	v, ok := get("turns_2_to_4_answer_ms", full)
	assert.True(t, ok)
	assert.InDelta(t, 90.0, v, 1e-9, "20 + 30 + 40")
	v, _ = get("turns_2_to_4_first_output_ms", full)
	assert.InDelta(t, 4.0, v, 1e-9, "the median of 3, 5, 4")
	v, _ = get("turns_2_to_4_model_requests", full)
	assert.InDelta(t, 6.0, v, 1e-9)
	_, ok = get("turns_2_to_4_answer_ms", cut)
	assert.False(t, ok, "a run short of a turn has no total")
	assert.Len(t, foldedFigures(24), len(figs), "as many rows for 24 turns as for 4")
	table := figuresTable("", []string{"a"}, [][]Result{{full}}, 0, 1, figs)
	assert.Contains(t, table, "| turn 1: answer (ms) |")
	assert.Contains(t, table, "| turns 2–4: answer, total (ms) | 90.0 |")
	assert.NotContains(t, table, "turn 3:")
	assert.Contains(t, table, "| CPU, user + system, the whole run (ms) | 7.0 |")
	assert.Contains(t, table, "| turns 2–4: agent messages' size, total (bytes) |", "a size of messages in bytes, not MiB")
}
