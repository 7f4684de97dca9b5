// turn.go holds the agent loop: one session/prompt turn calls the model,
// streams its text and thoughts to the client, runs the tools it asks for,
// feeds their results back, and repeats until the model stops.
//
// The rules:
//   - Streamed chunks are written without a flush; the stream flushes when
//     the model pauses (a delay, the end of a call, a callback to the client).
//   - What streamed is persisted per message, in parts of at most partBytes,
//     so a long stream costs no per-chunk I/O and holds no growing buffer.
//   - A cancelled turn answers cancelled, never an error; everything it wrote
//     precedes the response because it all runs in the handler's goroutine.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/store"
)

// model is a source of model responses: the replay fixture or an
// OpenAI-compatible endpoint.
type model interface {
	// complete makes one model call on req and streams its output into out.
	// It returns the stop reason: end_turn, tool_use, max_tokens or refusal.
	complete(ctx context.Context, req *modelRequest, out *modelStream) (string, error)
	// needsHistory says whether the model reads the conversation. The replay
	// model does not, so a turn need not keep what streamed in memory.
	needsHistory() bool
	// models lists the model names a session may choose; it may ask the
	// server once, so call it without the agent's lock held.
	models() []string
	// defaultName is the model a new session starts on.
	defaultName() string
}

// modelRequest is what one model call is given.
type modelRequest struct {
	model string // the session's chosen model
	conv  *conversation
	msgs  []message // what to send of conv, within the context budget
	tools []toolSpec
	cwd   string
	roots []string
	mode  string
}

// message is one entry of the conversation the model is sent.
type message struct {
	role       string // "user", "assistant" or "tool"
	text       string
	toolCalls  []toolCall // assistant
	toolCallID string     // tool: the model's id of the call answered
}

// toolCall is a tool call as the model made it.
type toolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// conversation is the model-side history of a session.
type conversation struct {
	full bool // keep every message; otherwise only the newest
	msgs []message
}

func newConversation(m model) *conversation {
	return &conversation{full: m != nil && m.needsHistory()}
}

func (c *conversation) add(m message) {
	if !c.full {
		c.msgs = c.msgs[:0]
	}
	c.msgs = append(c.msgs, m)
}

// mark and truncate drop a refused turn from what the model is sent.
func (c *conversation) mark() int { return len(c.msgs) }

func (c *conversation) truncate(n int) {
	if n <= len(c.msgs) {
		c.msgs = c.msgs[:n]
	}
}

// answerUnrun gives each of calls that has no result yet one saying why it
// did not run: a model's next request must answer every tool call it made,
// or servers reject it.
func (c *conversation) answerUnrun(calls []toolCall, why string) {
	for _, tc := range calls {
		if !c.answered(tc.ID) {
			c.add(message{role: "tool", toolCallID: tc.ID, text: "The tool call did not run: " + why + "."})
		}
	}
}

// answered reports whether the tool call with the model's id has a result
// since the last assistant message.
func (c *conversation) answered(id string) bool {
	for i := len(c.msgs) - 1; i >= 0 && c.msgs[i].role != "assistant"; i-- {
		if c.msgs[i].role == "tool" && c.msgs[i].toolCallID == id {
			return true
		}
	}
	return false
}

// newest is the text of the newest user message or tool result.
func (c *conversation) newest() string {
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if m := c.msgs[i]; m.role != "assistant" {
			return m.text
		}
	}
	return ""
}

const (
	kindMessage = "agent_message_chunk"
	kindThought = "agent_thought_chunk"
	partBytes   = 64 << 10 // largest text part persisted in one record
)

// modelStream receives one model call's output. It is the hot path.
type modelStream struct {
	a    *agent
	s    *SessionRecord
	keep bool // keep the text for the conversation

	kind  string // the open message's update kind, or ""
	msgID string
	part  []byte // the open message's text not yet persisted
	enc   []byte // scratch for encoding updates

	text  []byte     // the assistant's text, when keep
	calls []toolCall // tool calls in order
	usage usage
	err   error        // the first persistence error
	rec   *replayEntry // what --record writes, or nil
}

type usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

func (st *modelStream) textChunk(s string) error    { return st.chunk(kindMessage, s) }
func (st *modelStream) thoughtChunk(s string) error { return st.chunk(kindThought, s) }

