// opening.go opens and ends the session: initialize's answer aside,
// session/new, load and resume (a client system prompt with them), the
// reattach, the session's record on disk and its replay, close and delete,
// list, the connection's end and shutdown.

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/events"
	"acpbridge/internal/mcp"
	"acpbridge/internal/model"
	"acpbridge/internal/store"
	"acpbridge/internal/tools"
)

// Why an opening or a turn was ended before its time.
var (
	errClosed     = errors.New("session/close")
	errConnection = errors.New("the connection's end (stdin closed, stdout broke, or a signal)")
)

// cancelOpening is what $/cancel_request does to a session/new, load or
// resume (whose box is b): running, its opening ends (a load fails, a new
// gives up starting its MCP servers); queued, it never opens, and the
// process is free for the next.
func (a *agent) cancelOpening(b *box, cancel context.CancelCauseFunc) cancelling {
	return func(running bool) {
		cancel(errCancelRequest)
		if !running {
			a.forget(b)
		}
	}
}

// forget clears the outlook of the session whose box is b, when it is
// still the one ahead: its opening failed, or it was closed.
func (a *agent) forget(b *box) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ahead.box == b {
		a.ahead = outlook{ending: a.ahead.ending, endsBy: a.ahead.endsBy}
	}
}

// checkRoots validates cwd and the additional directories: absolute paths
// of existing directories.
func checkRoots(cwd *string, extra []string) ([]string, error) {
	if cwd == nil {
		return nil, acp.InvalidParams("cwd", "required: the absolute path of the session's working directory")
	}
	roots := append([]string{*cwd}, extra...)
	for i, dir := range roots {
		field := "cwd"
		if i > 0 {
			field = fmt.Sprintf("additionalDirectories[%d]", i-1)
		}
		if !filepath.IsAbs(dir) {
			return nil, acp.InvalidParams(field, "%q is not an absolute path", dir)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, acp.InvalidParams(field, "%q does not exist", dir)
		}
		if !fi.IsDir() {
			return nil, acp.InvalidParams(field, "%q is not a directory", dir)
		}
		roots[i] = filepath.Clean(dir)
	}
	return roots, nil
}

// opening is what session/new, load and resume give, checked: the roots,
// the MCP servers and the client's system prompt (nil: none given).
type opening struct {
	roots        []string
	specs        []mcp.ServerSpec
	instructions *model.Instructions
}

func openingOf(p *acp.NewSessionParams) (opening, error) {
	roots, err := checkRoots(p.Cwd, p.AdditionalDirectories)
	if err != nil {
		return opening{}, err
	}
	specs, err := mcp.ParseServers(p.McpServers)
	if err != nil {
		return opening{}, err
	}
	in, err := instructionsOf(p.SystemPrompt)
	return opening{roots, specs, in}, err
}

// instructionsOf checks a client's system prompt: a mode acpbridge offers
// (append, override) and text blocks, at least one. Anything else is
// refused, as ACP asks, rather than applied some other way.
func instructionsOf(sp *acp.SystemPrompt) (*model.Instructions, error) {
	if sp == nil {
		return nil, nil
	}
	if sp.Mode != acp.SystemPromptAppend && sp.Mode != acp.SystemPromptOverride {
		return nil, acp.InvalidParams("systemPrompt.mode", "%q is not a mode acpbridge offers: use append or override", sp.Mode)
	}
	if len(sp.Content) == 0 {
		return nil, acp.InvalidParams("systemPrompt.content", "required: at least one text block")
	}
	var parts []string
	for i, raw := range sp.Content {
		var b struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &b) != nil || b.Type != "text" || b.Text == nil {
			return nil, acp.InvalidParams(fmt.Sprintf("systemPrompt.content[%d]", i), "a system prompt takes text blocks only ({\"type\":\"text\",\"text\":...})")
		}
		parts = append(parts, *b.Text)
	}
	return &model.Instructions{Text: strings.Join(parts, "\n\n"), Override: sp.Mode == acp.SystemPromptOverride}, nil
}

