// compare_test.go tests what comparing agents rests on: --agent's command
// lines, answering permissions by kind, what a turn counts, and the
// differences between runs.

package scenario

import (
	"acpbridge/internal/report"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

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

	failed := newRunView("B", Result{Received: b[:2], Env: env, BeforeTurns: 2, Run: report.Run{Err: errors.New("timed out waiting for < line 9\nbindings: ...")}})
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
	byPair := map[string]report.Differences{}
	for _, d := range diffs {
		byPair[d.A+"/"+d.B] = d
	}
	assert.Empty(t, byPair["acpbridge/fanout"].Lines)
	assert.Empty(t, byPair["acpbridge/fanout"].SameAs)
	assert.NotEmpty(t, byPair["acpbridge/codex"].Lines)
	assert.Equal(t, "acpbridge and codex", byPair["fanout/codex"].SameAs)
	assert.Empty(t, byPair["fanout/codex"].Lines)
	assert.Empty(t, byPair["codex/other"].SameAs, "different values are not folded")
	assert.Contains(t, report.ShowDifferences(diffs), "fanout and codex differ as acpbridge and codex do")
}

// Verify what a turn's first output is timed to: the model's text, a
// thought, a tool call or a plan, never an agent's command list or usage
// sent at the prompt (claude-agent-acp and gemini-cli send one there).
func TestModelOutput(t *testing.T) {
	for _, k := range []string{"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"} {
		assert.True(t, modelOutput(k), k)
	}
	for _, k := range []string{"available_commands_update", "usage_update", "session_info_update", "current_mode_update", "config_option_update", "user_message_chunk"} {
		assert.False(t, modelOutput(k), k)
	}
}

// Verify what a reader is told an agent is: the name and version from its
// answer to initialize.
func TestAgentInfo(t *testing.T) {
	assert.Equal(t, "codex-acp 0.16.0", agentInfo([][]byte{
		[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"codex-acp","version":"0.16.0"}}}`)}))
	assert.Equal(t, "", agentInfo([][]byte{[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)}))
}
