// tee_test.go tests the recording tee.

package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sinkLog is a Sink that notes what reaches it.
type sinkLog struct{ got []string }

func (s *sinkLog) TextChunk(t string) error        { s.got = append(s.got, "text "+t); return nil }
func (s *sinkLog) ThoughtChunk(t string) error     { s.got = append(s.got, "thought "+t); return nil }
func (s *sinkLog) ToolCall(tc ToolCall)            { s.got = append(s.got, "call "+string(tc.Input)) }
func (s *sinkLog) AddUsage(u Usage)                { s.got = append(s.got, "usage") }
func (s *sinkLog) Retrying(string)                 {}
func (s *sinkLog) Pause() error                    { s.got = append(s.got, "pause"); return nil }
func (s *sinkLog) KeepState(json.RawMessage) error { return nil }

// Verify that the tee passes everything on as it came and keeps the entry
// --record writes: the pieces, the tool input as run (compact; not JSON
// kept as a string), and one usage, the call's, at the end.
func TestTee(t *testing.T) {
	out := &sinkLog{}
	tee := &Tee{Out: out, Entry: &Entry{Expect: "hi", Chunks: []Chunk{}}}
	tee.ThoughtChunk("Hm.")
	tee.TextChunk("One ")
	tee.AddUsage(Usage{InputTokens: 10, OutputTokens: 1})
	tee.ToolCall(ToolCall{ID: "c", Name: "read_file", Input: json.RawMessage(`{ "path" : "a" }`)})
	tee.ToolCall(ToolCall{ID: "d", Name: "read_file", Input: json.RawMessage(`not json`)})
	tee.Pause()
	tee.AddUsage(Usage{InputTokens: 10, OutputTokens: 5})
	assert.Equal(t, []string{"thought Hm.", "text One ", "usage", `call { "path" : "a" }`, "call not json", "pause", "usage"}, out.got)
	b, err := json.Marshal(tee.Finish())
	require.NoError(t, err)
	assert.Equal(t, `{"expect":"hi","chunks":[{"thought":"Hm."},{"text":"One "},{"toolCall":{"id":"c","name":"read_file","input":{"path":"a"}}},{"toolCall":{"id":"d","name":"read_file","input":"not json"}},{"usage":{"inputTokens":10,"outputTokens":5}}]}`, string(b))
}
