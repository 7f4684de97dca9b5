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

	u := ToolCallStart("c1", "read_file", "Read <x>", KindRead, json.RawMessage(`[{"path":"/a"}]`), json.RawMessage(`{"path":"a"}`))
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

// The id a $/cancel_request names, compact as request ids are kept.
func TestCancelledRequest(t *testing.T) {
	assert.Equal(t, `7`, string(CancelledRequest(json.RawMessage(`{"requestId": 7}`))))
	assert.Equal(t, `"a b"`, string(CancelledRequest(json.RawMessage(`{"requestId" : "a b" }`))))
	assert.Nil(t, CancelledRequest(json.RawMessage(`{}`)))
	assert.Nil(t, CancelledRequest(json.RawMessage(`[1]`)))
	assert.Nil(t, CancelledRequest(nil))
}
