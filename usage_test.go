// usage_test.go tests usage_update: after each model call the client is
// told how full the context is (the provider's tokens, the budget in
// force) and, where the provider reports it, what the session has cost;
// a load tells it again.

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// costlySSE is an answer whose usage carries a cost (as OpenRouter's does).
const costlySSE = `data: {"choices":[{"index":0,"delta":{"content":"Again."},"finish_reason":"stop"}]}

data: {"choices":[],"usage":{"prompt_tokens":140,"completion_tokens":2,"cost":0.0012}}

data: [DONE]

`

// Verify that each model call is followed by a usage_update whose used is
// exactly the provider's prompt + completion tokens and whose size is the
// budget in force, with the session's cost once the provider reports one;
// and that loading the session in another process sends the last again.
func TestUsage_reported(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{body: costlySSE})
	ta := startOpenAI(t, f, "--max-context-tokens", "50000")
	ta.keepUsage = true
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assert.Contains(t, ups, `{"sessionUpdate":"usage_update","used":131,"size":50000}`, "128 + 3 tokens, the budget")
	ups, r = ta.turnUpdates(3, sid, "again")
	require.Nil(t, r.Error)
	assert.Contains(t, ups, `{"sessionUpdate":"usage_update","used":142,"size":50000,"cost":{"amount":0.0012,"currency":"USD"}}`)
	ta.close()

	again := startAgentLike(t, ta, "--model", "openai:gpt-test", "--base-url", f.srv.URL+"/v1", "--models", "gpt-test", "--max-context-tokens", "50000")
	again.keepUsage = true
	again.call(initLine)
	again.send(load(1, sid))
	ups, r = again.updatesUntil(1)
	require.Nil(t, r.Error)
	require.NotEmpty(t, ups)
	assert.Equal(t, `{"sessionUpdate":"usage_update","used":142,"size":50000,"cost":{"amount":0.0012,"currency":"USD"}}`, ups[len(ups)-1],
		"the last usage, once, after the replay")
	assert.Equal(t, 1, strings.Count(fmt.Sprint(ups), "usage_update"))
}

// runningSSE repeats the whole usage on every chunk, as Gemini's
// OpenAI-compatible endpoint does, in the forms servers write numbers.
const runningSSE = `data: {"choices":[{"index":0,"delta":{"content":"One "}}],"usage":{"prompt_tokens":2000,"completion_tokens":1}}

data: {"choices":[{"index":0,"delta":{"content":"two "}}],"usage":{"prompt_tokens":2000.0,"completion_tokens":"20"}}

data: {"choices":[{"index":0,"delta":{"content":"three."},"finish_reason":"stop"}],"usage":{"prompt_tokens":2.0e3,"completion_tokens":40,"cost":"0.5"}}

data: [DONE]

`

// hostileSSE reports counts out of range and a cost past float64.
const hostileSSE = `data: {"choices":[{"index":0,"delta":{"content":"Odd."},"finish_reason":"stop"}],"usage":{"prompt_tokens":-4993,"completion_tokens":9.3e18,"cost":1e308}}

data: {"choices":[],"usage":{"prompt_tokens":-4993,"completion_tokens":9.3e18,"cost":1e308}}

data: [DONE]

`

// Verify that running totals count once (the latest), that numbers in any
// JSON form are read, that out-of-range counts and an infinite cost never
// reach the client as such (and later turns still work), and that --record
// keeps one usage per call.
func TestUsage_runningTotalsAndHostileFigures(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{body: runningSSE}, fakeReply{body: hostileSSE}, fakeReply{body: hostileSSE}, fakeReply{file: "text.sse"})
	rec := t.TempDir() + "/rec.jsonl"
	ta := startOpenAI(t, f, "--max-context-tokens", "50000", "--record", rec)
	ta.keepUsage = true
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assert.Contains(t, ups, `{"sessionUpdate":"usage_update","used":2040,"size":50000,"cost":{"amount":0.5,"currency":"USD"}}`, "the latest running total, not their sum")
	for id := 3; id <= 4; id++ {
		ups, r = ta.turnUpdates(id, sid, "odd")
		require.Nil(t, r.Error, "a usage out of range fails nothing")
		last := ups[len(ups)-1]
		assert.NotContains(t, last, `"used":-`)
		assert.NotContains(t, last, "Inf")
	}
	_, r = ta.turnUpdates(5, sid, "still")
	require.Nil(t, r.Error, "the turns after an absurd cost")
	ta.close()
	b, err := os.ReadFile(rec)
	require.NoError(t, err)
	first := strings.SplitN(string(b), "\n", 2)[0]
	assert.Equal(t, 1, strings.Count(first, `"usage"`), "one usage for the call: %s", first)
	assert.Contains(t, first, `{"usage":{"inputTokens":2000,"outputTokens":40,"cost":0.5}}`)
}
