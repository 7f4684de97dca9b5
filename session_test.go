// session_test.go tests the session rules that a golden transcript cannot
// pin down, because the order of concurrent responses is not fixed.

package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
)

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// Verify the answer to initialize: the capabilities a client reads.
func TestInitialize_capabilities(t *testing.T) {
	t.Parallel()
	want := `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,` +
		`"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":true},` +
		`"sessionCapabilities":{"close":{},"list":{},"resume":{},"delete":{},"additionalDirectories":{},"systemPrompt":{"mode":{"override":{}}}},"auth":{"logout":{}}},` +
		`"authMethods":[{"id":"api-key","name":"API key","description":"Use the key acpbridge has: OPENAI_API_KEY in its environment, or the one stored by acpbridge setup"}],"agentInfo":{"name":"acpbridge","title":"acpbridge","version":"` + version + `"}}`
	ta := startAgent(t, "--model", anyModel)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`))
	require.Nil(t, r.Error)
	assert.Equal(t, want, string(r.Result))
}

// Verify that of ten pipelined session/new requests exactly one succeeds and
// the nine others name it.
func TestSession_pipelinedNew(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	ta.call(initLine)
	for i := 1; i <= 10; i++ {
		ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, i))
	}
	var ok []string
	var rejected int
	for range 10 {
		r := decodeResponse(t, ta.await(`{"jsonrpc":"2.0"}`))
		if r.Error == nil {
			var res struct{ SessionID string }
			require.NoError(t, json.Unmarshal(r.Result, &res))
			ok = append(ok, res.SessionID)
			continue
		}
		rejected++
		assert.Equal(t, 1001, r.Error.Code)
		assert.JSONEq(t, `{"activeSessionId":"sess_1"}`, string(r.Error.Data))
		assert.Contains(t, r.Error.Message, "sess_1")
	}
	assert.Equal(t, []string{"sess_1"}, ok, "sessions created")
	assert.Equal(t, 9, rejected)
}

// Verify that session methods before initialize fail with a message that
// says to initialize, and that the process then serves normally.
func TestSession_beforeInitialize(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error)
	assert.Equal(t, 1000, r.Error.Code)
	assert.Contains(t, r.Error.Message, "initialize first")
	ta.call(initLine)
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	assert.Nil(t, r.Error)
}

// Verify that session/new checks cwd: missing, null, relative and
// nonexistent are -32602 naming the field.
func TestSession_newCwd(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", anyModel)
	ta.call(initLine)
	for i, params := range []string{
		`{"mcpServers":[]}`,
		`{"cwd":null,"mcpServers":[]}`,
		`{"cwd":"relative/dir","mcpServers":[]}`,
		`{"cwd":"/no/such/dir/anywhere","mcpServers":[]}`,
		`{"cwd":42,"mcpServers":[]}`,
		`{"cwd":"$CWD","additionalDirectories":["rel"],"mcpServers":[]}`,
	} {
		r := decodeResponse(t, ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":%s}`, i+1, params)))
		require.NotNil(t, r.Error, "params %s", params)
		assert.Equal(t, -32602, r.Error.Code, "params %s", params)
		assert.Regexp(t, `cwd|additionalDirectories`, r.Error.Message, "params %s", params)
	}
}

// Verify that a session loaded with its fixture, an entry appended to it,
// continues after the entries it used, and that loaded with another
// fixture it starts that fixture at its first entry (a test that records a
// conversation, then loads it with a new fixture for the next turn).
func TestSession_replayPositionPerFixture(t *testing.T) {
	t.Parallel()
	first := writeFixture(t, `{"expect":"one","chunks":[{"text":"First."}]}`)
	ta := startAgent(t, "--model", "replay:"+first)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "one")
	require.Nil(t, r.Error)
	ta.close()

	load := func(fixture, text string) []string {
		tb := startAgentLike(t, ta, "--model", "replay:"+fixture)
		tb.call(initLine)
		r := decodeResponse(t, tb.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":%q,"cwd":"$CWD"}}`, sid)))
		require.Nil(t, r.Error, "resume")
		ups, r := tb.turnUpdates(2, sid, text)
		require.Nil(t, r.Error, "the prompt after resuming with %s", fixture)
		tb.close()
		return ups
	}
	f, err := os.OpenFile(first, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"expect":"two","chunks":[{"text":"Appended."}]}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Contains(t, strings.Join(load(first, "two"), "\n"), "Appended.")

	second := writeFixture(t, `{"expect":"three","chunks":[{"text":"Entry one of another fixture."}]}`)
	assert.Contains(t, strings.Join(load(second, "three"), "\n"), "Entry one of another fixture.")
}

// Verify the one panic guard: a step that panics becomes that request's
// -32603 naming where, the panic is logged with its stack, and the process
// serves on; nothing is made of no panic.
func TestPanicGuard(t *testing.T) {
	var logged strings.Builder
	a := &agent{log: slog.New(slog.NewTextHandler(&logged, nil))}
	_, err := a.runStep("7", func() (any, error) { panic("boom") })
	require.Error(t, err)
	assert.Equal(t, -32603, int(acp.AsError(err).Code))
	assert.Contains(t, err.Error(), "internal error in request 7: boom")
	assert.Contains(t, logged.String(), "stack=")
	res, err := a.runStep("8", func() (any, error) { return "fine", nil })
	assert.Equal(t, "fine", res)
	assert.NoError(t, err)
	assert.Nil(t, a.panicked("nothing", nil))
}