// instruct gives s the client's system prompt in and persists it, so that
// a load or resume without one applies it again.
func (a *agent) instruct(s *SessionRecord, in *model.Instructions) error {
	if in == nil {
		return nil
	}
	s.instructions = in
	mode := acp.SystemPromptAppend
	if in.Override {
		mode = acp.SystemPromptOverride
	}
	return s.file.Append(store.Record{Type: store.RecInstructions, PromptMode: mode, Text: in.Text})
}

// admitNew makes a new session the one ahead; its step creates it.
func (a *agent) admitNew(_ string, p *acp.NewSessionParams) admission {
	o, err := openingOf(p)
	if err != nil {
		return refuse(err)
	}
	id := a.newID("sess")
	b := newBox(acp.ModeAsk, a.defaultModel())
	ctx, cancel := context.WithCancelCause(context.Background())
	a.mu.Lock()
	err = a.claimLocked(acp.MethodSessionNew, id, b, cancel)
	a.mu.Unlock()
	if err != nil {
		cancel(nil)
		return refuse(err)
	}
	return queueCancellable(func() (any, error) {
		defer cancel(nil)
		return a.newSession(ctx, id, b, o)
	}, a.cancelOpening(b, cancel))
}

// newSession is session/new's step. A close or the connection's end while
// it runs (ctx) cuts its MCP servers' start short; the session is created
// all the same, and the close behind it closes it.
func (a *agent) newSession(ctx context.Context, id string, b *box, o opening) (any, error) {
	a.awaitSignals()
	a.awaitModels()
	if a.model != nil {
		if err := a.model.Resume(nil); err != nil {
			a.log.Warn("the model cannot start a new session", "err", err)
		}
	}
	s := &SessionRecord{id: id, box: b, ws: tools.Open(o.roots), created: a.now(), conv: model.NewConversation(a.model)}
	s.updated = s.created
	f, err := a.store.Create(infoOf(s))
	if err != nil {
		s.ws.Close()
		a.forget(b)
		return nil, err
	}
	s.file = f
	if err := a.instruct(s, o.instructions); err != nil {
		a.log.Error("the session's system prompt was not persisted", "session", s.id, "err", err)
	}
	a.live(ctx, s, o.specs)
	a.mu.Lock()
	if a.ahead.box == b {
		a.ahead.opening = nil
	}
	a.mu.Unlock()
	a.log.Info("session created", "session", s.id, "cwd", s.ws.Cwd)
	mode, model := b.settings()
	return acp.NewSessionResult{SessionID: s.id, Modes: modeStateOf(mode), ConfigOptions: a.configOptions(mode, model)}, nil
}

// live makes the opened record s the live one and starts its MCP servers;
// their start ends early when opening does (a close or the connection's
// end while they connect).
func (a *agent) live(opening context.Context, s *SessionRecord, specs []mcp.ServerSpec) {
	if err := s.box.attach(s.file); err != nil {
		a.log.Error("a setting changed while the session opened was not persisted", "session", s.id, "err", err)
	}
	s.mcp = mcp.Start(opening, specs, mcp.Options{Version: version, Procs: a.procs, StartTimeout: a.mcpStart, Env: a.childEnv, Log: a.log, Stderr: a.stderr})
	a.sess = s
}

// awaitSignals returns once SIGTERM, SIGINT and SIGHUP are caught, so that
// nothing a signal must end (a session, its turns, its children) begins
// before a signal can end it. Agents built by tests catch none.
func (a *agent) awaitSignals() {
	if a.caught != nil {
		<-a.caught
	}
}

// awaitModels lets a session's opening, on the loop, wait (briefly) for
// the model's first list of the models that can be chosen, so that the
// first session offers them; arrival never waits for it.
func (a *agent) awaitModels() {
	if m, ok := a.model.(interface{ AwaitModels() }); ok {
		m.AwaitModels()
	}
}

