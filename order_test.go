// order_test.go tests that requests act in the order they arrive: each row
// of CONTRACT.md's "Order" section, its messages written in ONE write, run
// many times under GOMAXPROCS=1 and 4, in-process and on the built binary.
// The golden scenarios fixtures/order_*.txtar pin every line the agent
// writes, in order and member for member (compared as JSON values), for the
// rows whose output order is fixed; these tests check what a user would
// check for every row, including the ones whose responses may interleave.

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var orderRuns = flag.Int("order.runs", 10, "how often TestOrder runs each pipelined case in-process (a third of it on the binary)")

// starter starts an agent in-process or as the built binary.
type starter func(t testing.TB, args ...string) *testAgent

func inProcess(t testing.TB, args ...string) *testAgent { return startAgent(t, args...) }

func asProcess(t testing.TB, args ...string) *testAgent {
	return startProcess(t, nil, args...).testAgent
}

func kinds(updates []map[string]any) []string {
	var ks []string
	for _, u := range updates {
		ks = append(ks, fmt.Sprint(u["sessionUpdate"]))
	}
	return ks
}

// orderCases are the rows of the contract's Order section.
var orderCases = []struct {
	name    string
	fixture []string // replay entries
	run     func(t testing.TB, ta *testAgent)
}{{
	name:    "prompt then cancel",
	fixture: []string{`{"chunks":[{"toolCall":{"id":"c1","name":"write_file","input":{"path":"ran.txt","content":"ran"}}}]}`},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
		ta.sendTogether(prompt(3, sid, "write it"), fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
		ups, rs, _ := ta.collect(3)
		assert.Equal(t, "cancelled", stopReason(t, rs[3]))
		assert.NotContains(t, kinds(ups), "tool_call", "a tool call of the cancelled turn was announced")
		assert.NoFileExists(t, filepath.Join(ta.cwd, "ran.txt"), "a tool of the cancelled turn ran")
	},
}, {
	name: "set_mode then prompt",
	fixture: []string{
		`{"chunks":[{"toolCall":{"id":"c1","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`,
		`{"chunks":[{"text":"Refused."}]}`,
	},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"read_only"}}`, sid), prompt(3, sid, "write a"))
		ups, rs, order := ta.collect(2, 3)
		assert.Equal(t, []int{2, 3}, order)
		assert.Equal(t, "end_turn", stopReason(t, rs[3]))
		ks := kinds(ups)
		assert.Equal(t, []string{"current_mode_update", "config_option_update", "tool_call", "tool_call_update"}, ks[:min(4, len(ks))])
		assert.NoFileExists(t, filepath.Join(ta.cwd, "a.txt"), "the write ran in the old mode")
	},
}, {
	name: "set_config_option mode then prompt",
	fixture: []string{
		`{"chunks":[{"toolCall":{"id":"c1","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`,
		`{"chunks":[{"text":"Written."}]}`,
	},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_config_option","params":{"sessionId":%q,"configId":"mode","value":"bypass"}}`, sid), prompt(3, sid, "write a"))
		ups, rs, _ := ta.collect(2, 3)
		assert.Equal(t, "end_turn", stopReason(t, rs[3]))
		assert.NotContains(t, kinds(ups), "request_permission")
		assert.FileExists(t, filepath.Join(ta.cwd, "a.txt"), "the write did not run in bypass mode")
	},
}, {
	name:    "prompt then close",
	fixture: []string{`{"chunks":[{"text":"never"}]}`},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.sendTogether(prompt(2, sid, "keep me"), fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":%q}}`, sid))
		_, rs, order := ta.collect(2, 3)
		assert.Equal(t, "cancelled", stopReason(t, rs[2]))
		assert.Nil(t, rs[3].Error)
		assert.JSONEq(t, `{}`, string(rs[3].Result))
		assert.Equal(t, []int{2, 3}, order, "the prompt answers before the close")
		ta.send(load(4, sid))
		ups, rs, _ := ta.collect(4)
		require.Nil(t, rs[4].Error)
		require.NotEmpty(t, ups)
		assert.Equal(t, "user_message_chunk", ups[0]["sessionUpdate"], "the prompt was not persisted")
	},
}, {
	name:    "two prompts",
	fixture: []string{`{"chunks":[{"text":"first"}]}`, `{"chunks":[{"text":"second"}]}`},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.sendTogether(prompt(2, sid, "one"), prompt(3, sid, "two"))
		ups, rs, _ := ta.collect(2, 3)
		assert.Equal(t, "end_turn", stopReason(t, rs[2]))
		require.NotNil(t, rs[3].Error, "the second prompt ran")
		assert.Equal(t, 1003, rs[3].Error.Code)
		require.NotEmpty(t, ups)
		assert.Equal(t, "first", ups[0]["content"].(map[string]any)["text"])
	},
}, {
	name: "cancel then a new prompt",
	fixture: []string{
		`{"chunks":[{"text":"Slow"},{"delayMs":600000}]}`,
		`{"expect":"instead","chunks":[{"text":"Second."}]}`,
	},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.send(prompt(2, sid, "slow"))
		ta.await(`{"params":{"update":{"content":{"text":"Slow"}}}}`)
		ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid), prompt(3, sid, "instead"))
		ups, rs, order := ta.collect(2, 3)
		assert.Equal(t, "cancelled", stopReason(t, rs[2]))
		assert.Equal(t, "end_turn", stopReason(t, rs[3]), "the prompt after the cancel runs")
		assert.Equal(t, []int{2, 3}, order)
		assert.Contains(t, fmt.Sprint(ups), "Second.")
	},
}, {
	name:    "close then new, close then load",
	fixture: []string{`{"chunks":[{"text":"One."}]}`, `{"chunks":[{"text":"Two."}]}`},
	run: func(t testing.TB, ta *testAgent) {
		sid := ta.newSession()
		ta.send(prompt(2, sid, "first"))
		ta.collect(2)
		ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":%q}}`, sid),
			`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
		_, rs, order := ta.collect(3, 4)
		require.Nil(t, rs[3].Error)
		require.Nil(t, rs[4].Error, "session/new behind the close")
		assert.Equal(t, []int{3, 4}, order)
		var res struct{ SessionID string }
		require.NoError(t, json.Unmarshal(rs[4].Result, &res))
		// Close the new one and, in the same write, load the first: the
		// load waits for the close's lock, then replays, then a prompt
		// behind it runs on it.
		ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":%q}}`, res.SessionID),
			load(6, sid), prompt(7, sid, "again"))
		ups, rs, order := ta.collect(5, 6, 7)
		require.Nil(t, rs[5].Error)
		require.Nil(t, rs[6].Error, "session/load behind the close")
		assert.Equal(t, "end_turn", stopReason(t, rs[7]))
		assert.Equal(t, []int{5, 6, 7}, order)
		assert.Equal(t, "user_message_chunk", ups[0]["sessionUpdate"], "the load replays the first session")
	},
}, {
	name: "initialize then session/new",
	run: func(t testing.TB, ta *testAgent) {
		ta.sendTogether(initLine, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
		_, rs, _ := ta.collect(0, 1)
		assert.Nil(t, rs[1].Error, "session/new behind initialize")
	},
}}

