// acpnext_test.go tests what ACP made stable after the August schema: the
// client's system prompt, session notices and context compaction.

package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// systemMessage is the system message of the fake server's request i.
func systemMessage(t *testing.T, f *fakeOpenAI, i int) string {
	t.Helper()
	m := f.request(i).body["messages"].([]any)[0].(map[string]any)
	require.Equal(t, "system", m["role"])
	return m["content"].(string)
}

// Verify the client's system prompt: appended to acpbridge's own on
// session/new, kept with the session so that a load in a new process
// without one applies it again, replaced by a resume that gives another
// (override: acpbridge's instructions left out, the workspace still said);
// and refused, leaving the process free, for a mode acpbridge does not
// offer, a block that is not text, or no blocks.
func TestSystemPrompt(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	ta.call(initLine)
	for _, c := range []struct{ sp, field string }{
		{`{"mode":"_custom","content":[{"type":"text","text":"x"}]}`, "systemPrompt.mode"},
		{`{"mode":"append","content":[{"type":"image","mimeType":"image/png","data":"AA=="}]}`, "systemPrompt.content[0]"},
		{`{"mode":"append","content":[]}`, "systemPrompt.content"},
	} {
		r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[],"systemPrompt":`+c.sp+`}}`))
		require.NotNil(t, r.Error, c.sp)
		assert.Equal(t, -32602, r.Error.Code)
		assert.Contains(t, string(r.Error.Data), c.field)
	}
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[],"systemPrompt":{"mode":"append","content":[{"type":"text","text":"Always answer in French."},{"type":"text","text":"Be terse."}]}}}`))
	require.Nil(t, r.Error, "the process was left free by the refusals")
	sid := "sess_1"
	_, r = ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	sys := systemMessage(t, f, 0)
	assert.Contains(t, sys, "Use the tools to read", "acpbridge's own instructions stay")
	assert.True(t, strings.HasSuffix(sys, "\n\nAlways answer in French.\n\nBe terse."), "appended: %q", sys)
	ta.close()

	// A new process: the load gives none, the session's own applies.
	t.Setenv("OPENAI_API_KEY", testKey)
	tb := newTestAgent(t)
	tb.cwd, tb.state = ta.cwd, ta.state
	a, _, _ := setup([]string{"--model", "openai:gpt-test", "--base-url", f.srv.URL + "/v1", "--models", "gpt-test", "--state-dir", tb.state}, io.Discard, tb.stderr)
	a.newID, a.now = counterIDs(), stepClock()
	tb.agent = a
	tb.attachAgent()
	tb.call(initLine)
	r = decodeResponse(t, tb.call(load(1, sid)))
	require.Nil(t, r.Error)
	_, r = tb.turnUpdates(2, sid, "again")
	require.Nil(t, r.Error)
	assert.True(t, strings.HasSuffix(systemMessage(t, f, 1), "Always answer in French.\n\nBe terse."), "kept with the session")

	// A resume of the live session that gives another: it replaces it.
	r = decodeResponse(t, tb.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[],"systemPrompt":{"mode":"override","content":[{"type":"text","text":"You are a pirate."}]}}}`, sid)))
	require.Nil(t, r.Error)
	_, r = tb.turnUpdates(4, sid, "ahoy")
	require.Nil(t, r.Error)
	sys = systemMessage(t, f, 2)
	assert.NotContains(t, sys, "Use the tools to read", "override leaves acpbridge's instructions out")
	assert.NotContains(t, sys, "French")
	assert.Contains(t, sys, tb.cwd, "the workspace is still said")
	assert.True(t, strings.HasSuffix(sys, "You are a pirate."))
}

// initWith is initialize with these client capabilities for sessions.
func initWith(session string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":` + session + `}}}`
}

// contextTurns runs six turns of about 530 tokens each against a budget of
// 2,000 (the oldest turns are left out from the fourth on) for a client
// that initialized with init, and returns every update of the turns, and
// each turn's updates' kinds.
func contextTurns(t *testing.T, init string) (all []string, kinds [][]string) {
	var replies []fakeReply
	for range 6 {
		replies = append(replies, fakeReply{file: "text.sse"})
	}
	f := newFakeOpenAI(t, replies...)
	ta := startOpenAI(t, f, "--max-context-tokens", "2000")
	ta.call(init)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	for i := range 6 {
		ups, r := ta.turnUpdates(2+i, "sess_1", fmt.Sprintf("prompt %d: %s", i, strings.Repeat("words ", 350)))
		require.Nil(t, r.Error, "turn %d", i)
		all = append(all, ups...)
		var k []string
		for _, u := range ups {
			var v struct{ SessionUpdate string }
			require.NoError(t, json.Unmarshal([]byte(u), &v))
			k = append(k, v.SessionUpdate)
		}
		kinds = append(kinds, k)
	}
	ta.close()
	return all, kinds
}