func (st *modelStream) chunk(kind, s string) error {
	if s == "" {
		return nil
	}
	if st.kind != kind {
		st.endMessage()
		st.kind, st.msgID = kind, st.a.newID("msg")
	}
	st.part = append(st.part, s...)
	if len(st.part) >= partBytes {
		st.persistPart()
	}
	if st.keep && kind == kindMessage {
		st.text = append(st.text, s...)
	}
	if st.rec != nil {
		c := replayChunk{Text: &s}
		if kind == kindThought {
			c = replayChunk{Thought: &s}
		}
		st.rec.Chunks = append(st.rec.Chunks, c)
	}
	st.enc = acp.AppendChunkUpdate(st.enc[:0], st.s.id, kind, st.msgID, s)
	return st.a.out.Notify(acp.MethodSessionUpdate, st.enc)
}

// toolCall records a tool call the model made; the loop runs it after the
// call. Its input is compacted here, once, so that it can be written as it
// is; input that is not JSON is kept as a JSON string (the tool call then
// fails as invalid input, and the model is told).
func (st *modelStream) toolCall(tc toolCall) {
	st.endMessage()
	var buf bytes.Buffer
	if len(tc.Input) == 0 {
		tc.Input = json.RawMessage("{}")
	} else if json.Compact(&buf, tc.Input) == nil {
		tc.Input = buf.Bytes()
	} else {
		tc.Input = acp.MustJSON(string(tc.Input))
	}
	st.calls = append(st.calls, tc)
	if st.rec != nil {
		st.rec.Chunks = append(st.rec.Chunks, replayChunk{ToolCall: &tc})
	}
}

func (st *modelStream) addUsage(u usage) {
	if st.rec != nil {
		st.rec.Chunks = append(st.rec.Chunks, replayChunk{Usage: &u})
	}
	st.usage.InputTokens += u.InputTokens
	st.usage.OutputTokens += u.OutputTokens
}

// pause flushes what streamed: the model is about to wait.
func (st *modelStream) pause() error { return st.a.pause(st.s) }

// pause writes what the client and the session log have buffered: the agent
// is about to wait.
func (a *agent) pause(s *SessionRecord) error {
	err := s.file.Flush()
	if werr := a.out.Flush(); err == nil {
		err = werr
	}
	return err
}

func (st *modelStream) persistPart() {
	if len(st.part) == 0 {
		return
	}
	typ := store.RecAgent
	if st.kind == kindThought {
		typ = store.RecThought
	}
	err := st.s.file.Append(store.Record{Type: typ, MessageID: st.msgID, Text: string(st.part)})
	if err != nil && st.err == nil {
		st.err = err
	}
	st.part = st.part[:0]
}

func (st *modelStream) endMessage() {
	st.persistPart()
	st.kind, st.msgID = "", ""
}

// runTurn runs one prompt turn and returns its stop reason.
func (a *agent) runTurn(ctx context.Context, s *SessionRecord, prompt []acp.ContentBlock, raw []json.RawMessage) (string, error) {
	// Written at once: whatever happens to the turn, what was asked is kept.
	user := store.Record{Type: store.RecUser, MessageID: a.newID("msg"), Blocks: raw}
	if err := s.file.AppendNow(user); err != nil {
		s.file.TakeFailure() // reported now; the record stays buffered
		return "", err
	}
	mark := s.conv.mark()
	s.conv.add(message{role: "user", text: promptText(prompt)})
	for _, n := range s.mcp.takeNotices() {
		if err := a.notice(s, n); err != nil {
			return "", err
		}
	}

	stop, usage, turnErr := a.loop(ctx, s)
	if a.stopped(ctx) {
		stop, turnErr = acp.StopCancelled, nil
	}
	if stop == acp.StopRefusal {
		s.conv.truncate(mark)
	}

	end := store.Record{Type: store.RecTurnEnd, StopReason: stop, Interrupted: stop == acp.StopCancelled && a.out.Gone()}
	if usage != nil && (usage.InputTokens != 0 || usage.OutputTokens != 0) {
		end.Usage = (*store.Usage)(usage)
	}
	if turnErr != nil {
		end.Error = turnErr.Error()
	}
	a.mu.Lock()
	first := s.title == ""
	if first {
		s.title = titleFrom(prompt)
	}
	s.updated = a.now()
	title, updated := s.title, s.updated
	a.mu.Unlock()
	if first && title != "" {
		end.Title = title
	}
	storeErr := s.file.EndTurn(end, infoOf(s))
	if err := s.file.TakeFailure(); storeErr == nil && err != nil {
		// A write failed during the turn; what it held was written later,
		// but the client must learn that the store is in trouble.
		storeErr = err
	}
	if first && title != "" {
		a.update(s.id, acp.SessionInfoUpdate{SessionUpdate: "session_info_update", Title: title, UpdatedAt: store.Stamp(updated)})
	}
	if turnErr != nil {
		return "", turnErr
	}
	if storeErr != nil {
		return "", storeErr
	}
	return stop, nil
}

