// protocol_test.go checks the hand-written encoders against encoding/json:
// whatever the text, what they write decodes to what encoding/json's
// output decodes to.
package acp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The streamed chunk and the tool updates decode as encoding/json's
// encoding of the same values does.
func TestAppendUpdates_matchEncodingJSON(t *testing.T) {
	text := "a <b> & \"c\"\n\u2028 \xff"
	var got, want any
	require.NoError(t, json.Unmarshal(AppendChunkUpdate(nil, "s1", UpdateMessage, "m1", text), &got))
	require.NoError(t, json.Unmarshal(MustJSON(map[string]any{"sessionId": "s1", "update": map[string]any{
		"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": map[string]any{"type": "text", "text": text}}}), &want))
	assert.Equal(t, want, got)

	u := ToolCallStart("c1", "Read <x>", KindRead, json.RawMessage(`[{"path":"/a"}]`), json.RawMessage(`{"path":"a"}`))
	require.NoError(t, json.Unmarshal(AppendToolCallUpdate(nil, "s1", &u), &got))
	require.NoError(t, json.Unmarshal(MustJSON(SessionNotification{SessionID: "s1", Update: u}), &want))
	assert.Equal(t, want, got)
}

// AppendToolContents writes what encoding/json writes.
func TestAppendToolContents_asEncodingJSON(t *testing.T) {
	old, empty := "a\nb <c>", ""
	for _, cs := range [][]ToolContent{
		nil, {TextOut("hello \"x\" \u2028")},
		{{Type: "diff", Path: "/p", OldText: &old, NewText: &empty}, {Type: "diff", Path: "/q", NewText: &old}},
		{{Type: "terminal", TerminalID: "t1"}, TextOut("")},
	} {
		assert.Equal(t, string(MustJSON(cs)), string(AppendToolContents(nil, cs)))
	}
}

// TextOut and LocationsJSON write what encoding/json writes.
func TestHandEncoders_asEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "x", "a\n\"b\" <c> & \u2028 \xff"} {
		assert.Equal(t, string(MustJSON(textBlock(s))), string(TextOut(s).Content))
	}
	for _, locs := range [][]Location{nil, {}, {{Path: "/a"}}, {{Path: "/a <b>", Line: 3}, {Path: "c"}}} {
		if len(locs) > 0 {
			assert.Equal(t, string(MustJSON(locs)), string(LocationsJSON(locs)))
		}
	}
}

// ScanInitializeParams reads what json.Unmarshal reads, or declines: the
// usual params, every shape of them clients send, and the ones it must
// leave to encoding/json.
func TestScanInitializeParams_asEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"protocolVersion":1}`,
		`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}`,
		`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false},"terminal":false,"_meta":{"terminal_output":true}},"clientInfo":{"name":"zed"}}`,
		`{ "clientCapabilities" : { "fs" : { "writeTextFile" : true } } , "protocolVersion" : "1" }`,
		`{"protocolVersion":{"major":1},"clientCapabilities":{"auth":{"terminal":true},"fs":{}}}`,
		`{}`,
	} {
		p, ok := ScanInitializeParams([]byte(in))
		require.True(t, ok, "%s: declined", in)
		var want InitializeParams
		require.NoError(t, json.Unmarshal([]byte(in), &want))
		assert.Equal(t, want, p, in)
	}
	for _, in := range []string{
		`[]`, `null`, `1`,
		`{"clientCapabilities":null}`,
		`{"clientCapabilities":{"terminal":"yes"}}`,
		`{"clientCapabilities":{"terminal":null}}`,
		`{"clientCapabilities":{"fs":[]}}`,
		`{"clientCapabilities":{"Terminal":true}}`,
		`{"ClientCapabilities":{"terminal":true}}`,
		`{"clientCapabilities":{"fſ":{"readTextFile":true}}}`,
		`{"clientCapabilities":{"fs":{"readTextFile":true}},"clientCapabilities":{"terminal":true}}`,
		`{"clientCapabilities":{"_meta":{"terminal_output":1}}}`,
	} {
		_, ok := ScanInitializeParams([]byte(in))
		assert.False(t, ok, "%s: read, not left to encoding/json", in)
	}
}

// Whatever valid JSON it is given, ScanInitializeParams either declines
// or reads exactly what json.Unmarshal reads.
func FuzzScanInitializeParams(f *testing.F) {
	f.Add(`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true,"_meta":{"terminal_output":true}}}`)
	f.Add(`{"clientCapabilities":{"fs":{"READTEXTFILE":true}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		p, ok := ScanInitializeParams([]byte(in))
		if !ok {
			return
		}
		var want InitializeParams
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: read, but encoding/json fails: %v", in, err)
		}
		assert.Equal(t, want, p, in)
	})
}
