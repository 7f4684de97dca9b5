// compare_test.go tests what comparing agents rests on: --agent's command
// lines, answering permissions by kind, and the differences between runs.

package scenario

import (
	"acpbridge/internal/served"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-shellwords"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAgent_quotedAsAShellWould(t *testing.T) {
	a, err := parseAgent(`other=node "/opt/my agents/agent.js" --flag 'two words' $FLAGS`, "/bin/acpbridge")
	require.NoError(t, err)
	assert.Equal(t, "other", a.name)
	assert.Equal(t, []string{"node", "/opt/my agents/agent.js", "--flag", "two words", "$FLAGS"}, a.command)
	assert.False(t, a.acpbridge)
	assert.Equal(t, []string{"--flag", "two words", "-x", "--y"}, withFlags(a.command[2:], []string{"-x", "--y"}), "$FLAGS stands for the file's flags")
	assert.Equal(t, []string{"a", "-x"}, withFlags([]string{"a"}, []string{"-x"}), "without $FLAGS, after the words")

	a, err = parseAgent(`/usr/local/bin/acpbridge --fanout`, "/bin/acpbridge")
	require.NoError(t, err)
	assert.Equal(t, "acpbridge", a.name)
	assert.True(t, a.acpbridge, "acpbridge takes the file's flags")

	_, err = parseAgent(`node "unterminated`, "")
	assert.Error(t, err)
	_, err = parseAgent(`  `, "")
	assert.ErrorContains(t, err, "names no command")
	assert.Equal(t, []string{"a", "a#2", "b"}, uniqueNames([]agentSpec{{name: "a"}, {name: "a"}, {name: "b"}}))
}

func TestAgentFlags(t *testing.T) {
	sc, err := Parse("s.txtar", []byte("-- flags --\n--model replay:$DIR/m.jsonl\n-- flags/other --\n--verbose\n-- transcript --\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"--model", "replay:$DIR/m.jsonl"}, agentSpec{name: "acpbridge", acpbridge: true}.flags(sc))
	assert.Equal(t, []string{"--verbose"}, agentSpec{name: "other"}.flags(sc), "its own section")
	assert.Nil(t, agentSpec{name: "third", command: []string{"x"}}.flags(sc), "another agent gets none unless asked")
	assert.Equal(t, sc.Flags, agentSpec{name: "third", command: []string{"x", "$FLAGS"}}.flags(sc))
}

func TestByKind(t *testing.T) {
	r := &run{options: map[string][]permissionOption{"7": {{OptionID: "yes", Kind: "allow_once"}, {OptionID: "no", Kind: "reject_once"}}}}
	out, err := r.byKind(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionKind":"reject_once"}}}`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"no"}}}`, out)
	_, err = r.byKind(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionKind":"allow_always"}}}`)
	assert.ErrorContains(t, err, `offers no option of kind "allow_always"; it offers yes (kind allow_once), no (kind reject_once)`)
	_, err = r.byKind(`{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"selected","optionKind":"allow_once"}}}`)
	assert.ErrorContains(t, err, "sent no permission request with id 8")
	same := `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"yes"}}}`
	out, err = r.byKind(same)
	require.NoError(t, err)
	assert.Equal(t, same, out, "a line with an optionId is sent as it is")
}

func TestDifferences_alignedAndChunksJoined(t *testing.T) {
	env := Env{Dir: "/d", Cwd: "/d/cwd", State: "/d/state"}
	a := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"session_info_update","title":"t"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`),
	}
	b := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"other-9"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"other-9","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}}}`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`),
	}
	diffs := differences(newRunView("A", Result{Received: a, Env: env, BeforeTurns: 1}), newRunView("B", Result{Received: b, Env: env, BeforeTurns: 1}), 20, time.Time{})
	assert.Equal(t, []string{
		`A's line 4: only A sent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"session_info_update","title":"t"}}}`,
		`line 5 / 3 (the response 2) at .result.stopReason: "end_turn" / "cancelled"`,
	}, diffs, "session ids as variables, chunks joined, the extra line aligned; line numbers are the agents' own")
}

func update(sid, kind, extra string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"` + kind + `"` + extra + `}}}`)
}

// Verify the comparison's order and alignment: a turn's differences come
// before the handshake's, an extra in_progress update is reported as the
// one line only one agent sent (not paired with the other's completed),
// --diff-limit cuts with a count, and a failed run's block says where it
// stopped instead of listing every line of the other.
func TestDifferences_turnsFirstAlignedAndCut(t *testing.T) {
	env := Env{Dir: "/d", Cwd: "/d/cwd", State: "/d/state"}
	a := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"a"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}`),
		update("s", "tool_call", `,"toolCallId":"c","status":"pending","title":"w"`),
		update("s", "tool_call_update", `,"toolCallId":"c","status":"in_progress"`),
		update("s", "tool_call_update", `,"toolCallId":"c","status":"completed","content":[]`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`),
	}
	b := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"b"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}`),
		update("s", "tool_call", `,"toolCallId":"c","status":"pending","title":"w"`),
		update("s", "tool_call_update", `,"toolCallId":"c","status":"completed","content":[{"type":"content"}]`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`),
	}
	ra := newRunView("A", Result{Received: a, Env: env, BeforeTurns: 2})
	rb := newRunView("B", Result{Received: b, Env: env, BeforeTurns: 2})
	diffs := differences(ra, rb, 0, time.Time{})
	require.Len(t, diffs, 3)
	assert.Contains(t, diffs[0], `A's line 4: only A sent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"tool_call_update","status":"in_progress"`)
	assert.Equal(t, []string{
		`line 5 / 4 (session/update) at .params.update.content: [] / [{"type":"content"}]`,
		`line 1 / 1 (the response 0) at .result.agentInfo.name: "a" / "b"`,
	}, diffs[1:], "the turn first, the extra in_progress alone, completed with completed")

	assert.Equal(t, []string{diffs[0], "(2 more differences not shown: --diff-limit 0 shows them all)"}, differences(ra, rb, 1, time.Time{}))

	failed := newRunView("B", Result{Received: b[:2], Env: env, BeforeTurns: 2, Err: errors.New("timed out waiting for < line 9\nbindings: ...")})
	diffs = differences(ra, failed, 0, time.Time{})
	assert.Equal(t, []string{
		`line 1 / 1 (the response 0) at .result.agentInfo.name: "a" / "b"`,
		`B failed after its line 2 (timed out waiting for < line 9); the other's 4 lines after it are not compared`,
	}, diffs)
}