// admitOpen makes the session a session/load (replay true) or
// session/resume names the one ahead; its step opens it.
func (a *agent) admitOpen(replay bool) func(string, *acp.LoadSessionParams) admission {
	return func(id string, p *acp.LoadSessionParams) admission {
		o, err := openingOf(&p.NewSessionParams)
		if err != nil {
			return refuse(err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		b := newBox("", "")
		a.mu.Lock()
		method := acp.MethodSessionResume
		if replay {
			method = acp.MethodSessionLoad
		}
		if live := a.ahead; !replay && live.id == id && !live.closing && !live.ending {
			a.mu.Unlock()
			cancel(nil)
			// It touches nothing a running turn holds: withdrawn while
			// queued it answers -32800; running it is over at once.
			return queueCancellable(func() (any, error) { return a.reattach(id, live.box, o.instructions) }, func(bool) {})
		}
		err = a.claimLocked(method, id, b, cancel)
		a.mu.Unlock()
		if err != nil {
			return refuse(err)
		}
		return queueCancellable(func() (any, error) {
			defer cancel(nil)
			return a.openSession(ctx, id, b, o, replay)
		}, a.cancelOpening(b, cancel))
	}
}

// reattach is the step of a session/resume of the session live here
// (whose box is b): no second session and no history, its state as it is,
// but for a system prompt the resume gives.
func (a *agent) reattach(id string, b *box, in *model.Instructions) (any, error) {
	s := a.sess
	if s == nil || s.box != b {
		return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is no longer live in this process; open it with session/load or session/resume", id).
			WithData(map[string]string{"sessionId": id})
	}
	if err := a.instruct(s, in); err != nil {
		return nil, err
	}
	a.log.Info("session reattached", "session", id)
	mode, model := b.settings()
	return acp.OpenSessionResult{Modes: modeStateOf(mode), ConfigOptions: a.configOptions(mode, model)}, nil
}

// openSession is session/load's step (replay true) and session/resume's.
func (a *agent) openSession(ctx context.Context, id string, b *box, o opening, replay bool) (any, error) {
	a.awaitSignals()
	a.awaitModels()
	s := &SessionRecord{id: id, box: b, ws: tools.Open(o.roots)}
	err := a.restore(ctx, s, replay)
	if err == nil {
		err = a.instruct(s, o.instructions)
	}
	if err == nil {
		a.live(ctx, s, o.specs)
	}
	if ctx.Err() != nil {
		err = acp.Errorf(acp.CodeRequestCancelled, "loading session %s was ended by %v", id, context.Cause(ctx))
	}
	a.mu.Lock()
	if a.ahead.box == b {
		a.ahead.opening = nil
	}
	a.mu.Unlock()
	if err != nil {
		if a.sess == s {
			a.release()
		} else {
			s.ws.Close()
			if s.file != nil {
				s.file.Close()
			}
		}
		a.forget(b)
		return nil, err
	}
	a.log.Info("session opened", "session", s.id, "replay", replay, "cwd", s.ws.Cwd)
	mode, model := b.settings()
	return acp.OpenSessionResult{Modes: modeStateOf(mode), ConfigOptions: a.configOptions(mode, model)}, nil
}

// restore reads s from the store, takes its lock, and replays its history
// when asked. The roots of the request replace the stored ones.
func (a *agent) restore(ctx context.Context, s *SessionRecord, replay bool) error {
	conv := model.NewConversation(a.model)
	feed := newFeeder(conv, a.cfg.imageBudget)
	hist, f, err := a.store.Open(ctx, s.id, feed.add)
	if err != nil {
		return err
	}
	feed.finish()
	s.conv, s.file = conv, f
	a.resumeSettings(s, hist)
	if err := f.WriteInfo(infoOf(s)); err != nil {
		return err
	}
	if replay {
		err := f.Replay(hist.Good, func(rec store.Record) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return a.replayRecord(s.id, rec)
		})
		if err != nil {
			return err
		}
	}
	// The editor is told again how full the context is (the last usage).
	if u := hist.Usage; u != nil {
		s.cost = u.Cost
		return a.out.NotifyJSON(s.id, acp.Usage(u.Used, u.Size, u.Cost))
	}
	return nil
}

// resumeSettings gives s what its history says: created, title, updated,
// the model's state, and the mode, model (when this process has it)
// and rules, except a setting changed since the load arrived.
func (a *agent) resumeSettings(s *SessionRecord, hist *store.History) {
	s.created, s.title, s.updated = hist.Created, hist.Title, hist.Updated
	if r := hist.Instructions; r != nil {
		s.instructions = &model.Instructions{Text: r.Text, Override: r.PromptMode == acp.SystemPromptOverride}
	}
	if a.model != nil {
		if err := a.model.Resume(hist.ModelState); err != nil {
			a.log.Warn("the model cannot continue where the session stopped", "session", s.id, "err", err)
		}
	}
	model := a.defaultModel()
	if hist.Model != "" && a.model != nil && slices.Contains(a.model.Models(), hist.Model) {
		model = hist.Model
	}
	b := s.box
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mode = cmp.Or(b.mode, acp.Mode(hist.Mode), acp.ModeAsk)
	b.model = cmp.Or(b.model, model)
	for tool, allow := range hist.Rules {
		if _, set := b.rules[tool]; !set {
			b.rules[tool] = allow
		}
	}
}

// admitClose cancels the session's turn or its opening at once; its step
// frees the record once they have answered.
func (a *agent) admitClose(id string, _ *acp.SessionIDParams) admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, err := a.requireLocked(id)
	if err != nil {
		return refuse(err)
	}
	return queue(a.closeLocked(id, b))
}

