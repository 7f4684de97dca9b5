// report_test.go checks what a comparison's reader sees: the table's
// intervals and ratios, the charts, the per-turn counts, the versions
// found, the limits, and the CSV and benchfmt files; and the order the
// agents take turns in.

package report

import (
	"acpbridge/internal/served"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runOf is a run that answered initialize after init and its one turn with
// the given kinds sent.
func runOf(init time.Duration, sent map[string]int) Run {
	return Run{Initialize: init, NewSession: -1,
		Turns: []Turn{{FirstOutput: time.Millisecond, Answer: 2 * time.Millisecond, Sent: sent}}}
}

// Verify the table: a cell is the median and its 95% interval, each
// agent but the baseline has a ratio column (paired by round), memory is
// shown in MiB.
func TestFiguresTable_intervalsAndRatios(t *testing.T) {
	a := []Run{runOf(10*time.Millisecond, nil), runOf(11*time.Millisecond, nil), runOf(12*time.Millisecond, nil)}
	b := []Run{runOf(20*time.Millisecond, nil), runOf(22*time.Millisecond, nil), runOf(24*time.Millisecond, nil)}
	for i := range a {
		a[i].Stats.PeakPSS, b[i].Stats.PeakPSS = 10<<20, 5<<20
	}
	table := figuresTable("", []string{"a", "b"}, [][]Run{a, b}, 0, 1, figuresOf(1))
	assert.Contains(t, table, "| figure | a | b | b ÷ a |")
	assert.Contains(t, table, "| spawn → initialize answered (ms) | 11.0 [10.0–12.0] | 22.0 [20.0–24.0] | 2.00× |", "every round's ratio is 2")
	assert.Contains(t, table, "| peak PSS of the tree (MiB) | 10.0 | 5.0 | 0.50× |")
	assert.Contains(t, table, "ratios to a paired by round")

	// The baseline named second: the ratio column follows the first.
	table = figuresTable("", []string{"a", "b"}, [][]Run{a, b}, 1, 1, figuresOf(1))
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
	a := []Run{
		runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 3, "request session/request_permission": 1}),
		runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 5, "request session/request_permission": 1}),
	}
	b := []Run{runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 1})}
	table := sentTable([]string{"a", "b"}, [][]Run{a, b})
	assert.Contains(t, table, "| turn | message | a | b |")
	assert.Contains(t, table, "| 1 | update agent_message_chunk | 4 | 1 |")
	assert.Contains(t, table, "| 1 | request session/request_permission | 1 | 0 |")
}

