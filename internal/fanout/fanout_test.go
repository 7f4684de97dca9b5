// fanout_test.go checks the router's own pieces; the router with real
// children is tested on the built binary (the root's fanout_test.go).

package fanout

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify that a child gets the router's flags less every spelling of
// --fanout.
func TestWithoutFanout(t *testing.T) {
	got := withoutFanout([]string{"--fanout", "--model", "replay:f", "-fanout", "--fanout=true", "-fanout=true", "--state-dir", "d"})
	assert.Equal(t, []string{"--model", "replay:f", "--state-dir", "d"}, got)
}

// Verify that an agent's error says its reason where the agent put it: in
// the message, or in data (gemini puts "Internal error" in the message and
// the session it did not find in data.details).
func TestErrorMessage(t *testing.T) {
	for raw, want := range map[string]string{
		`{"code":-32603,"message":"Internal error","data":{"details":"Invalid session identifier \"s\""}}`: `Internal error: Invalid session identifier "s"`,
		`{"code":-32603,"message":"Internal error","data":{"message":"high demand"}}`:                      "Internal error: high demand",
		`{"code":-32603,"message":"Internal error","data":"a string"}`:                                     "Internal error: a string",
		`{"code":-32002,"message":"no session s"}`:                                                         "no session s",
		`{"code":-32002,"message":"same","data":{"details":"same"}}`:                                       "same",
		`not json`: "not json",
	} {
		assert.Equal(t, want, errorMessage(json.RawMessage(raw)), raw)
	}
}

// Verify the version order the known agents' table is read by.
func TestVersionAfter(t *testing.T) {
	assert.True(t, versionAfter("0.62.0", "0.61.0"))
	assert.True(t, versionAfter("0.61.1", "0.61.0"))
	assert.True(t, versionAfter("1.0", "0.61.0"))
	assert.False(t, versionAfter("0.61.0", "0.61.0"))
	assert.False(t, versionAfter("0.9.9", "0.61.0"))
	assert.False(t, versionAfter("0.61.0-nightly", "0.61.0"))
	assert.False(t, versionAfter("", "0.61.0"))
}

// Verify that a child's line is read by exact keys, as a client reads it:
// a session named again in another letter case, or params repeated as
// "PARAMS", does not change which session the router sees the line name
// (encoding/json's struct decoding would take the last, case folded, while
// a client reads the exact key).
func TestDecodeChildLine_exactKeys(t *testing.T) {
	for _, c := range []struct{ line, session string }{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"A","SESSIONID":"B"}}`, "A"},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"SessionId":"B","sessionId":"A"}}`, "A"},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"A"},"PARAMS":{"sessionId":"B"}}`, "A"},
		{`{"jsonrpc":"2.0","method":"session/update","PARAMS":{"sessionId":"B"}}`, ""},
		{`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"A","sessionID":"B"}}`, "A"},
	} {
		m := decodeChildLine([]byte(c.line))
		if !m.ok || m.session != c.session {
			t.Errorf("%s: read as naming %q (ok %v), a client reads %q", c.line, m.session, m.ok, c.session)
		}
	}
	if m := decodeChildLine([]byte(`{"jsonrpc":"2.0","method":5}`)); m.ok {
		t.Error("a method that is not a string is no message")
	}
}
