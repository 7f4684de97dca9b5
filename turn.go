// turn.go runs one session/prompt turn, a step of the agent loop
// (session.go): it calls the model, streams its text and thoughts to the
// client, runs the tools it asks for, feeds their results back, and
// repeats until the model stops.
//
// The rules:
//   - Streamed chunks are written without a flush; the stream flushes when
//     the model pauses (a delay, the end of a call, a callback to the client).
//   - What streamed is persisted per message, in parts of at most partBytes,
//     so a long stream costs no per-chunk I/O and holds no growing buffer.
//   - A cancelled turn answers cancelled, never an error; everything it wrote
//     precedes the response because it all runs on the agent loop, one
//     goroutine, which writes the response itself at the step's end.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
	"acpbridge/internal/store"
)

const (
	partBytes = 64 << 10 // largest text part persisted in one record
)

// modelStream receives one model call's output. It is the hot path.
type modelStream struct {
	a    *agent
	s    *SessionRecord
	keep bool // keep the text for the conversation

	kind  acp.UpdateKind // the open message's update kind, or ""
	msgID string
	part  []byte // the open message's text not yet persisted
	enc   []byte // scratch for encoding updates

	text     []byte           // the assistant's text, when keep
	calls    []model.ToolCall // tool calls in order
	usage    model.Usage
	reported bool  // the model reported usage
	streamed int   // bytes of text and thought streamed
	err      error // the first persistence error
}

func (st *modelStream) TextChunk(s string) error    { return st.chunk(acp.UpdateMessage, s) }
func (st *modelStream) ThoughtChunk(s string) error { return st.chunk(acp.UpdateThought, s) }

func (st *modelStream) chunk(kind acp.UpdateKind, s string) error {
	if s == "" {
		return nil
	}
	if st.kind != kind {
		st.endMessage()
		st.kind, st.msgID = kind, st.a.newID("msg")
	}
	st.part = append(st.part, s...)
	st.streamed += len(s)
	if len(st.part) >= partBytes {
		st.persistPart()
	}
	if st.keep && kind == acp.UpdateMessage {
		st.text = append(st.text, s...)
	}
	st.enc = acp.AppendChunkUpdate(st.enc[:0], st.s.id, kind, st.msgID, s)
	return st.a.out.Notify(acp.MethodSessionUpdate, st.enc)
}

// ToolCall records a tool call the model made; the loop runs it after the
// call. Its input is compacted here, once, so that it can be written as it
// is; input that is not JSON is kept as a JSON string (the tool call then
// fails as invalid input, and the model is told).
func (st *modelStream) ToolCall(tc model.ToolCall) {
	st.endMessage()
	tc.Input = model.ToolInput(tc.Input)
	st.calls = append(st.calls, tc)
}

// AddUsage takes a usage report of the call: the latest of running
// totals, or the sum of deltas (model.Usage.Then).
func (st *modelStream) AddUsage(u model.Usage) {
	st.usage = st.usage.Then(u, st.reported)
	st.reported = true
}

// storedCall is a tool call as the log keeps it.
func storedCall(c model.ToolCall) *store.Call {
	sc := store.Call(c)
	return &sc
}

// KeepState persists the model's state with the session; the stream's
// next pause writes it.
func (st *modelStream) KeepState(state json.RawMessage) error {
	return st.s.file.Append(store.Record{Type: store.RecModelState, ModelState: state})
}

// Pause flushes what streamed: the model is about to wait.
func (st *modelStream) Pause() error { return st.a.pause(st.s) }

// Retrying tells the user (a client that takes notices) that the model
// call failed and is made again.
func (st *modelStream) Retrying(why string) {
	st.a.tell(st.s, "warning", "The model call failed; trying again", why)
}

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
	if st.kind == acp.UpdateThought {
		typ = store.RecThought
	}
	// The part's bytes are lent, not copied: Append encodes the record
	// before it returns, and the part is reused only after that.
	text := unsafe.String(unsafe.SliceData(st.part), len(st.part))
	err := st.s.file.Append(store.Record{Type: typ, MessageID: st.msgID, Text: text})
	if err != nil && st.err == nil {
		st.err = err
	}
	st.part = st.part[:0]
}