// Verify every row of the Order table, many times, with one and four Ps,
// in-process and on the built binary.
func TestOrder(t *testing.T) {
	for _, procs := range []int{1, 4} {
		for _, c := range orderCases {
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				fixture := writeFixture(t, c.fixture...)
				old := runtime.GOMAXPROCS(procs)
				defer runtime.GOMAXPROCS(old)
				for i := range *orderRuns {
					ta := inProcess(t, "--model", "replay:"+fixture)
					c.run(t, ta)
					ta.close()
					if t.Failed() {
						t.Fatalf("failed in-process on run %d", i+1)
					}
				}
				t.Setenv("GOMAXPROCS", fmt.Sprint(procs))
				for i := range max(1, *orderRuns/3) {
					ta := asProcess(t, "--model", "replay:"+fixture)
					c.run(t, ta)
					ta.close()
					if t.Failed() {
						t.Fatalf("failed on the binary on run %d", i+1)
					}
				}
			})
		}
	}
}

// Verify the order goldens, line by line, many times, with one and four Ps.
func TestOrder_goldens(t *testing.T) {
	paths, err := filepath.Glob("fixtures/order_*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, procs := range []int{1, 4} {
		for _, path := range paths {
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", filepath.Base(path), procs), func(t *testing.T) {
				old := runtime.GOMAXPROCS(procs)
				defer runtime.GOMAXPROCS(old)
				for i := range *orderRuns {
					runGolden(t, path)
					if t.Failed() {
						t.Fatalf("failed on run %d", i+1)
					}
				}
			})
		}
	}
}

