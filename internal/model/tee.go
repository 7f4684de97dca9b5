// tee.go holds the recording tee (--record): a Sink in front of the turn's
// own that keeps a fixture entry of everything that passes through it, so
// that the turn's stream knows nothing of recording.

package model

import (
	"bytes"
	"encoding/json"
	"strings"

	"acpbridge/internal/acp"
)

// Tee passes a model call's output to Out and keeps it in Entry, as
// --record writes it: the text and thoughts in their pieces, the tool calls
// with their input as the turn runs it (ToolInput), and the call's usage
// once, at its end (Finish).
type Tee struct {
	Out      Sink
	Entry    *Entry
	usage    Usage
	reported bool
}

func (t *Tee) TextChunk(s string) error {
	s2 := strings.Clone(s) // lent by the model: kept past the call
	t.Entry.Chunks = append(t.Entry.Chunks, Chunk{Text: &s2})
	return t.Out.TextChunk(s)
}

func (t *Tee) ThoughtChunk(s string) error {
	s2 := strings.Clone(s)
	t.Entry.Chunks = append(t.Entry.Chunks, Chunk{Thought: &s2})
	return t.Out.ThoughtChunk(s)
}

func (t *Tee) ToolCall(tc ToolCall) {
	kept := tc
	kept.Input = ToolInput(tc.Input)
	t.Entry.Chunks = append(t.Entry.Chunks, Chunk{ToolCall: &kept})
	t.Out.ToolCall(tc)
}

func (t *Tee) AddUsage(u Usage) {
	t.usage, t.reported = t.usage.Then(u, t.reported), true
	t.Out.AddUsage(u)
}

func (t *Tee) Pause() error                          { return t.Out.Pause() }
func (t *Tee) Retrying(why string)                   { t.Out.Retrying(why) }
func (t *Tee) KeepState(state json.RawMessage) error { return t.Out.KeepState(state) }

// Finish is the entry, with the call's usage when it reported one.
func (t *Tee) Finish() *Entry {
	if t.reported {
		t.Entry.Chunks = append(t.Entry.Chunks, Chunk{Usage: &t.usage})
	}
	return t.Entry
}

// ToolInput is a tool call's input as it is run and kept: compact JSON,
// "{}" for none, and input that is not JSON kept as a JSON string (the
// call then fails as invalid input, and the model is told).
func ToolInput(in json.RawMessage) json.RawMessage {
	switch {
	case len(in) == 0:
		return json.RawMessage("{}")
	case !json.Valid(in):
		return acp.MustJSON(string(in))
	}
	var b bytes.Buffer
	json.Compact(&b, in)
	return b.Bytes()
}