func (st *modelStream) endMessage() {
	st.persistPart()
	st.kind, st.msgID = "", ""
}

// runTurn runs one prompt turn and returns its stop reason. It takes the
// prompt's copies from in and lets each go once the next holds it: the
// client's blocks once the log has them, the decoded blocks once the
// conversation has the message (a pasted prompt costs a few times its
// size, not a copy per stage).
func (a *agent) runTurn(ctx context.Context, s *SessionRecord, in *promptInput) (acp.StopReason, error) {
	// Written at once: whatever happens to the turn, what was asked is kept.
	user := store.Record{Type: store.RecUser, MessageID: a.newID("msg"), Blocks: in.raw}
	err := s.file.AppendNow(user)
	user.Blocks, in.raw = nil, nil
	if err != nil {
		_ = s.file.TakeFailure() // reported now; the record stays buffered
		return "", err
	}
	title := ""
	if s.title == "" {
		title = titleFrom(in.blocks)
	}
	mark := s.conv.Mark()
	s.conv.Add(model.Message{Role: "user", Text: promptText(in.blocks), Images: promptImages(in.blocks)})
	in.blocks = nil
	if in.big {
		runtime.GC() // the copies let go of above, before the request makes another
	}
	for _, n := range s.mcp.TakeNotices() {
		if a.tell(s, "warning", "An MCP server is unavailable", n) {
			continue
		}
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
	s.conv.KeepImagesWithin(a.cfg.imageBudget)
	storeErr := a.endTurn(s, title, stop, usage, turnErr)
	if turnErr != nil {
		return "", turnErr
	}
	if storeErr != nil {
		return "", storeErr
	}
	return stop, nil
}

// endTurn writes the turn's end to the log (with the session's title after
// its first turn, which the client is also told) and returns the store's
// error, if a write failed during the turn or now.
func (a *agent) endTurn(s *SessionRecord, title string, stop acp.StopReason, usage *model.Usage, turnErr error) error {
	end := store.Record{Type: store.RecTurnEnd, StopReason: string(stop), Interrupted: stop == acp.StopCancelled && a.out.HungUp()}
	if usage != nil && (usage.InputTokens != 0 || usage.OutputTokens != 0) {
		u := store.Usage{InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens}
		end.Usage = &u
	}
	if turnErr != nil {
		end.Error = turnErr.Error()
	}
	newTitle, updated := a.touch(s, title)
	end.Title = newTitle
	storeErr := s.file.EndTurn(end, infoOf(s))
	if err := s.file.TakeFailure(); storeErr == nil && err != nil {
		// A write failed during the turn; what it held was written later,
		// but the client must learn that the store is in trouble.
		storeErr = err
	}
	if newTitle != "" {
		if err := a.update(s.id, acp.SessionInfoChanged(newTitle, store.Stamp(updated))); err != nil {
			// The client has gone: the title is in the log for the next one.
			a.log.Debug("the session's title did not reach the client", "session", s.id, "err", err)
		}
	}
	return storeErr
}

// touch marks s updated now and, after its first turn, titles it (title,
// taken from its first prompt); newTitle is that title, or "".
func (a *agent) touch(s *SessionRecord, title string) (newTitle string, updated time.Time) {
	if s.title == "" {
		s.title = title
		newTitle = s.title
	}
	s.updated = a.now()
	return newTitle, s.updated
}

// fitContext sets what req sends of the conversation within the session's
// context budget and its image budget, and tells the user what is left
// out (compacted).
func (a *agent) fitContext(s *SessionRecord, req *model.Request) error {
	if !s.conv.Full {
		return nil // the model reads no history (replay): nothing to fit
	}
	budget := a.budget(s)
	msgs, trim := s.conv.Fit(budget - a.fixedTokens(req))
	req.Msgs = model.WithinImageBudget(msgs, a.cfg.imageBudget)
	if left := model.ImageCount(msgs) - model.ImageCount(req.Msgs); left > 0 && !s.told.images {
		s.told.images = true
		a.tell(s, "info", "Older images are not sent to the model again",
			fmt.Sprintf("%d earlier images are left out of this model request, which carries at most %d MiB of images; the model saw them when they were sent, and the session keeps them.", left, a.cfg.imageBudget>>20))
	}
	return a.compacted(s, trim, budget)
}

// compacted tells the user what trim left out, when it left out more than
// before: a client that opted into compaction gets a compaction_update
// (completed, or failed when the current turn alone is over the budget)
// for each step; else, once, a notice where the client takes them, or
// else a message in the conversation.
func (a *agent) compacted(s *SessionRecord, trim model.Trim, budget int) error {
	last := s.told.trim
	if !trim.Trimmed() || (trim.Turns <= last.Turns && trim.Results <= last.Results && trim.Over == last.Over) {
		return nil
	}
	s.told.trim = trim
	summary := fmt.Sprintf("To fit the context budget of %d tokens, the model is sent the conversation without its %d oldest turns, and with %d older tool results replaced by a note. The session keeps everything: a load shows it whole.", budget, trim.Turns, trim.Results)
	if a.clientCaps().Compaction() {
		status, errText := "completed", ""
		if trim.Over {
			status, errText = "failed", fmt.Sprintf("the current turn alone is over the context budget of %d tokens; it is sent whole, and the model may refuse it", budget)
		}
		return a.update(s.id, acp.Compaction(a.newID("compaction"), status, summary, errText))
	}
	if last.Trimmed() {
		return nil // told once
	}
	if a.tell(s, "warning", "Older context is left out of what the model is sent", summary) {
		return nil
	}
	return a.notice(s, fmt.Sprintf("(acpbridge: this conversation has outgrown the model's context budget of %d tokens, so the oldest tool results and then the oldest turns are left out of what the model is sent from now on. The session keeps everything.)", budget))
}

// tell gives the user a notice (severity info, warning or error), when the
// client opted into them (clientCapabilities.session.notices): live
// information, not history, never sent otherwise. It reports whether it
// was sent; a client that has gone is the turn's to find out.
func (a *agent) tell(s *SessionRecord, severity, title, description string) bool {
	if !a.clientCaps().Notices() {
		return false
	}
	if err := a.update(s.id, acp.Notice(severity, title, description)); err != nil {
		a.log.Debug("a notice did not reach the client", "session", s.id, "err", err)
	}
	return true
}

// budget is the context budget in force: --max-context-tokens, or the
// lower one learnt from the provider.
func (a *agent) budget(s *SessionRecord) int {
	if s.budget > 0 {
		return min(a.cfg.maxContextTokens, s.budget)
	}
	return a.cfg.maxContextTokens
}

// fixedTokens is the estimate of what every request carries besides the
// conversation: the system prompt and the tools.
func (a *agent) fixedTokens(req *model.Request) int {
	fixed := len(model.SystemPrompt(req)) / model.BytesPerToken
	for _, t := range req.Tools {
		fixed += (len(t.Name) + len(t.Description) + len(t.Parameters)) / model.BytesPerToken
	}
	return fixed
}

// notice tells the user something in the conversation, as an agent
// message of its own; it is persisted but not sent to the model.
func (a *agent) notice(s *SessionRecord, text string) error {
	id := a.newID("msg")
	if err := a.out.Notify(acp.MethodSessionUpdate, acp.AppendChunkUpdate(nil, s.id, acp.UpdateMessage, id, text)); err != nil {
		return err
	}
	return s.file.Append(store.Record{Type: store.RecAgent, MessageID: id, Text: text, Notice: true})
}

// loop makes model calls until the model stops, the cap is reached, or ctx ends.
func (a *agent) loop(ctx context.Context, s *SessionRecord) (acp.StopReason, *model.Usage, error) {
	var total model.Usage
	for calls := 0; ; calls++ {
		if calls == a.cfg.maxTurnRequests {
			return acp.StopMaxTurnRequests, &total, nil
		}
		st, stop, err := a.modelCall(ctx, s, &total)
		if st == nil {
			return "", &total, err
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

// modelCall asks the model once, streaming its answer to the client, adds
// its usage to total and what it said to the conversation. The stream is
// nil when the call could not be made (the error says why).
func (a *agent) modelCall(ctx context.Context, s *SessionRecord, total *model.Usage) (*modelStream, acp.StopReason, error) {
	mode, name := s.box.settings()
	req := &model.Request{Model: name, Conv: s.conv, Cwd: s.ws.Cwd, Roots: s.ws.Roots, Mode: mode, Tools: a.tools(s), Instructions: s.instructions}
	if err := a.fitContext(s, req); err != nil {
		return nil, "", err
	}
	st := &modelStream{a: a, s: s, keep: s.conv.Full}
	var out model.Sink = st
	var tee *model.Tee // --record's
	if a.recorder != nil {
		tee = &model.Tee{Out: st, Entry: &model.Entry{Expect: model.RecordedExpect(s.conv.Newest(), s.ws.Roots), Chunks: []model.Chunk{}}}
		out = tee
	}
	stop, err := a.model.Complete(ctx, req, out)
	if model.ContextTooLong(err) && st.kind == "" && len(st.calls) == 0 && len(st.text) == 0 && s.budget == 0 {
		if ferr := a.sendLess(s, req); ferr != nil {
			return nil, "", ferr
		}
		stop, err = a.model.Complete(ctx, req, out)
	}
	st.endMessage()
	if tee != nil {
		a.recorder.Write(tee.Finish(), stop, err, ctx.Err() != nil)
	}
	total.InputTokens += st.usage.InputTokens
	total.OutputTokens += st.usage.OutputTokens
	if st.keep && (len(st.text) > 0 || len(st.calls) > 0) {
		s.conv.Add(model.Message{Role: "assistant", Text: string(st.text), ToolCalls: st.calls})
	}
	if uerr := a.reportUsage(s, req, st); uerr != nil && err == nil {
		err = uerr
	}
	return st, stop, err
}

// reportUsage tells the client how full the context is after a model
// call (usage_update) and persists it, for a load to tell again: used is
// the provider's prompt and completion tokens when it reports them, else
// the estimate the context budget uses (what was sent and what came
// back; for a replay model, which is sent nothing, what came back); size
// is the budget in force; the cost, the session's sum of what the
// provider reported, if it did.
func (a *agent) reportUsage(s *SessionRecord, req *model.Request, st *modelStream) error {
	used := st.usage.InputTokens + st.usage.OutputTokens
	if !st.reported {
		used = int64((st.streamed + callBytes(st.calls)) / model.BytesPerToken)
		if s.conv.Full { // a replay model is sent no conversation
			used += int64(a.fixedTokens(req))
			for _, m := range req.Msgs {
				used += int64(model.Estimate(m))
			}
		}
	}
	if st.usage.Cost != nil {
		s.cost = model.AddCost(s.cost, *st.usage.Cost)
	}
	rec := store.Record{Type: store.RecUsage, Used: used, Size: int64(a.budget(s)), Cost: s.cost}
	if err := a.out.NotifyJSON(s.id, acp.Usage(rec.Used, rec.Size, rec.Cost)); err != nil {
		return err
	}
	return s.file.Append(rec)
}

// callBytes is the size of the tool calls' names and inputs.
func callBytes(calls []model.ToolCall) int {
	n := 0
	for _, c := range calls {
		n += len(c.Name) + len(c.Input)
	}
	return n
}

// sendLess handles a provider that counts more tightly than the estimate:
// the session's budget becomes three quarters of what was sent, once, and
// the request is fitted again, telling the user as for any trimming.
func (a *agent) sendLess(s *SessionRecord, req *model.Request) error {
	sent := 0
	for _, m := range req.Msgs {
		sent += model.Estimate(m)
	}
	s.budget = sent * 3 / 4
	a.log.Warn("the model's context window is smaller than estimated; sending less", "session", s.id, "tokens", s.budget)
	return a.fitContext(s, req)
}

// stopped reports whether the turn must end as cancelled: session/cancel
// or close, or the client has gone (stdin ended, stdout broke).
func (a *agent) stopped(ctx context.Context) bool {
	return ctx.Err() != nil || a.out.HungUp()
}

// errTurnCancelled ends a turn as cancelled (a permission request answered
// with the cancelled outcome).
var errTurnCancelled = errors.New("turn cancelled")