func count(ups []string, sub string) int {
	n := 0
	for _, u := range ups {
		if strings.Contains(u, sub) {
			n++
		}
	}
	return n
}

// Verify how older turns left out of what the model is sent are reported:
// to a client that opted into compaction, a compaction_update (an id of
// its own, completed, a summary of what was left out) each time more is
// left out, before the turn's answer, and no message in the conversation;
// to one that takes notices only, one notice; to one that opted into
// neither, one message in the conversation and nothing else.
func TestCompaction_reported(t *testing.T) {
	all, kinds := contextTurns(t, initWith(`{"compaction":{},"notices":{}}`))
	assert.Zero(t, count(all, "(acpbridge: this conversation has outgrown"), "no message of acpbridge's own")
	n := count(all, `"sessionUpdate":"compaction_update"`)
	assert.GreaterOrEqual(t, n, 2, "a compaction each time more is left out")
	assert.Equal(t, n, count(all, `"status":"completed"`))
	assert.Contains(t, strings.Join(all, "\n"), "without its 1 oldest turns")
	assert.Contains(t, strings.Join(all, "\n"), `"compactionId":"compaction_`)
	assert.Zero(t, count(all, `"sessionUpdate":"notice"`), "compaction says it; no notice")
	assert.NotContains(t, kinds[0], "compaction_update", "nothing is left out at first")
	for i, k := range kinds {
		if j := slices.Index(k, "compaction_update"); j >= 0 {
			assert.Less(t, j, slices.Index(k, "agent_message_chunk"), "turn %d: reported before the answer", i)
		}
	}

	all, _ = contextTurns(t, initWith(`{"notices":{}}`))
	assert.Equal(t, 1, count(all, `"sessionUpdate":"notice"`), "one notice")
	assert.Contains(t, strings.Join(all, "\n"), `"severity":"warning","title":"Older context is left out of what the model is sent"`)
	assert.Zero(t, count(all, "compaction_update"))
	assert.Zero(t, count(all, "(acpbridge: this conversation has outgrown"))

	all, _ = contextTurns(t, initWith(`{"notices":null,"compaction":true}`))
	assert.Equal(t, 1, count(all, "(acpbridge: this conversation has outgrown"), "told once, in the conversation")
	assert.Zero(t, count(all, "compaction_update"), "never without the opt-in")
	assert.Zero(t, count(all, `"sessionUpdate":"notice"`), "never without the opt-in")
}

// Verify the notices a client that opted in gets, and that one that did
// not gets none: a model call that failed and is tried again, older
// images left out of a request, an MCP server that is unavailable.
func TestNotices(t *testing.T) {
	for _, optIn := range []bool{true, false} {
		f := newFakeOpenAI(t, fakeReply{status: 503}, fakeReply{file: "text.sse"},
			fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
		ta := startOpenAI(t, f)
		ta.agent.cfg.imageBudget = 10_000 // before the first prompt reaches the loop
		init := initLine
		if optIn {
			init = initWith(`{"notices":{}}`)
		}
		ta.call(init)
		r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[{"name":"gone","command":"/no/such/server","args":[],"env":[]}]}}`))
		require.Nil(t, r.Error)
		var all []string
		data := base64.StdEncoding.EncodeToString(make([]byte, 3000))
		for i := 1; i <= 5; i++ {
			ta.send(imagePrompt(100+i, "sess_1", data))
			ups, r := ta.updatesUntil(100 + i)
			require.Nil(t, r.Error, "prompt %d", i)
			all = append(all, ups...)
		}
		joined := strings.Join(all, "\n")
		if !optIn {
			assert.Zero(t, count(all, `"sessionUpdate":"notice"`), "no notice without the opt-in")
			assert.Contains(t, joined, "MCP server `gone` is unavailable", "said in the conversation instead")
			continue
		}
		assert.Contains(t, joined, `"sessionUpdate":"notice","severity":"warning","title":"The model call failed; trying again","description":"`+f.srv.URL+`/v1/chat/completions answered 503 Service Unavailable"`)
		assert.Contains(t, joined, `"sessionUpdate":"notice","severity":"info","title":"Older images are not sent to the model again"`)
		assert.Contains(t, joined, `"sessionUpdate":"notice","severity":"warning","title":"An MCP server is unavailable","description":"MCP server `+"`gone`"+` is unavailable`)
		for _, u := range all {
			if strings.Contains(u, "agent_message_chunk") {
				assert.NotContains(t, u, "MCP server", "not said in the conversation too")
			}
		}
	}
}