// fitContext sets what req sends of the conversation within the session's
// context budget, and tells the user once when older context starts being
// left out.
func (a *agent) fitContext(s *SessionRecord, req *modelRequest) error {
	if !s.conv.full {
		return nil // the model reads no history (replay): nothing to fit
	}
	budget := a.cfg.maxContextTokens
	if s.budget > 0 {
		budget = min(budget, s.budget)
	}
	fixed := len(systemPrompt(req)) / bytesPerToken
	for _, t := range req.tools {
		fixed += (len(t.Name) + len(t.Description) + len(t.Parameters)) / bytesPerToken
	}
	msgs, trimmed := s.conv.fit(budget - fixed)
	req.msgs = msgs
	if trimmed && !s.trimNoticed {
		s.trimNoticed = true
		return a.notice(s, fmt.Sprintf("(acpbridge: this conversation has outgrown the model's context budget of %d tokens, so the oldest tool results and then the oldest turns are left out of what the model is sent from now on. The session keeps everything.)", budget))
	}
	return nil
}

// notice tells the user something in the conversation, as an agent
// message of its own; it is persisted but not sent to the model.
func (a *agent) notice(s *SessionRecord, text string) error {
	id := a.newID("msg")
	if err := a.out.Notify(acp.MethodSessionUpdate, acp.AppendChunkUpdate(nil, s.id, kindMessage, id, text)); err != nil {
		return err
	}
	return s.file.Append(store.Record{Type: store.RecAgent, MessageID: id, Text: text, Notice: true})
}

// loop makes model calls until the model stops, the cap is reached, or ctx ends.
func (a *agent) loop(ctx context.Context, s *SessionRecord) (string, *usage, error) {
	var total usage
	for calls := 0; ; calls++ {
		if calls == a.cfg.maxTurnRequests {
			return acp.StopMaxTurnRequests, &total, nil
		}
		a.mu.Lock()
		req := &modelRequest{model: s.model, conv: s.conv, cwd: s.cwd, roots: s.roots, mode: s.mode, tools: a.tools(s)}
		a.mu.Unlock()
		if err := a.fitContext(s, req); err != nil {
			return "", &total, err
		}
		st := &modelStream{a: a, s: s, keep: s.conv.full}
		if a.recorder != nil {
			st.rec = &replayEntry{Expect: recordedExpect(s.conv.newest(), s.roots), Chunks: []replayChunk{}}
		}
		if rm, ok := a.model.(*replayModel); ok {
			// Replay is positional per session: a new process that opens it
			// continues after this call's entry, even if it is killed in it
			// (the stream's first pause writes this).
			s.file.Append(store.Record{Type: store.RecReplay, ReplayPos: rm.position() + 1})
		}
		stop, err := a.model.complete(ctx, req, st)
		if contextTooLong(err) && st.kind == "" && len(st.calls) == 0 && len(st.text) == 0 && s.budget == 0 {
			// The provider counts more tightly than the estimate: send less,
			// once, and tell the user as for any trimming.
			sent := 0
			for _, m := range req.msgs {
				sent += estimate(m)
			}
			s.budget = sent * 3 / 4
			a.log.Warn("the model's context window is smaller than estimated; sending less", "session", s.id, "tokens", s.budget)
			if ferr := a.fitContext(s, req); ferr != nil {
				return "", &total, ferr
			}
			stop, err = a.model.complete(ctx, req, st)
		}
		st.endMessage()
		if st.rec != nil {
			a.recorder.write(st.rec, stop, err, ctx.Err() != nil)
		}
		total.InputTokens += st.usage.InputTokens
		total.OutputTokens += st.usage.OutputTokens
		if st.keep && (len(st.text) > 0 || len(st.calls) > 0) {
			s.conv.add(message{role: "assistant", text: string(st.text), toolCalls: st.calls})
		}
		if a.stopped(ctx) {
			s.conv.answerUnrun(st.calls, "the turn was cancelled")
			return acp.StopCancelled, &total, nil
		}
		if err == nil {
			err = st.err
		}
		if err != nil {
			s.conv.answerUnrun(st.calls, "the model call failed")
			return "", &total, err
		}
		if len(st.calls) == 0 {
			if stop == acp.StopToolUse {
				stop = acp.StopEndTurn
			}
			return stop, &total, nil
		}
		if err := a.runTools(ctx, s, st.calls); err != nil {
			if a.stopped(ctx) || errors.Is(err, errTurnCancelled) {
				return acp.StopCancelled, &total, nil
			}
			return "", &total, err
		}
	}
}