// Verify that in a comparison acpbridge's in-process replay model becomes
// the served one, its other flags kept, and that a run in which no request
// reached the served model says so.
func TestOverServedModel(t *testing.T) {
	assert.Equal(t, []string{"--model", "openai:scenario-model", "--base-url", "$MODEL_URL", "--state-dir", "$STATE"},
		overServedModel([]string{"--model", "replay:$DIR/model.jsonl", "--state-dir", "$STATE"}))
	assert.Equal(t, []string{"--model", "openai:scenario-model", "--base-url", "$MODEL_URL"}, overServedModel([]string{"--model=replay:m.jsonl"}))
	assert.Equal(t, []string{"--model", "openai:x", "--base-url", "$MODEL_URL"}, overServedModel([]string{"--model", "openai:x", "--base-url", "$MODEL_URL"}))

	rec := newRunRecord(Result{Env: Env{ModelURL: "http://127.0.0.1:1/v1"}, Turns: []Turn{{Model: &served.Count{}}}})
	assert.Contains(t, rec.Note, "no request reached the served model")
	rec = newRunRecord(Result{Env: Env{ModelURL: "http://127.0.0.1:1/v1"}, Turns: []Turn{{Model: &served.Count{Requests: 2, SideCalls: 1, Mapped: map[string]int{"write_file → Write {content, file_path}": 1}}}}})
	assert.Empty(t, rec.Note)
	assert.Equal(t, 1, rec.Turns[0].SideCalls)
	assert.Equal(t, map[string]int{"write_file → Write {content, file_path}": 1}, rec.Turns[0].ToolCalls)
}

// Verify that joining an answer's chunks takes memory linear in them: 5,000
// chunks of 100 bytes joined by repeated concatenation would allocate over
// a GiB.
func TestView_joinsLinearly(t *testing.T) {
	var lines [][]byte
	chunk := strings.Repeat("y", 100)
	for range 5000 {
		lines = append(lines, []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+chunk+`"}}}}`))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, _ := view(lines, Env{Dir: "/d", Cwd: "/d/cwd", State: "/d/state"})
	runtime.ReadMemStats(&after)
	require.Len(t, out, 1, "one joined line")
	_, content := chunkOf(out[0])
	assert.Len(t, content["text"], 500000)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(200<<20), "bytes allocated joining")
}