// closeLocked begins closing the live session id (whose box is b): its
// opening or turn is ended now, and the step it returns frees it. a.mu is
// held.
func (a *agent) closeLocked(id string, b *box) func() (any, error) {
	a.ahead.closing = true
	if a.closing == nil {
		a.closing = map[string]int{}
	}
	a.closing[id]++
	if a.ahead.opening != nil {
		a.ahead.opening(errClosed)
		a.log.Info("session/close ends the opening of the session", events.Of(events.OpeningEnded), "session", id)
	}
	if a.ahead.turn != nil {
		a.ahead.turn.cancel()
	}
	return func() (any, error) {
		if s := a.sess; s != nil && s.box == b {
			a.release()
			a.log.Info("session closed", events.Of(events.SessionClosed), "session", id)
		}
		a.forget(b)
		a.mu.Lock()
		if a.closing[id]--; a.closing[id] <= 0 {
			delete(a.closing, id)
		}
		a.mu.Unlock()
		return struct{}{}, nil
	}
}

// release frees the live record and closes what it holds.
func (a *agent) release() {
	s := a.sess
	a.sess = nil
	s.mcp.Close()
	s.ws.Close()
	if err := s.file.Close(); err != nil {
		a.log.Error("closing session file", "session", s.id, "err", err)
	}
}

// admitDelete deletes a stored session at once; the session being closed
// is deleted by a step after its close, and the live one is closed (as
// session/close closes it), then deleted.
func (a *agent) admitDelete(id string, _ *acp.SessionIDParams) admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	remove := func() (any, error) {
		if err := a.store.Remove(id); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	}
	switch {
	case a.ahead.id == id && !a.ahead.closing && !a.ahead.ending:
		closeIt := a.closeLocked(id, a.ahead.box)
		return queue(func() (any, error) {
			closeIt()
			return remove()
		})
	case a.closing[id] > 0:
		return queue(remove) // after the close that frees it (close A; new B; delete A)
	case a.ahead.id == id:
		return refuse(errEnding(acp.MethodSessionDelete))
	}
	return answerOf(remove())
}

// exitWait bounds, from the hang-up, how long the connection's end waits
// for the loop to end the turn and free the session, so that the process
// exits within a second of EOF or a signal even when a tool will not stop.
// At EOF most of it is the wire holding the EOF back until the turn's
// answer is written (channel.EOFGrace); shutdown keeps at least
// releaseWait for the loop's last step.
const (
	exitWait    = 900 * time.Millisecond
	releaseWait = 100 * time.Millisecond
)

