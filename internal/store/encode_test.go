// encode_test.go checks that the hand-written record encoder writes the
// bytes encoding/json writes, for every field, set or not.
package store

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/jsonenc"
)

func TestAppendRecord_asEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	strs := []string{"", "a", "tool_result", "<b> & \"q\"", "line\nbreak\ttab\b\f", "é 日本 🙂", "\u2028", "bad \xff"}
	raws := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`[{"type":"content","content":{"type":"text","text":"x<y>\n"}}]`),
		json.RawMessage(`{"bytes":3,"path":"/a"}`), json.RawMessage(`"s"`), json.RawMessage(`[1,2]`)}
	s := func() string { return strs[r.IntN(len(strs))] }
	raw := func() json.RawMessage { return raws[r.IntN(len(raws))] }
	n := func() int { return []int{0, 0, 1, 42, -3}[r.IntN(5)] }
	for range 2000 {
		rec := Record{Type: s(), V: n(), SessionID: s(), Cwd: s(), CreatedAt: s(), Mode: s(), Model: s(), Tool: s(),
			MessageID: s(), Text: s(), Notice: r.IntN(2) == 0, ToolCallID: s(), Title: s(), Kind: s(), Locations: raw(),
			Status: s(), Content: raw(), RawOutput: raw(), Result: s(), ResultIsContent: r.IntN(2) == 0, StopReason: s(),
			Error: s(), Interrupted: r.IntN(2) == 0, ReplayPos: n(), Plan: raw()}
		if r.IntN(3) == 0 {
			rec.Dirs = []string{s(), s()}[:1+r.IntN(2)]
		}
		if r.IntN(3) == 0 {
			allow := r.IntN(2) == 0
			rec.Allow = &allow
		}
		if r.IntN(3) == 0 {
			rec.Call = &Call{ID: s(), Name: s(), Input: raw()}
		}
		if r.IntN(3) == 0 {
			rec.Usage = &Usage{InputTokens: int64(n()), OutputTokens: int64(n())}
		}
		if r.IntN(10) == 0 {
			rec.Blocks = []json.RawMessage{json.RawMessage(`{ "type": "text", "text": "spaced" }`)}
		}
		want, err := jsonenc.Marshal(rec)
		require.NoError(t, err)
		got, err := appendRecord(nil, &rec)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
	// A user record's blocks, from the client, are compacted as before.
	got, _ := appendRecord(nil, &Record{Type: "user", Blocks: []json.RawMessage{json.RawMessage(`{ "type": "text" }`)}})
	assert.Equal(t, `{"type":"user","blocks":[{"type":"text"}]}`, string(got))
}
