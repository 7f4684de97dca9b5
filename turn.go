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
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
	"acpbridge/internal/store"
)

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

	text  []byte           // the assistant's text, when keep
	calls []model.ToolCall // tool calls in order
	usage model.Usage
	err   error        // the first persistence error
	rec   *model.Entry // what --record writes, or nil
}

func (st *modelStream) TextChunk(s string) error    { return st.chunk(kindMessage, s) }
func (st *modelStream) ThoughtChunk(s string) error { return st.chunk(kindThought, s) }

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
		c := model.Chunk{Text: &s}
		if kind == kindThought {
			c = model.Chunk{Thought: &s}
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
func (st *modelStream) ToolCall(tc model.ToolCall) {
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
		st.rec.Chunks = append(st.rec.Chunks, model.Chunk{ToolCall: &tc})
	}
}

func (st *modelStream) AddUsage(u model.Usage) {
	if st.rec != nil {
		st.rec.Chunks = append(st.rec.Chunks, model.Chunk{Usage: &u})
	}
	st.usage.InputTokens += u.InputTokens
	st.usage.OutputTokens += u.OutputTokens
}

// pause flushes what streamed: the model is about to wait.
func (st *modelStream) Pause() error { return st.a.pause(st.s) }

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
	mark := s.conv.Mark()
	s.conv.Add(model.Message{Role: "user", Text: promptText(prompt)})
	for _, n := range s.mcp.TakeNotices() {
		if err := a.notice(s, n); err != nil {
			return "", err
		}
	}

	stop, usage, turnErr := a.loop(ctx, s)
	if a.stopped(ctx) {
		stop, turnErr = acp.StopCancelled, nil
	}
	if stop == acp.StopRefusal {
		s.conv.Truncate(mark)
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
func (a *agent) fitContext(s *SessionRecord, req *model.Request) error {
	if !s.conv.Full {
		return nil // the model reads no history (replay): nothing to fit
	}
	budget := a.cfg.maxContextTokens
	if s.budget > 0 {
		budget = min(budget, s.budget)
	}
	fixed := len(model.SystemPrompt(req)) / model.BytesPerToken
	for _, t := range req.Tools {
		fixed += (len(t.Name) + len(t.Description) + len(t.Parameters)) / model.BytesPerToken
	}
	msgs, trimmed := s.conv.Fit(budget - fixed)
	req.Msgs = msgs
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
func (a *agent) loop(ctx context.Context, s *SessionRecord) (string, *model.Usage, error) {
	var total model.Usage
	for calls := 0; ; calls++ {
		if calls == a.cfg.maxTurnRequests {
			return acp.StopMaxTurnRequests, &total, nil
		}
		a.mu.Lock()
		req := &model.Request{Model: s.model, Conv: s.conv, Cwd: s.ws.Cwd, Roots: s.ws.Roots, Mode: s.mode, Tools: a.tools(s)}
		a.mu.Unlock()
		if err := a.fitContext(s, req); err != nil {
			return "", &total, err
		}
		st := &modelStream{a: a, s: s, keep: s.conv.Full}
		if a.recorder != nil {
			st.rec = &model.Entry{Expect: model.RecordedExpect(s.conv.Newest(), s.ws.Roots), Chunks: []model.Chunk{}}
		}
		if rm, ok := a.model.(*model.Replay); ok {
			// Replay is positional per session: a new process that opens it
			// continues after this call's entry, even if it is killed in it
			// (the stream's first pause writes this).
			s.file.Append(store.Record{Type: store.RecReplay, ReplayPos: rm.Position() + 1})
		}
		stop, err := a.model.Complete(ctx, req, st)
		if model.ContextTooLong(err) && st.kind == "" && len(st.calls) == 0 && len(st.text) == 0 && s.budget == 0 {
			// The provider counts more tightly than the estimate: send less,
			// once, and tell the user as for any trimming.
			sent := 0
			for _, m := range req.Msgs {
				sent += model.Estimate(m)
			}
			s.budget = sent * 3 / 4
			a.log.Warn("the model's context window is smaller than estimated; sending less", "session", s.id, "tokens", s.budget)
			if ferr := a.fitContext(s, req); ferr != nil {
				return "", &total, ferr
			}
			stop, err = a.model.Complete(ctx, req, st)
		}
		st.endMessage()
		if st.rec != nil {
			a.recorder.Write(st.rec, stop, err, ctx.Err() != nil)
		}
		total.InputTokens += st.usage.InputTokens
		total.OutputTokens += st.usage.OutputTokens
		if st.keep && (len(st.text) > 0 || len(st.calls) > 0) {
			s.conv.Add(model.Message{Role: "assistant", Text: string(st.text), ToolCalls: st.calls})
		}
		if a.stopped(ctx) {
			s.conv.AnswerUnrun(st.calls, "the turn was cancelled")
			return acp.StopCancelled, &total, nil
		}
		if err == nil {
			err = st.err
		}
		if err != nil {
			s.conv.AnswerUnrun(st.calls, "the model call failed")
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

// stopped reports whether the turn must end as cancelled: session/cancel
// or close, or the client has gone (stdin ended, stdout broke).
func (a *agent) stopped(ctx context.Context) bool {
	return ctx.Err() != nil || a.out.Gone()
}

// errTurnCancelled ends a turn as cancelled (a permission request answered
// with the cancelled outcome).
var errTurnCancelled = errors.New("turn cancelled")

// feeder rebuilds the model-side conversation from records in order:
// turns that ended in refusal are left out, and a tool call with no
// recorded result gets one saying so.
type feeder struct {
	c       *model.Conversation
	mark    int             // where the current turn began
	asst    *model.Message  // the assistant message being built
	text    strings.Builder // its text: appended in parts, made a string once
	pending map[string]bool
	order   []string // model call ids of the current step, in order
}

func newFeeder(c *model.Conversation) *feeder { return &feeder{c: c, pending: map[string]bool{}} }

func (f *feeder) flushAsst() {
	if f.asst != nil {
		f.asst.Text = f.text.String()
		f.text.Reset()
		f.c.Add(*f.asst)
		f.asst = nil
	}
}

// closeCalls answers the calls of the last step that have no result.
func (f *feeder) closeCalls() {
	f.flushAsst()
	for _, id := range f.order {
		if f.pending[id] {
			f.c.Add(model.Message{Role: "tool", ToolCallID: id, Text: "The tool call was interrupted: acpbridge stopped before it finished. Its effects are unknown."})
		}
	}
	clear(f.pending)
	f.order = f.order[:0]
}

func (f *feeder) assistant() *model.Message {
	if f.asst == nil {
		f.asst = &model.Message{Role: "assistant"}
	}
	return f.asst
}

func (f *feeder) add(rec store.Record) {
	switch rec.Type {
	case store.RecUser:
		f.closeCalls()
		f.mark = f.c.Mark()
		var blocks []acp.ContentBlock
		for _, b := range rec.Blocks {
			var cb acp.ContentBlock
			if json.Unmarshal(b, &cb) == nil && (cb.Type != "text" || cb.Text != nil) && (cb.Type != "resource" || cb.Resource != nil) {
				blocks = append(blocks, cb)
			}
		}
		f.c.Add(model.Message{Role: "user", Text: promptText(blocks)})
	case store.RecAgent:
		if !rec.Notice {
			f.assistant()
			if f.c.Full {
				f.text.WriteString(rec.Text)
			}
		}
	case store.RecToolCall:
		if rec.Call != nil {
			m := f.assistant()
			m.ToolCalls = append(m.ToolCalls, model.ToolCall(*rec.Call))
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
			f.c.Add(model.Message{Role: "tool", ToolCallID: rec.Call.ID, Text: text})
		}
	case store.RecTurnEnd:
		f.closeCalls()
		if rec.StopReason == acp.StopRefusal {
			f.c.Truncate(f.mark)
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