// hangUp is the part of the connection's end that acts at once: it stops
// admitting steps and cancels the turn and any opening load. The wire calls
// it when stdin ends; serve, when stdout breaks or a signal arrives.
func (a *agent) hangUp() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ahead.ending {
		a.ahead.ending = true
		a.ahead.endsBy = time.Now().Add(exitWait)
	}
	if a.ahead.opening != nil {
		a.ahead.opening(errConnection)
	}
	if a.ahead.turn != nil {
		a.ahead.turn.cancel()
	}
}

// shutdown ends the connection's session: after the steps queued before
// it (each cancelled by hangUp), the loop persists the turn and frees the
// record.
func (a *agent) shutdown() {
	a.out.CloseCalls() // no answer will come from the client now
	a.hangUp()
	done := make(chan struct{})
	a.steps.push(&step{last: true, run: func() (any, error) {
		if a.sess != nil {
			a.release()
		}
		close(done)
		return nil, nil
	}})
	a.steps.release()
	a.mu.Lock()
	wait := max(time.Until(a.ahead.endsBy), releaseWait)
	a.mu.Unlock()
	select {
	case <-done:
	case <-time.After(wait):
		a.log.Warn("the session did not wind down in time; exiting anyway")
	}
}

func (a *agent) listSessions(_ context.Context, _ string, p *acp.ListParams) (any, error) {
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return nil, acp.InvalidParams("cwd", "%q is not an absolute path", p.Cwd)
	}
	page, next, err := a.store.List(p.Cwd, p.Cursor)
	if err != nil {
		return nil, err
	}
	res := acp.ListResult{Sessions: make([]acp.SessionInfo, 0, len(page)), NextCursor: next}
	for _, inf := range page {
		res.Sessions = append(res.Sessions, acp.SessionInfo{SessionID: inf.SessionID, Cwd: inf.Cwd,
			AdditionalDirectories: inf.Dirs, Title: inf.Title, UpdatedAt: inf.UpdatedAt})
	}
	return res, nil
}

// replayRecord sends one stored record as the session/update a client saw
// when it happened.
func (a *agent) replayRecord(sessionID string, rec store.Record) error {
	switch rec.Type {
	case store.RecUser:
		for _, b := range rec.Blocks {
			if err := a.out.NotifyJSON(sessionID, acp.UserMessage(b, rec.MessageID)); err != nil {
				return err
			}
		}
	case store.RecAgent, store.RecThought:
		kind := acp.UpdateMessage
		if rec.Type == store.RecThought {
			kind = acp.UpdateThought
		}
		return a.out.Notify(acp.MethodSessionUpdate, acp.AppendChunkUpdate(nil, sessionID, kind, rec.MessageID, rec.Text))
	case store.RecToolCall:
		return a.out.NotifyJSON(sessionID, acp.ToolCallStart(rec.ToolCallID, callName(rec.Call), rec.Title, acp.ToolKind(rec.Kind), rec.Locations, rawInput(rec.Call)))
	case store.RecPlan:
		return a.out.NotifyJSON(sessionID, acp.Plan(rec.Plan))
	case store.RecToolResult:
		return a.out.NotifyJSON(sessionID, acp.ToolCallProgress(rec.ToolCallID, acp.ToolStatus(rec.Status), replayedContent(rec), rec.RawOutput))
	}
	return nil
}

// replayedContent is a tool result's content as a load shows it: a
// terminal was released in the process that ran the command, so its
// output, kept in the log, is shown as text.
func replayedContent(rec store.Record) json.RawMessage {
	if bytes.Contains(rec.Content, []byte(`"type":"terminal"`)) {
		return acp.MustJSON([]acp.ToolContent{acp.TextOut(rec.Result)})
	}
	return rec.Content
}

func callName(c *store.Call) string {
	if c == nil {
		return ""
	}
	return c.Name
}

func rawInput(c *store.Call) json.RawMessage {
	if c == nil {
		return nil
	}
	return c.Input
}

// infoOf is what <id>.json holds for s.
func infoOf(s *SessionRecord) store.Info {
	return store.Info{SessionID: s.id, Cwd: s.ws.Cwd, Dirs: s.ws.Roots[1:], Title: s.title,
		CreatedAt: store.Stamp(s.created), UpdatedAt: store.Stamp(s.updated)}
}