// Verify --csv's rows: a row per run and figure, turns numbered, names in
// snake_case with the unit, sizes in bytes, a figure a run lacks left out.
func TestWriteCSV(t *testing.T) {
	run := func(init time.Duration, pss int64, round, seq int) Result {
		return Result{Initialize: init, NewSession: -1, Stats: Stats{PeakPSS: pss}, Round: round, Seq: seq,
			Turns: []Turn{{FirstOutput: 2 * time.Millisecond, Answer: 5 * time.Millisecond, Bytes: 300, Model: &served.Count{Requests: 3}}}}
	}
	runs := [][]Result{{run(10*time.Millisecond, 1<<20, 1, 1), run(12*time.Millisecond, 2<<20, 2, 4)}, {run(30*time.Millisecond, 0, 1, 2)}}
	cmp := &comparison{Agents: []agentRecord{{Name: "a"}, {Name: "b"}}}
	cmp.Scenarios = append(cmp.Scenarios, newScenarioRecord("s.txtar", []string{"a", "b"}, runs, nil, 0))
	path := filepath.Join(t.TempDir(), "runs.csv")
	require.NoError(t, cmp.writeCSV(path))
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
	e := newEnvironment("v", args)
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
	sr := newScenarioRecord(sc, []string{"a"}, [][]Result{{{StartedAt: started, Initialize: -1, NewSession: -1}, {StartedAt: started.Add(time.Second), Initialize: -1, NewSession: -1}}}, nil, 0)
	assert.Equal(t, a.SHA256, sr.SHA256)
	require.Len(t, sr.Results[0].Runs, 2)
	assert.Equal(t, 2, sr.Results[0].Runs[1].Index)
	assert.Equal(t, "a", sr.Results[0].Runs[1].Agent)
	assert.Equal(t, started.Add(time.Second), sr.Results[0].Runs[1].StartedAt)
}

// Verify that a comparison is bounded by --timeout: past its deadline a
// pair is not aligned, and says so, rather than running on.
func TestDifferences_deadline(t *testing.T) {
	env := Env{Dir: "/d", Cwd: "/d/cwd", State: "/d/state"}
	lines := [][]byte{[]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)}
	a, b := newRunView("A", Result{Received: lines, Env: env}), newRunView("B", Result{Received: lines[:1], Env: env})
	got := differences(a, b, 0, time.Now().Add(-time.Second))
	assert.Equal(t, []string{"not compared: aligning A's 2 lines with B's 1 took longer than --timeout"}, got)
	assert.NotEqual(t, got, differences(a, b, 0, time.Time{}), "without a deadline it compares")
}

// Verify the CSV under --threads: each session is a row of its run, with
// its round and session, and a failed session says so.
func TestWriteCSV_threads(t *testing.T) {
	s := func(round, session int, err error) Result {
		return Result{Initialize: time.Millisecond, NewSession: -1, Round: round, Seq: round, Session: session, Err: err}
	}
	runs := [][]Result{{s(1, 1, nil), s(1, 2, errors.New("no")), s(2, 1, nil), s(2, 2, nil)}}
	cmp := &comparison{Agents: []agentRecord{{Name: "a"}}}
	cmp.Scenarios = append(cmp.Scenarios, newScenarioRecord("s.txtar", []string{"a"}, runs, nil, 0))
	path := filepath.Join(t.TempDir(), "runs.csv")
	require.NoError(t, cmp.writeCSV(path))
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
			order := roundOrder(k, n)
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
	run := func(init time.Duration) Result {
		return Result{Initialize: init, NewSession: -1, Stats: Stats{PeakPSS: 1 << 20},
			Turns: []Turn{{FirstOutput: 2 * time.Millisecond, Answer: 5 * time.Millisecond, Model: &served.Count{Requests: 3}}}}
	}
	cmp := &comparison{Agents: []agentRecord{{Name: "a"}, {Name: "b c"}}, Environment: environment{CPU: "Test CPU", Acpbridge: "acpbridge 1"}}
	cmp.Scenarios = append(cmp.Scenarios, newScenarioRecord("dir/coding.txtar", []string{"a", "b c"}, [][]Result{{run(10 * time.Millisecond), run(12 * time.Millisecond)}, {run(30 * time.Millisecond)}}, nil, 0))
	path := filepath.Join(t.TempDir(), "runs.bench")
	require.NoError(t, cmp.writeBenchfmt(path))
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