// replayEntry is one line of a replay fixture as --record writes it.
type replayEntry struct {
	Expect string        `json:"expect,omitempty"`
	Chunks []replayChunk `json:"chunks"`
	Stop   string        `json:"stop,omitempty"`
	Error  string        `json:"error,omitempty"`
}

// recorder appends every model response to a replay fixture (--record),
// so that --model replay:PATH plays the conversation back. A cancelled call
// is recorded with what it streamed, since replay is positional.
type recorder struct {
	mu  sync.Mutex
	f   *os.File
	log *slog.Logger
}

func openRecorder(path string, log *slog.Logger) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the recording: %w", err)
	}
	return &recorder{f: f, log: log}, nil
}

func (r *recorder) write(e *replayEntry, stop string, err error, cancelled bool) {
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

func (r *recorder) close() error { return r.f.Close() }

// stopped reports whether the turn must end as cancelled: session/cancel
// or close, or the client has gone (stdin ended, stdout broke).
func (a *agent) stopped(ctx context.Context) bool {
	return ctx.Err() != nil || a.out.Gone()
}

// errTurnCancelled ends a turn as cancelled (a permission request answered
// with the cancelled outcome).
var errTurnCancelled = errors.New("turn cancelled")

// modelError makes a failed model call a JSON-RPC error.
func modelError(format string, args ...any) error {
	return acp.Errorf(acp.CodeModelFailed, "%s", fmt.Sprintf(format, args...))
}

// feeder rebuilds the model-side conversation from records in order:
// turns that ended in refusal are left out, and a tool call with no
// recorded result gets one saying so.
type feeder struct {
	c       *conversation
	mark    int             // where the current turn began
	asst    *message        // the assistant message being built
	text    strings.Builder // its text: appended in parts, made a string once
	pending map[string]bool
	order   []string // model call ids of the current step, in order
}

func newFeeder(c *conversation) *feeder { return &feeder{c: c, pending: map[string]bool{}} }

func (f *feeder) flushAsst() {
	if f.asst != nil {
		f.asst.text = f.text.String()
		f.text.Reset()
		f.c.add(*f.asst)
		f.asst = nil
	}
}

// closeCalls answers the calls of the last step that have no result.
func (f *feeder) closeCalls() {
	f.flushAsst()
	for _, id := range f.order {
		if f.pending[id] {
			f.c.add(message{role: "tool", toolCallID: id, text: "The tool call was interrupted: acpbridge stopped before it finished. Its effects are unknown."})
		}
	}
	clear(f.pending)
	f.order = f.order[:0]
}

func (f *feeder) assistant() *message {
	if f.asst == nil {
		f.asst = &message{role: "assistant"}
	}
	return f.asst
}

func (f *feeder) add(rec store.Record) {
	switch rec.Type {
	case store.RecUser:
		f.closeCalls()
		f.mark = f.c.mark()
		var blocks []acp.ContentBlock
		for _, b := range rec.Blocks {
			var cb acp.ContentBlock
			if json.Unmarshal(b, &cb) == nil && (cb.Type != "text" || cb.Text != nil) && (cb.Type != "resource" || cb.Resource != nil) {
				blocks = append(blocks, cb)
			}
		}
		f.c.add(message{role: "user", text: promptText(blocks)})
	case store.RecAgent:
		if !rec.Notice {
			f.assistant()
			if f.c.full {
				f.text.WriteString(rec.Text)
			}
		}
	case store.RecToolCall:
		if rec.Call != nil {
			m := f.assistant()
			m.toolCalls = append(m.toolCalls, toolCall(*rec.Call))
			f.pending[rec.Call.ID] = true
			f.order = append(f.order, rec.Call.ID)
		}
	case store.RecToolResult:
		f.flushAsst()
		if rec.Call != nil && f.pending[rec.Call.ID] {
			f.pending[rec.Call.ID] = false
			text := rec.Result
			if rec.ResultIsContent {
				text = contentText(rec.Content)
			}
			f.c.add(message{role: "tool", toolCallID: rec.Call.ID, text: text})
		}
	case store.RecTurnEnd:
		f.closeCalls()
		if rec.StopReason == acp.StopRefusal {
			f.c.truncate(f.mark)
		}
	}
}

func (f *feeder) finish() { f.closeCalls() }

// contentText is the text of the one text block of stored tool content.
func contentText(content json.RawMessage) string {
	var c []struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(content, &c) != nil || len(c) != 1 {
		return ""
	}
	return c[0].Content.Text
}