// Verify what a reader is told of an agent's ACP library: the package of
// a Node script that names it (not of a wrapper that happens to lie
// beside one).
func TestVersions(t *testing.T) {
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
	var rs []Run
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
	table := figuresTable("", []string{"a"}, [][]Run{rs}, 0, 3, figuresOf(1))
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
	c := &Comparison{Threads: 1, Environment: environment{CPU: "Test CPU", CPUs: 2, OS: "linux", Arch: "amd64"},
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
	full := Run{Initialize: time.Millisecond, NewSession: -1, Stats: Stats{CPU: 7 * time.Millisecond}, Turns: []Turn{turn(1, 10), turn(3*time.Millisecond, 20*time.Millisecond), turn(5*time.Millisecond, 30*time.Millisecond), turn(4*time.Millisecond, 40*time.Millisecond)}}
	cut := full
	cut.Turns = append([]Turn{}, full.Turns...)
	cut.Turns[3].Answer = -1
	figs := foldedFigures(4)
	get := func(key string, r Run) (float64, bool) {
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
	table := figuresTable("", []string{"a"}, [][]Run{{full}}, 0, 1, figs)
	assert.Contains(t, table, "| turn 1: answer (ms) |")
	assert.Contains(t, table, "| turns 2–4: answer, total (ms) | 90.0 |")
	assert.NotContains(t, table, "turn 3:")
	assert.Contains(t, table, "| CPU, user + system, the whole run (ms) | 7.0 |")
	assert.Contains(t, table, "| turns 2–4: agent messages' size, total (bytes) |", "a size of messages in bytes, not MiB")
}

// Verify --csv's rows: a row per run and figure, turns numbered, names in
// snake_case with the unit, sizes in bytes, a figure a run lacks left out.
func TestWriteCSV(t *testing.T) {
	run := func(init time.Duration, pss int64, round, seq int) Run {
		return Run{Initialize: init, NewSession: -1, Stats: Stats{PeakPSS: pss}, Round: round, Seq: seq,
			Turns: []Turn{{FirstOutput: 2 * time.Millisecond, Answer: 5 * time.Millisecond, Bytes: 300, Model: &served.Count{Requests: 3}}}}
	}
	runs := [][]Run{{run(10*time.Millisecond, 1<<20, 1, 1), run(12*time.Millisecond, 2<<20, 2, 4)}, {run(30*time.Millisecond, 0, 1, 2)}}
	cmp := &Comparison{Agents: []agentRecord{{Name: "a"}, {Name: "b"}}}
	cmp.Scenarios = append(cmp.Scenarios, newScenarioRecord("s.txtar", []string{"a", "b"}, runs, nil, 0))
	path := filepath.Join(t.TempDir(), "runs.csv")
	require.NoError(t, cmp.WriteCSV(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(b)
	assert.True(t, strings.HasPrefix(text, "run,round,session,agent,scenario,passed,turn,figure,unit,value\n"))
	for _, row := range []string{ // a's round 1 runs first, b's second; round 2 begins with b (Seq, as the rounds ran)
		"1,1,,a,s.txtar,true,0,spawn_to_initialize_ms,ms,10\n",
		"4,2,,a,s.txtar,true,0,spawn_to_initialize_ms,ms,12\n",
		"2,1,,b,s.txtar,true,0,spawn_to_initialize_ms,ms,30\n",
		"1,1,,a,s.txtar,true,1,first_output_ms,ms,2\n",
		"1,1,,a,s.txtar,true,1,agent_bytes,bytes,300\n",
		"1,1,,a,s.txtar,true,1,model_requests,,3\n",
		"4,2,,a,s.txtar,true,0,peak_pss_bytes,bytes,2097152\n",
	} {
		assert.Contains(t, text, row)
	}
	assert.NotContains(t, text, "session_new_ms", "no run gave it")
	assert.NotContains(t, text, "1,b,s.txtar,0,peak_pss", "b gave none")
}

// Verify what makes a comparison repeatable: the command is one string a
// shell splits back into the argv given; the agent's file (through an
// interpreter, its script) and the scenario are hashed; each run carries
// its index, agent and start.
func TestComparisonRepeatable(t *testing.T) {
	args := []string{"acpbridge", "scenario", "run", "--agent", `fanout='/opt/my bin/acpbridge' --fanout`, "--agent", "it's", "", "a b.txtar"}
	e := New("v", args, Machine{}).Environment
	back, err := shellwords.Parse(e.Command)
	require.NoError(t, err)
	assert.Equal(t, args, back)

	dir := t.TempDir()
	script := filepath.Join(dir, "agent.mjs")
	require.NoError(t, os.WriteFile(script, []byte("x"), 0o644))
	a := newAgentRecord("ts", []string{"sh", script})
	assert.Equal(t, script, a.Path)
	assert.Equal(t, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", a.SHA256, "sha256 of \"x\"")
	assert.Empty(t, newAgentRecord("gone", []string{"/no/such/agent"}).SHA256)

	sc := filepath.Join(dir, "s.txtar")
	require.NoError(t, os.WriteFile(sc, []byte("x"), 0o644))
	started := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	sr := newScenarioRecord(sc, []string{"a"}, [][]Run{{{StartedAt: started, Initialize: -1, NewSession: -1}, {StartedAt: started.Add(time.Second), Initialize: -1, NewSession: -1}}}, nil, 0)
	assert.Equal(t, a.SHA256, sr.SHA256)
	require.Len(t, sr.Results[0].Runs, 2)
	assert.Equal(t, 2, sr.Results[0].Runs[1].Index)
	assert.Equal(t, "a", sr.Results[0].Runs[1].Agent)
	assert.Equal(t, started.Add(time.Second), sr.Results[0].Runs[1].StartedAt)
}

// Verify the CSV under --threads: each session is a row of its run, with
// its round and session, and a failed session says so.
func TestWriteCSV_threads(t *testing.T) {
	s := func(round, session int, err error) Run {
		return Run{Initialize: time.Millisecond, NewSession: -1, Round: round, Seq: round, Session: session, Err: err}
	}
	runs := [][]Run{{s(1, 1, nil), s(1, 2, errors.New("no")), s(2, 1, nil), s(2, 2, nil)}}
	cmp := &Comparison{Agents: []agentRecord{{Name: "a"}}}
	cmp.Scenarios = append(cmp.Scenarios, newScenarioRecord("s.txtar", []string{"a"}, runs, nil, 0))
	assert.Equal(t, 2, cmp.Scenarios[0].Repeat, "two counted runs of two sessions each: report.md says 2 runs, not 4")
	path := filepath.Join(t.TempDir(), "runs.csv")
	require.NoError(t, cmp.WriteCSV(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, row := range []string{
		"1,1,1,a,s.txtar,true,0,spawn_to_initialize_ms,ms,1\n",
		"1,1,2,a,s.txtar,false,0,spawn_to_initialize_ms,ms,1\n",
		"2,2,1,a,s.txtar,true,0,spawn_to_initialize_ms,ms,1\n",
		"2,2,2,a,s.txtar,true,0,spawn_to_initialize_ms,ms,1\n",
	} {
		assert.Contains(t, string(b), row)
	}
}

// Verify the order of the counted runs: a Williams design, so that over a
// cycle (n rounds, 2n for an odd n) each agent runs in each place and
// follows each other agent equally often (a rotation gives each agent the
// same predecessor in n-1 of n rounds).
func TestRoundOrder(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5} {
		cycle := n
		if n%2 == 1 {
			cycle = 2 * n
		}
		places := map[[2]int]int{}
		follows := map[[2]int]int{}
		for k := range cycle {
			order := RoundOrder(k, n)
			require.ElementsMatch(t, slices.Collect(func(yield func(int) bool) {
				for i := range n {
					if !yield(i) {
						return
					}
				}
			}), order, "every agent once a round")
			for p, a := range order {
				places[[2]int{a, p}]++
				if p > 0 {
					follows[[2]int{order[p-1], a}]++
				}
			}
		}
		for a := range n {
			for b := range n {
				assert.Equal(t, cycle/n, places[[2]int{a, b}], "n=%d: agent %d in place %d", n, a, b)
				if a != b {
					assert.Equal(t, (n-1)*cycle/(n*(n-1)), follows[[2]int{a, b}], "n=%d: %d then %d", n, a, b)
				}
			}
		}
	}
}

// Verify --benchfmt: Go's benchmark format, a line per run named by the
// scenario and agent, one iteration, each figure the run gave as a value
// and a unit named by it; what benchstat -col /agent reads.
func TestWriteBenchfmt(t *testing.T) {
	run := func(init time.Duration) Run {
		return Run{Initialize: init, NewSession: -1, Stats: Stats{PeakPSS: 1 << 20},
			Turns: []Turn{{FirstOutput: 2 * time.Millisecond, Answer: 5 * time.Millisecond, Model: &served.Count{Requests: 3}}}}
	}
	cmp := &Comparison{Agents: []agentRecord{{Name: "a"}, {Name: "b c"}}, Environment: environment{CPU: "Test CPU", Acpbridge: "acpbridge 1"}}
	cmp.Scenarios = append(cmp.Scenarios, newScenarioRecord("dir/coding.txtar", []string{"a", "b c"}, [][]Run{{run(10 * time.Millisecond), run(12 * time.Millisecond)}, {run(30 * time.Millisecond)}}, nil, 0))
	path := filepath.Join(t.TempDir(), "runs.bench")
	require.NoError(t, cmp.WriteBenchfmt(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(b)
	assert.Contains(t, text, "cpu: Test CPU\n")
	line := regexp.MustCompile(`(?m)^Benchmark\S+ 1( [0-9.]+ [a-z0-9-]+)+$`)
	lines := line.FindAllString(text, -1)
	require.Len(t, lines, 3, "a line per run:\n%s", text)
	assert.True(t, strings.HasPrefix(lines[0], "BenchmarkScenario/coding/agent=a 1 10 spawn-to-initialize-ms "), lines[0])
	assert.Contains(t, lines[0], " 5 turn1-answer-ms")
	assert.Contains(t, lines[0], " 1048576 peak-pss-bytes")
	assert.True(t, strings.HasPrefix(lines[2], "BenchmarkScenario/coding/agent=b_c 1 30 "), "a name without spaces: %s", lines[2])
	assert.NotContains(t, text, "session-new-ms", "a figure no run gave")
}

// Verify that a run in which no request reached the served model says
// so, and that a turn's side calls and mapped tool calls are recorded.
func TestRunRecord_noteWhenModelUnused(t *testing.T) {
	rec := newRunRecord(Run{Served: true, Turns: []Turn{{Model: &served.Count{}}}})
	assert.Contains(t, rec.Note, "no request reached the served model")
	rec = newRunRecord(Run{Served: true, Turns: []Turn{{Model: &served.Count{Requests: 2, SideCalls: 1, Mapped: map[string]int{"write_file → Write {content, file_path}": 1}}}}})
	assert.Empty(t, rec.Note)
	assert.Equal(t, 1, rec.Turns[0].SideCalls)
	assert.Equal(t, map[string]int{"write_file → Write {content, file_path}": 1}, rec.Turns[0].ToolCalls)
}
