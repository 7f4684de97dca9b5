// session_test.go tests the session rules that a golden transcript cannot
// pin down, because the order of concurrent responses is not fixed.
package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
)

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// The answer to initialize, written out for speed, is what encoding/json
// writes for the capabilities acpbridge has; a client reads them from it.
func TestInitializeResult_isTheStructEncoded(t *testing.T) {
	want, err := json.Marshal(acp.InitializeResult{
		ProtocolVersion: acp.ProtocolVersion,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{EmbeddedContext: true},
			McpCapabilities:    acp.McpCapabilities{HTTP: true, SSE: true},
			SessionCapabilities: acp.SessionCapabilities{
				Close:                 acp.Supported,
				List:                  acp.Supported,
				Resume:                acp.Supported,
				Delete:                acp.Supported,
				AdditionalDirectories: acp.Supported,
			},
		},
		AuthMethods: []struct{}{},
		AgentInfo:   acp.Implementation{Name: "acpbridge", Title: "acpbridge", Version: version},
	})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(initializeResult))

	ta := startAgent(t)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`))
	require.Nil(t, r.Error)
	assert.JSONEq(t, string(want), string(r.Result))
}

// Verify that of ten pipelined session/new requests exactly one succeeds and
// the nine others name it.
func TestSession_pipelinedNew(t *testing.T) {
	ta := startAgent(t)
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
	ta := startAgent(t)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error)
	assert.Equal(t, 1000, r.Error.Code)
	assert.Contains(t, r.Error.Message, "initialize first")
	ta.call(initLine)
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	assert.Nil(t, r.Error)
}

// Verify that with no model configured, session/new works and
// session/prompt says how to configure one.
func TestSession_noModel(t *testing.T) {
	ta := startAgent(t)
	ta.call(initLine)
	ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"hi"}]}}`))
	require.NotNil(t, r.Error)
	assert.Equal(t, 1004, r.Error.Code)
	assert.Contains(t, r.Error.Message, "--model openai:MODEL")
	assert.Contains(t, r.Error.Message, "--model replay:")
}

// Verify that session/new checks cwd: missing, null, relative and
// nonexistent are -32602 naming the field.
func TestSession_newCwd(t *testing.T) {
	ta := startAgent(t)
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
