// usage_test.go tests usage_update: after each model call the client is
// told how full the context is (the provider's tokens, the budget in
// force) and, where the provider reports it, what the session has cost;
// a load tells it again.

package main

import (
	"fmt"
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
