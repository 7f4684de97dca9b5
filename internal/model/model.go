// Package model holds what a model is given and gives: the Model interface,
// the request, the conversation, the Sink its output streams into, and the
// recorder that writes a model's responses as a replay fixture (--record).
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
)

// Model is a source of model responses: the replay fixture or an
// OpenAI-compatible endpoint.
type Model interface {
	// Complete makes one model call on req and streams its output into out.
	// It returns the stop reason: end_turn, tool_use, max_tokens or refusal.
	Complete(ctx context.Context, req *Request, out Sink) (acp.StopReason, error)
	// NeedsHistory says whether the model reads the conversation. The replay
	// model does not, so a turn need not keep what streamed in memory.
	NeedsHistory() bool
	// Models lists the model names a session may choose; it may ask the
	// server once.
	Models() []string
	// DefaultName is the model a new session starts on.
	DefaultName() string
	// Resume readies the model for a session: state is what the session's
	// calls last kept (Sink.KeepState), or nil for a new session.
	Resume(state json.RawMessage) error
}

// Request is what one model call is given.
type Request struct {
	Model string // the session's chosen model
	Conv  *Conversation
	Msgs  []Message // what to send of conv, within the context budget
	Tools []Tool
	Cwd   string
	Roots []string
	Mode  acp.Mode
	// Instructions is the client's system prompt for the session, or nil:
	// appended to acpbridge's own, or in their place (Override).
	Instructions *Instructions
	// Matched says the caller matched the call to the replay's entry
	// itself (the served model matches a tool result by the call it
	// answers): the entry's expect is not checked again.
	Matched bool
}

// Instructions is a client's system prompt.
type Instructions struct {
	Text     string
	Override bool // it replaces acpbridge's own instructions (the workspace is still said)
}

// Message is one entry of the conversation the model is sent.
type Message struct {
	Role       string // "user", "assistant" or "tool"
	Text       string
	Images     []Image    // user: images of the prompt, after the text
	ToolCalls  []ToolCall // assistant
	ToolCallID string     // tool: the model's id of the call answered
}

// Image is an image of a prompt: base64 data of a MIME type, or a URI.
type Image struct {
	MimeType string
	Data     string // base64, as the client sent it (never decoded)
	URI      string // when there is no data
}

// URL is the image as an OpenAI image_url: a data: URL for inline data.
func (im Image) URL() string {
	if im.Data == "" {
		return im.URI
	}
	return "data:" + im.MimeType + ";base64," + im.Data
}

// ToolCall is a tool call as the model made it.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Tool is a tool as the model sees it.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the input
}

// Conversation is the model-side history of a session.
type Conversation struct {
	Full bool // keep every message; otherwise only the newest
	Msgs []Message
}

// NewConversation is an empty conversation, keeping every message when m
// reads the history.
func NewConversation(m Model) *Conversation {
	return &Conversation{Full: m != nil && m.NeedsHistory()}
}

// Add appends a message (only the newest is kept when the model reads no
// history).
func (c *Conversation) Add(m Message) {
	if !c.Full {
		c.Msgs = c.Msgs[:0]
	}
	c.Msgs = append(c.Msgs, m)
}

// Mark and Truncate drop a refused turn from what the model is sent.
func (c *Conversation) Mark() int { return len(c.Msgs) }

// Truncate drops what was added after Mark returned n.
func (c *Conversation) Truncate(n int) {
	if n <= len(c.Msgs) {
		c.Msgs = c.Msgs[:n]
	}
}

// AnswerUnrun gives each of calls that has no result yet one saying why it
// did not run: a model's next request must answer every tool call it made,
// or servers reject it.
func (c *Conversation) AnswerUnrun(calls []ToolCall, why string) {
	answered := map[string]bool{} // the results since the last assistant message
	for i := len(c.Msgs) - 1; i >= 0 && c.Msgs[i].Role != "assistant"; i-- {
		if c.Msgs[i].Role == "tool" {
			answered[c.Msgs[i].ToolCallID] = true
		}
	}
	for _, tc := range calls {
		if !answered[tc.ID] {
			c.Add(Message{Role: "tool", ToolCallID: tc.ID, Text: "The tool call did not run: " + why + "."})
		}
	}
}

// Newest is the text of the newest user message or tool result.
func (c *Conversation) Newest() string {
	for i := len(c.Msgs) - 1; i >= 0; i-- {
		if m := c.Msgs[i]; m.Role != "assistant" {
			return m.Text
		}
	}
	return ""
}

// Usage is the tokens a model call used.
type Usage struct {
	InputTokens  int64    `json:"inputTokens"`
	OutputTokens int64    `json:"outputTokens"`
	Cost         *float64 `json:"cost,omitempty"` // USD, where the provider reports it (OpenRouter's usage.cost)
}

// MaxTokens bounds a reported count: a provider's negative or overflowing
// figure must not reach the client (the schema's counts are unsigned) or
// a sum.
const MaxTokens = 1 << 40

