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

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" and \\ backslash", "tab\tnew\nline\r", "\x00\x01\x1f\x7f",
		"<html> & 'amp'", "é 日本語 🙂", "\u2028\u2029", "bad \xff\xfe utf-8", "\b\f", "trailing \\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours := appendJSONString(nil, s)
		require.True(t, json.Valid(ours), "not JSON: %q", ours)
		var got, want string
		require.NoError(t, json.Unmarshal(ours, &got))
		theirs, err := json.Marshal(s)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(theirs, &want))
		assert.Equal(t, want, got, "%q decodes differently from encoding/json's encoding", s)
	})
}

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