// Verify that a model chosen right before a prompt (one write) is the one
// that prompt calls, that the choice belongs to the session (a new session
// after close starts on --model's), and that load restores it.
func TestOrder_modelPerSession(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_config_option","params":{"sessionId":%q,"configId":"model","value":"gpt-other"}}`, sid), prompt(3, sid, "hi"))
	_, rs, _ := ta.collect(2, 3)
	require.Nil(t, rs[2].Error)
	assert.Equal(t, "end_turn", stopReason(t, rs[3]))
	assert.Equal(t, "gpt-other", f.request(0).body["model"])

	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":%q}}`, sid))
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `"category":"model","type":"select","currentValue":"gpt-test"`, "the new session inherited the old one's model")
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(r.Result, &res))
	ta.send(prompt(6, res.SessionID, "hi"))
	ta.collect(6)
	assert.Equal(t, "gpt-test", f.request(1).body["model"])

	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"session/close","params":{"sessionId":%q}}`, res.SessionID))
	ta.send(load(8, sid))
	_, rs, _ = ta.collect(8)
	require.Nil(t, rs[8].Error)
	assert.Contains(t, string(rs[8].Result), `"currentValue":"gpt-other"`, "load did not restore the session's model")
	ta.send(prompt(9, sid, "again"))
	ta.collect(9)
	assert.Equal(t, "gpt-other", f.request(2).body["model"])
}

// Verify that a prompt pipelined behind the session/load of its session
// waits for the load and runs on the loaded session.
func TestOrder_promptBehindLoad(t *testing.T) {
	fixture := writeFixture(t, `{"chunks":[{"text":"one"}]}`, `{"expect":"two","chunks":[{"text":"two"}]}`)
	ta := startAgent(t, "--model", "replay:"+fixture)
	sid := ta.newSession()
	ta.send(prompt(2, sid, "one"))
	ta.collect(2)
	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":%q}}`, sid))
	ta.sendTogether(load(4, sid), prompt(5, sid, "two"))
	ups, rs, order := ta.collect(4, 5)
	require.Nil(t, rs[4].Error)
	assert.Equal(t, []int{4, 5}, order)
	assert.Equal(t, "end_turn", stopReason(t, rs[5]))
	var texts []string
	for _, u := range ups {
		if c, ok := u["content"].(map[string]any); ok {
			texts = append(texts, fmt.Sprint(c["text"]))
		}
	}
	assert.Equal(t, "one one two", strings.Join(texts, " "))
}

// Verify that no number of steps queued in one write wedges the agent:
// thousands of session/new and session/close pairs, then a storm of every
// kind of step, each answered once and in arrival order, the process
// serving after them. (Steps once each held a jrpc2 handler slot while
// they waited for their turn, and the running step's handler found none.)
func TestOrder_thousandsInOneWrite(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"x"}]}`))
	ta.call(initLine)
	const pairs = 800
	var lines []string
	for i := 1; i <= pairs; i++ {
		lines = append(lines,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, 2*i),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":"sess_%d"}}`, 2*i+1, i))
	}
	ta.sendTogether(lines...)
	for i := 1; i <= pairs; i++ {
		for _, id := range []int{2 * i, 2*i + 1} {
			r := decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
			require.Equal(t, strconv.Itoa(id), string(r.ID), "answers in arrival order")
			require.Nil(t, r.Error, "request %d", id)
		}
	}
	// A storm of every step kind, each round against a session of its own;
	// each load is ended by the close written behind it.
	lines = nil
	const rounds = 300
	want := 0
	for i := 1; i <= rounds; i++ {
		sid := fmt.Sprintf("sess_%d", pairs+i)
		base := 10000 + 10*i
		lines = append(lines,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, base),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"read_only"}}`, base+1, sid),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, base+2, sid),
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}`, base+3),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":%q}}`, base+4, sid),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, base+5, sid),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":%q}}`, base+6, sid))
		want += 7
	}
	ta.sendTogether(lines...)
	seen := map[string]bool{}
	for len(seen) < want {
		r := decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
		if r.ID == nil {
			continue // a session/update of a load's replay
		}
		require.False(t, seen[string(r.ID)], "request %s answered twice", r.ID)
		seen[string(r.ID)] = true
		switch n, _ := strconv.Atoi(string(r.ID)); n % 10 {
		case 2:
			require.Nil(t, r.Error, "prompt %d", n)
			assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(r.Result), "prompt %d", n)
		case 5: // the close behind it ends the load
			require.NotNil(t, r.Error, "load %d", n)
			assert.Equal(t, -32800, r.Error.Code, "load %d", n)
		default:
			require.Nil(t, r.Error, "request %d", n)
		}
	}
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	assert.Nil(t, r.Error, "session/new after the storm")
}