// Then is a call's usage after its next report, when the call has
// reported u before (reported): a running total (the same input tokens,
// no fewer output tokens: Gemini's OpenAI-compatible endpoint repeats the
// whole usage on every chunk) replaces u; anything else is a delta, added
// (a server that reports each chunk's own tokens). Counts are clamped to
// [0, MaxTokens]; a cost that is not a finite, non-negative number is left
// out, and a sum that would not be finite keeps the cost before it.
func (u Usage) Then(next Usage, reported bool) Usage {
	next.InputTokens = min(max(next.InputTokens, 0), MaxTokens)
	next.OutputTokens = min(max(next.OutputTokens, 0), MaxTokens)
	if next.Cost != nil && (math.IsNaN(*next.Cost) || math.IsInf(*next.Cost, 0) || *next.Cost < 0) {
		next.Cost = nil
	}
	if !reported || next.InputTokens == u.InputTokens && next.OutputTokens >= u.OutputTokens {
		if next.Cost == nil {
			next.Cost = u.Cost
		}
		return next
	}
	sum := Usage{InputTokens: min(u.InputTokens+next.InputTokens, MaxTokens), OutputTokens: min(u.OutputTokens+next.OutputTokens, MaxTokens), Cost: u.Cost}
	if next.Cost != nil {
		sum.Cost = AddCost(u.Cost, *next.Cost)
	}
	return sum
}

// AddCost is the cost c with d added; c itself when the sum would not be
// finite.
func AddCost(c *float64, d float64) *float64 {
	var base float64
	if c != nil {
		base = *c
	}
	if math.IsInf(base+d, 0) || math.IsNaN(base+d) {
		return c
	}
	return new(base + d)
}

// Sink receives one model call's output, in order.
type Sink interface {
	// TextChunk and ThoughtChunk take a piece of the answer.
	TextChunk(s string) error
	ThoughtChunk(s string) error
	// ToolCall notes a tool call the model made; it runs after the call.
	ToolCall(tc ToolCall)
	AddUsage(u Usage)
	// Pause writes out what streamed: the model is about to wait.
	Pause() error
	// Retrying says the call failed before any output (why) and is made
	// again after a pause.
	Retrying(why string)
	// KeepState persists, with the session, what the model needs to
	// continue it in another process (opaque JSON, handed back to
	// Model.Resume when the session is opened again).
	KeepState(state json.RawMessage) error
}

// watched is a Sink whose first failure is kept: the session's own (its
// store could not write: a full disk), which a model passes up as it is,
// never wrapped as a failed model call.
type watched struct {
	Sink
	err error
}

func (w *watched) TextChunk(s string) error    { return w.keep(w.Sink.TextChunk(s)) }
func (w *watched) ThoughtChunk(s string) error { return w.keep(w.Sink.ThoughtChunk(s)) }
func (w *watched) Pause() error                { return w.keep(w.Sink.Pause()) }
func (w *watched) KeepState(state json.RawMessage) error {
	return w.keep(w.Sink.KeepState(state))
}

func (w *watched) keep(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// failure is the call's error: the sink's own when it failed, else err.
func (w *watched) failure(err error) error {
	if err != nil && w.err != nil {
		return w.err
	}
	return err
}

// Entry is one line of a replay fixture as --record writes it.
type Entry struct {
	Expect string         `json:"expect,omitempty"`
	Chunks []Chunk        `json:"chunks"`
	Stop   acp.StopReason `json:"stop,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// Recorder appends every model response to a replay fixture (--record),
// so that --model replay:PATH plays the conversation back. A cancelled call
// is recorded with what it streamed, since replay is positional.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	log *slog.Logger
}

// OpenRecorder opens path for --record, appending to what it holds.
func OpenRecorder(path string, log *slog.Logger) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the recording: %w", err)
	}
	return &Recorder{f: f, log: log}, nil
}

// Write appends one model response as a fixture entry: its chunks, its
// stop reason or error; a cancelled call is written with what it streamed.
func (r *Recorder) Write(e *Entry, stop acp.StopReason, err error, cancelled bool) {
	switch {
	case cancelled:
	case err != nil:
		var rerr *jrpc2.Error
		if errors.As(err, &rerr) {
			e.Error = rerr.Message
		} else {
			e.Error = err.Error()
		}
	default:
		e.Stop = stop
	}
	b, merr := acp.Marshal(e)
	if merr != nil {
		r.log.Error("recording a model response failed", "err", merr)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, werr := r.f.Write(append(b, '\n')); werr != nil {
		r.log.Error("recording a model response failed", "file", r.f.Name(), "err", werr)
	}
}

func (r *Recorder) Close() error { return r.f.Close() }

// Errorf makes a failed model call a JSON-RPC error.
func Errorf(format string, args ...any) error {
	return acp.Errorf(acp.CodeModelFailed, "%s", fmt.Sprintf(format, args...))
}
