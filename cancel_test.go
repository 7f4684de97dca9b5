// cancel_test.go tests $/cancel_request: a running prompt ends cancelled,
// a queued request is answered -32800 and never runs, and an unknown id
// changes nothing (fanout_test.go: the router forwards it).

package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowFixture is a model whose first answer pauses for a minute after its
// first chunk, and whose second answers at once.
func slowFixture(t *testing.T) string {
	return writeFixture(t,
		`{"chunks":[{"text":"Slow"},{"delayMs":60000},{"text":" never"}]}`,
		`{"chunks":[{"text":"Second."}]}`)
}

func cancelRequest(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, id)
}

// Verify that $/cancel_request of a running prompt ends it cancelled, and
// that the turn makes no further model call: the next prompt gets the
// fixture's next answer.
func TestCancelRequest_runningPrompt(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:"+slowFixture(t))
	sid := ta.newSession()
	ta.send(prompt(2, sid, "slow"))
	ta.await(`{"method":"session/update","params":{"update":{"content":{"text":"Slow"}}}}`)
	ta.send(cancelRequest(2))
	_, r := ta.updatesUntil(2)
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(r.Result))
	ups, r := ta.turnUpdates(3, sid, "again")
	require.Nil(t, r.Error)
	assert.Contains(t, fmt.Sprint(ups), "Second.", "the cancelled turn made no other model call")
}

// Verify that a queued request withdrawn by $/cancel_request is answered
// -32800 and never runs: a session/new leaves the process free, a prompt
// takes no model answer; and that an unknown id changes nothing.
func TestCancelRequest_queued(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"First."}]}`))
	ta.call(initLine)
	ta.sendTogether(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, cancelRequest(1))
	r := decodeResponse(t, ta.await(`{"id":1}`))
	require.NotNil(t, r.Error, "the withdrawn session/new")
	assert.Equal(t, -32800, r.Error.Code)
	assert.Contains(t, r.Error.Message, "$/cancel_request")

	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error, "the process is free for the next session")
	sid := "sess_2"
	ta.sendTogether(prompt(3, sid, "withdrawn"), cancelRequest(3), cancelRequest(99))
	r = decodeResponse(t, ta.await(`{"id":3}`))
	require.NotNil(t, r.Error, "the withdrawn prompt")
	assert.Equal(t, -32800, r.Error.Code)
	ups, r := ta.turnUpdates(4, sid, "run")
	require.Nil(t, r.Error, "a prompt after it is admitted")
	assert.Contains(t, fmt.Sprint(ups), "First.", "the withdrawn prompt took no model answer")
	ta.close()
	for _, l := range ta.got {
		assert.NotContains(t, string(l), `"id":99`, "an unknown id is not answered")
	}
}

// Verify that a session/resume of the live session (a reattach) queued
// behind a running turn is withdrawn by a $/cancel_request in the same
// write: -32800, not a result after the turn.
func TestCancelRequest_queuedReattach(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:"+slowFixture(t))
	sid := ta.newSession()
	ta.send(prompt(2, sid, "slow"))
	ta.await(`{"method":"session/update","params":{"update":{"content":{"text":"Slow"}}}}`)
	ta.sendTogether(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, sid), cancelRequest(3))
	ta.send(cancelRequest(2))
	_, r := ta.updatesUntil(2)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(r.Result))
	r = decodeResponse(t, ta.await(`{"id":3}`))
	require.NotNil(t, r.Error, "the withdrawn reattach")
	assert.Equal(t, -32800, r.Error.Code)
}
