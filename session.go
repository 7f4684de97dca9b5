// session.go holds the agent, its one optional SessionRecord, the agent
// loop, and every session method: initialize, session/new, load, resume,
// list, delete, close, prompt, cancel, set_mode and set_config_option.
//
// One record, one loop:
//   - At most one *SessionRecord exists (a.sess). Only the agent loop, one
//     goroutine, creates, runs and frees it.
//   - Every step that opens, runs or ends the session (session/new, load,
//     resume, prompt, close, a delete of the session being closed, and
//     shutdown at EOF or a signal) runs on the loop, one at a time, in
//     arrival order. The loop hands the step's result to the request's jrpc2
//     handler and waits until jrpc2 has written that answer before it starts
//     the next step. No step waits on another request.
//   - What must overtake a running step acts at arrival, on the goroutine
//     that reads stdin, and never waits on the loop: session/cancel,
//     set_mode and set_config_option (they change the running turn's next
//     decision), the client's answers to the agent's requests, every refusal
//     (a second session: 1001, a second prompt: 1003, ...) and the
//     cancelling part of session/close, EOF and signals.
//   - To refuse and route at arrival there is an outlook: what the queued
//     steps will make true (which session will be live, its settings box,
//     its admitted turn, whether a close of it is queued). The reader
//     updates it at arrival, the loop as a step ends or fails, hangUp at
//     the connection's end. The box is
//     the one thing a turn shares with arrival: mode, model and rules under
//     one small mutex. `load X; set_mode X; prompt X` in one write: the
//     set_mode changes X's box at arrival, the load step's record takes the
//     box, and the prompt runs with the mode.
//
// A record's fields have two owners: the loop (which also runs the turn)
// writes every field but the box, which guards itself.

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/creachadair/jrpc2/handler"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/events"
	"acpbridge/internal/mcp"
	"acpbridge/internal/model"
	"acpbridge/internal/proc"
	"acpbridge/internal/store"
	"acpbridge/internal/tools"
)

// agent serves one connection.
type agent struct {
	cfg      config
	out      *channel.Wire
	model    model.Model     // nil when no model is configured or it is not usable
	modelErr error           // why --model's model is not usable, or nil
	recorder *model.Recorder // --record, or nil
	store    *store.Store
	log      *slog.Logger
	stderr   io.Writer // where child processes' stderr goes
	newID    func(prefix string) string
	now      func() time.Time
	caught   <-chan struct{} // closed once signals are caught (main's catchSignals), or nil
	procs    *proc.Guard     // starts and ends child processes; nil in in-process tests
	childEnv []string        // the environment of commands and stdio MCP servers
	key      string          // the provider's key, redacted from what tools return

	steps agentLoop      // the steps in arrival order
	sess  *SessionRecord // the loop's: the one session, or nil

	// a.mu guards what arrival decides and the loop reports back.
	mu          sync.Mutex
	initialized bool
	client      acp.ClientCapabilities
	ahead       outlook
	closing     map[string]int // sessions a queued session/close will free, by id: their delete waits for it
}

// SessionRecord is the one session this process serves. The agent loop
// owns every field but box, which a turn shares with arrival.
type SessionRecord struct {
	id      string
	ws      *tools.Workspace // the cwd, then the additional directories
	box     *box
	mcp     *mcp.Hub
	file    *store.File
	conv    *model.Conversation // what the model is sent
	title   string
	created time.Time
	updated time.Time

	instructions *model.Instructions // the client's system prompt, or nil

	budget int      // a context budget lower than --max-context-tokens, learnt from the provider, or 0
	cost   *float64 // what the session has cost (USD), where the provider reports it
	told   told     // what the user was told of what the model is not sent
	enc    []byte   // scratch for encoding the turn's tool updates
}

// told is what the user was told, in this process, of what the model is
// not sent.
type told struct {
	trim   model.Trim // the last trim reported
	images bool       // older images are left out of requests
}

// box is a session's settings: the running turn reads them at each
// decision, and set_mode and set_config_option change them at arrival.
type box struct {
	mu      sync.Mutex
	mode    acp.Mode        // "" until the session's opening sets it
	model   string          // the model its turns call; "" until set
	rules   map[string]bool // tool name → allow (true) or reject (false) always
	file    *store.File     // where a change is persisted, once the session is open
	unsaved []store.Record  // changes made before it was
}

func newBox(mode acp.Mode, model string) *box {
	return &box{mode: mode, model: model, rules: map[string]bool{}}
}

// settings returns the mode and the model.
func (b *box) settings() (acp.Mode, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mode, b.model
}

// rule returns the mode and the "always" rule for a tool, if there is one.
func (b *box) rule(tool string) (mode acp.Mode, allow, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	allow, ok = b.rules[tool]
	return b.mode, allow, ok
}

// change applies a setting (rec's mode, model or rule) and persists it, now
// or once the session is open; it returns the settings after it.
func (b *box) change(rec store.Record) (acp.Mode, string, error) {
	b.mu.Lock()
	switch {
	case rec.Type == store.RecRule:
		b.rules[rec.Tool] = *rec.Allow
	case rec.Mode != "":
		b.mode = acp.Mode(rec.Mode)
	default:
		b.model = rec.Model
	}
	mode, model, f := b.mode, b.model, b.file
	if f == nil {
		b.unsaved = append(b.unsaved, rec)
	}
	b.mu.Unlock()
	if f == nil {
		return mode, model, nil
	}
	if rec.Type == store.RecRule {
		return mode, model, f.Append(rec)
	}
	return mode, model, f.AppendNow(rec)
}

// attach gives the box the open session's file and writes what changed
// before it was open.
func (b *box) attach(f *store.File) error {
	b.mu.Lock()
	b.file = f
	unsaved := b.unsaved
	b.unsaved = nil
	b.mu.Unlock()
	var err error
	for _, rec := range unsaved {
		err = errors.Join(err, f.Append(rec))
	}
	return err
}

// outlook is what the steps queued so far will make true, as arrival
// needs it to refuse and route; guarded by a.mu.
type outlook struct {
	id      string                  // the session that will be live, or ""
	box     *box                    // its settings
	opening context.CancelCauseFunc // ends its load or resume while that is queued or running
	turn    *turn                   // its admitted prompt's turn, until the turn ends
	closing bool                    // a session/close of it is queued
	ending  bool                    // the connection is ending: no step is admitted
	endsBy  time.Time               // set with ending: shutdown waits for the loop until then
}

// turn is one admitted session/prompt.
type turn struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newTurn() *turn {
	ctx, cancel := context.WithCancel(context.Background())
	return &turn{ctx: ctx, cancel: cancel}
}

// running reports whether the turn has not been cancelled.
func (t *turn) running() bool { return t != nil && t.ctx.Err() == nil }

// Why an opening or a turn was ended before its time.
var (
	errClosed     = errors.New("session/close")
	errConnection = errors.New("the connection's end (stdin closed, stdout broke, or a signal)")
)

// --- the agent loop ---

// step is one request the loop runs and answers.
type step struct {
	reqID     string // the request's id, or "" for shutdown
	run       func() (any, error)
	cancel    cancelling // what $/cancel_request does to it, or nil: nothing
	big       bool       // its params were over bigRequest bytes
	last      bool       // the loop ends after it (shutdown)
	withdrawn bool       // $/cancel_request came before it ran: it answers -32800 instead
}

// cancelling is what $/cancel_request does to a step: running, it stops
// it as session/cancel or close would; queued, it undoes what the step's
// admission claimed (the loop then answers -32800 and never runs it).
// Called on the reading goroutine.
type cancelling func(running bool)

// bigRequest is the size of params past which a step's memory is given
// back to the system once its answer is written: the copies a huge prompt
// made on its way in would otherwise stay with the process for its life.
const bigRequest = 4 << 20

// agentLoop is the queue of steps in arrival order.
//
// The loop writes each step's answer itself (Wire.Send returns once it is
// written), so a queued step holds nothing but its place in the queue: no
// goroutine, no jrpc2 handler slot. However many steps one write brings,
// the running one needs nothing a queued one holds.
type agentLoop struct {
	mu      sync.Mutex
	held    []*step          // queued by the read still arriving
	queue   []*step          // ready to run
	queued  map[string]*step // steps not yet run, by request id ($/cancel_request)
	running *step            // the step the loop runs, until its answer is written
	wake    chan struct{}    // a step was queued
}

func (l *agentLoop) init() {
	l.queued = map[string]*step{}
	l.wake = make(chan struct{}, 1)
}

// push queues a step; it runs once release has been called: a step does
// not start while messages that arrived with it are still arriving (a
// cancel written together with its prompt must find the turn not begun).
func (l *agentLoop) push(st *step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = append(l.held, st)
	if st.reqID != "" {
		l.queued[st.reqID] = st
	}
}

// release lets the steps pushed so far run; the wire calls it once every
// line of a read has arrived.
func (l *agentLoop) release() {
	l.mu.Lock()
	l.queue = append(l.queue, l.held...)
	l.held = nil
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// pop waits for the next step and returns what it is to run.
func (l *agentLoop) pop() (*step, func() (any, error)) {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			st := l.queue[0]
			l.queue[0] = nil // a step (a prompt's blocks, say) is not kept past its run
			l.queue = l.queue[1:]
			delete(l.queued, st.reqID)
			l.running = st
			run := st.run
			if st.withdrawn {
				run = func() (any, error) {
					return nil, acp.Errorf(acp.CodeRequestCancelled, "the request was cancelled ($/cancel_request) before it ran")
				}
			}
			l.mu.Unlock()
			return st, run
		}
		l.mu.Unlock()
		<-l.wake
	}
}

// done is the end of the running step: its answer is written.
func (l *agentLoop) done() {
	l.mu.Lock()
	l.running = nil
	l.mu.Unlock()
}

// cancelRequest is $/cancel_request of reqID at arrival: a running step is
// stopped, a queued one withdrawn; an answered or unknown id, or a step
// that cannot be cancelled, is left alone.
func (l *agentLoop) cancelRequest(reqID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.running; st != nil && st.reqID == reqID && st.cancel != nil {
		st.cancel(true)
		return
	}
	if st := l.queued[reqID]; st != nil && st.cancel != nil && !st.withdrawn {
		st.withdrawn = true
		st.cancel(false)
	}
}

// runLoop is the agent loop: it runs each step and writes its answer
// before the next; it returns after the shutdown step.
func (a *agent) runLoop() {
	for {
		st, run := a.steps.pop()
		res, err := a.runStep(st.reqID, run)
		if st.reqID != "" {
			a.out.Send(encodeResponse(st.reqID, res, err))
		}
		a.steps.done()
		if st.last {
			return
		}
		if st.big {
			st, run, res = nil, nil, nil // the step holds the request (its params, its blocks)
			debug.FreeOSMemory()
		}
	}
}

// runStep runs a step's function and turns a panic into its error.
func (a *agent) runStep(reqID string, run func() (any, error)) (res any, err error) {
	defer func() {
		if e := a.panicked("request "+reqID, recover()); e != nil {
			res, err = nil, e
		}
	}()
	return run()
}

// panicked is the one panic guard: p, recovered in what (a step, an
// admission, a handler), logged with its stack and made the request's
// internal error, so that a bug ends one request, not the process. Nil
// when nothing panicked.
func (a *agent) panicked(what string, p any) error {
	if p == nil {
		return nil
	}
	a.log.Error("panic", "in", what, "panic", p, "stack", string(debug.Stack()))
	return acp.Errorf(acp.CodeInternal, "internal error in %s: %v (a bug in acpbridge; the process keeps serving)", what, p)
}

// notAStep is the jrpc2 handler of a method arrival queues, which jrpc2
// sees only when it came as a notification: it has nobody to answer.
func (a *agent) notAStep(ctx context.Context, req *jrpc2.Request) (any, error) {
	return nil, acp.Errorf(jrpc2.InvalidRequest, "%s must be a request, not a notification", req.Method())
}

// --- arrival ---

// admission is what arrival decided for a request: answer it now (result
// or err), or run a step on the loop.
type admission struct {
	result any
	err    error
	run    func() (any, error)
	cancel cancelling // what $/cancel_request does to the step, or nil
}

func refuse(err error) admission              { return admission{err: err} }
func answerNow(result any) admission          { return admission{result: result} }
func queue(run func() (any, error)) admission { return admission{run: run} }

// queueCancellable is queue for a step that $/cancel_request can cancel.
func queueCancellable(run func() (any, error), cancel cancelling) admission {
	return admission{run: run, cancel: cancel}
}

// handlers is the dispatch table: every ACP method acpbridge serves.
func (a *agent) handlers() handler.Map {
	m := handler.Map{
		acp.MethodAuthenticate:  a.guard(a.authenticate),
		acp.MethodSessionList:   a.guard(a.session(handle(a.listSessions))),
		acp.MethodCancelRequest: a.guard(a.cancelRequestHandler),
	}
	for _, method := range arrivalMethods {
		m[method] = a.guard(a.notAStep)
	}
	return m
}

// arrivalMethods are the methods decided at arrival.
var arrivalMethods = []string{
	acp.MethodInitialize, acp.MethodSessionNew, acp.MethodSessionLoad, acp.MethodSessionResume,
	acp.MethodSessionClose, acp.MethodSessionPrompt, acp.MethodSessionCancel, acp.MethodSessionDelete,
	acp.MethodSessionSetMode, acp.MethodSessionSetConfigOption,
}

// arrive decides one message, in arrival order (the wire calls it on the
// reading goroutine). It returns the response to write at once when the
// answer is decided; or it queues the request's step, whose answer the
// loop writes (taken); otherwise the request goes on to jrpc2.
// session/cancel acts here and answers nothing. A request method sent as
// a notification is not admitted: it has nobody to answer.
func (a *agent) arrive(method, id string, params json.RawMessage) (answer []byte, taken bool) {
	if method == acp.MethodCancelRequest {
		a.cancelRequest(params)
		return nil, id == "" // sent as a request, it goes on to jrpc2, which answers
	}
	if id == "" && method != acp.MethodSessionCancel {
		return nil, false
	}
	adm, ok := a.safeAdmit(method, id, params)
	if !ok || id == "" {
		return nil, false
	}
	if adm.run == nil {
		if len(params) > bigRequest {
			// Refused at arrival: the loop gives the copies its params
			// made back to the system, as after a big step.
			a.steps.push(&step{run: func() (any, error) { return nil, nil }, big: true})
		}
		return encodeResponse(id, adm.result, adm.err), true
	}
	a.steps.push(&step{reqID: id, run: adm.run, cancel: adm.cancel, big: len(params) > bigRequest})
	return nil, true
}

// safeAdmit admits a message and turns a panic into the request's error;
// ok is false for a method not decided at arrival.
func (a *agent) safeAdmit(method, id string, params json.RawMessage) (adm admission, ok bool) {
	defer func() {
		if err := a.panicked(method, recover()); err != nil {
			adm, ok = refuse(err), true
		}
	}()
	switch method {
	case acp.MethodInitialize:
		return typed(params, a.admitInitialize), true
	case acp.MethodSessionCancel:
		return typed(params, a.admitCancel), true
	}
	if !slices.Contains(arrivalMethods, method) {
		return admission{}, false
	}
	a.mu.Lock()
	initialized := a.initialized
	a.mu.Unlock()
	if !initialized {
		return refuse(errNotInitialized(method)), true
	}
	switch method {
	case acp.MethodSessionNew:
		return typed(params, a.admitNew), true
	case acp.MethodSessionLoad:
		return typed(params, a.admitOpen(true)), true
	case acp.MethodSessionResume:
		return typed(params, a.admitOpen(false)), true
	case acp.MethodSessionClose:
		return typed(params, a.admitClose), true
	case acp.MethodSessionPrompt:
		return typed(params, a.admitPrompt), true
	case acp.MethodSessionDelete:
		return typed(params, a.admitDelete), true
	case acp.MethodSessionSetMode:
		return typed(params, a.admitSetMode), true
	default: // acp.MethodSessionSetConfigOption
		return typed(params, a.admitSetConfig), true
	}
}

// encodeResponse is the response to request id, as jrpc2 would write it.
func encodeResponse(id string, result any, err error) []byte {
	if err != nil {
		return channel.EncodeResponse(id, nil, wireError(err))
	}
	return channel.EncodeResponse(id, result, nil)
}

// guard turns a panic into an internal error and every error into a
// *jrpc2.Error, so that no handler can end the process or leak jrpc2's codes.
func (a *agent) guard(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (res any, err error) {
		defer func() {
			if e := a.panicked(req.Method(), recover()); e != nil {
				res, err = nil, e
			}
		}()
		res, err = h(ctx, req)
		if err != nil {
			err = wireError(err)
		}
		return res, err
	}
}

// session requires initialize first.
func (a *agent) session(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		a.mu.Lock()
		ok := a.initialized
		a.mu.Unlock()
		if !ok {
			return nil, errNotInitialized(req.Method())
		}
		return h(ctx, req)
	}
}

// withSession is params that name a session: its sessionId is required.
type withSession interface{ Session() *string }

// typed decodes params into a P (a wrong field is named) and, when P names
// a session, requires its sessionId; then it admits them.
func typed[P any](raw json.RawMessage, admit func(sessionID string, p *P) admission) admission {
	p, sid, err := decodeTyped[P](raw)
	if err != nil {
		return refuse(err)
	}
	return admit(sid, p)
}

// handle decodes params as typed does, for the methods jrpc2 runs as they
// come (list).
func handle[P any](h func(ctx context.Context, sessionID string, p *P) (any, error)) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		var raw json.RawMessage
		if req.HasParams() {
			if err := req.UnmarshalParams(&raw); err != nil {
				return nil, acp.Errorf(acp.CodeInvalidParams, "invalid params: %v", err)
			}
		}
		p, sid, err := decodeTyped[P](raw)
		if err != nil {
			return nil, err
		}
		return h(ctx, sid, p)
	}
}

func decodeTyped[P any](raw json.RawMessage) (*P, string, error) {
	p := new(P)
	if err := decodeRaw(raw, p); err != nil {
		return nil, "", err
	}
	if ws, ok := any(p).(withSession); ok {
		id, err := required("sessionId", ws.Session())
		return p, id, err
	}
	return p, "", nil
}

// --- opening a session ---

func (a *agent) admitInitialize(_ string, p *acp.InitializeParams) admission {
	a.mu.Lock()
	a.initialized = true
	a.client = p.ClientCapabilities
	a.mu.Unlock()
	return answerNow(acp.AgentInitializeResult(version))
}

// errSessionLive is the one-session rule's rejection.
func errSessionLive(id string) error {
	return acp.Errorf(acp.CodeSessionLive,
		"acpbridge serves one session per process and session %s is live here; close it with session/close, or start another acpbridge process for another conversation (for an editor that opens several threads on one agent, run acpbridge --fanout)", id).
		WithData(map[string]string{"activeSessionId": id})
}

// errEnding refuses a step that arrives while the connection ends.
func errEnding(method string) error {
	return acp.Errorf(acp.CodeRequestCancelled, "%s was not run: the agent is shutting down", method)
}

// claimLocked makes id the session that will be live, with box, or
// refuses: one session at a time, though one may follow a session being
// closed. a.mu is held.
func (a *agent) claimLocked(method, id string, b *box, opening context.CancelCauseFunc) error {
	switch {
	case a.ahead.ending:
		return errEnding(method)
	case a.ahead.id != "" && !a.ahead.closing:
		return errSessionLive(a.ahead.id)
	}
	a.ahead = outlook{id: id, box: b, opening: opening}
	return nil
}

// errCancelRequest ends an opening: the client cancelled its request.
var errCancelRequest = errors.New("$/cancel_request")

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

// requireLocked returns the box of session id when it is (or will be)
// live and not closing, or the error that answers a request naming it.
// a.mu is held.
func (a *agent) requireLocked(id string) (*box, error) {
	switch {
	case id != "" && a.ahead.id == id && !a.ahead.closing:
		return a.ahead.box, nil
	case a.ahead.id == "" || a.ahead.closing:
		return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is not live in this process (no session is); open it with session/load or session/resume, or create one with session/new", id).
			WithData(map[string]string{"sessionId": id})
	}
	return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is not live in this process; the live session is %s", id, a.ahead.id).
		WithData(map[string]string{"sessionId": id, "activeSessionId": a.ahead.id})
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
	s.mcp = mcp.Start(opening, specs, mcp.Options{Version: version, Procs: a.procs, Env: a.childEnv, Log: a.log, Stderr: a.stderr})
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

// --- closing and deleting ---

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
		a.log.Info("session/close ends the opening of the session", events.Of("opening_ended"), "session", id)
	}
	if a.ahead.turn != nil {
		a.ahead.turn.cancel()
	}
	return func() (any, error) {
		if s := a.sess; s != nil && s.box == b {
			a.release()
			a.log.Info("session closed", events.Of("session_closed"), "session", id)
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

func answerOf(result any, err error) admission { return admission{result: result, err: err} }

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

// --- turns ---

// admitPrompt admits a turn: from here on a session/cancel or close that
// arrives applies to it, even before its step runs. A prompt that arrives
// while its session is still opening runs after the opening; one that
// arrives while a cancelled turn winds down runs after it; one that arrives
// while a turn runs is refused (1003).
func (a *agent) admitPrompt(id string, p *acp.PromptParams) admission {
	if n := len(p.Prompt); n > a.cfg.maxPromptBlocks {
		return refuse(acp.InvalidParams("prompt", "has %d content blocks; acpbridge takes at most %d in one prompt (--max-prompt-blocks): join the text blocks", n, a.cfg.maxPromptBlocks))
	}
	blocks, err := parsePrompt(p.Prompt)
	if err == nil && a.model == nil {
		err = a.errNoModel()
	}
	if err != nil {
		return refuse(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b, err := a.requireLocked(id)
	switch {
	case err != nil:
		return refuse(err)
	case a.ahead.ending:
		return refuse(errEnding(acp.MethodSessionPrompt))
	case a.ahead.turn.running():
		return refuse(acp.Errorf(acp.CodeTurnRunning,
			"a turn is already running in session %s; wait for its response or cancel it with session/cancel before sending another prompt", id))
	}
	t := newTurn()
	a.ahead.turn = t
	return queueCancellable(func() (any, error) { return a.prompt(id, b, t, blocks, p.Prompt) }, func(running bool) {
		t.cancel()
		if !running {
			a.mu.Lock()
			if a.ahead.turn == t {
				a.ahead.turn = nil
			}
			a.mu.Unlock()
		}
	})
}

// prompt is session/prompt's step: it runs the turn t in the live session.
func (a *agent) prompt(id string, b *box, t *turn, blocks []acp.ContentBlock, raw []json.RawMessage) (any, error) {
	defer func() {
		t.cancel()
		a.mu.Lock()
		if a.ahead.turn == t {
			a.ahead.turn = nil
		}
		a.mu.Unlock()
	}()
	s := a.sess
	if s == nil || s.box != b {
		return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s did not open, so the prompt was not run; open it again with session/load or session/resume", id).
			WithData(map[string]string{"sessionId": id})
	}
	stop, err := a.runTurn(t.ctx, s, blocks, raw)
	if err != nil {
		return nil, err
	}
	return acp.PromptResult{StopReason: stop}, nil
}

// admitCancel cancels the session's turn, admitted or running. It is a
// notification: it acts at arrival and answers nothing.
func (a *agent) admitCancel(id string, _ *acp.SessionIDParams) admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ahead.id == id && a.ahead.turn != nil {
		a.ahead.turn.cancel()
	}
	return answerNow(nil)
}

// errNoModel answers a prompt when no model is configured or --model's is
// not usable.
func (a *agent) errNoModel() error {
	if a.modelErr != nil {
		fix := "--model (replay:PATH of an existing fixture, or openai:MODEL)"
		if strings.Contains(a.modelErr.Error(), "--base-url") {
			fix = "--base-url (an http:// or https:// URL, such as http://localhost:11434/v1)"
		}
		return acp.Errorf(acp.CodeNoModel, "acpbridge cannot use its model: %v. Fix %s in the agent's command and start it again", a.modelErr, fix)
	}
	return acp.Errorf(acp.CodeNoModel,
		"no model is configured: start acpbridge with --model openai:MODEL (with OPENAI_API_KEY, and --base-url for Ollama and other servers) or --model replay:FIXTURE.jsonl, or set ACPBRIDGE_MODEL")
}

// --- modes and config options ---

var sessionModes = []acp.SessionMode{
	{ID: acp.ModeAsk, Name: "Ask", Description: "Ask before every edit, command and MCP tool that changes things"},
	{ID: acp.ModeAcceptEdits, Name: "Accept edits", Description: "Edit files without asking; ask before commands and MCP tools"},
	{ID: acp.ModeReadOnly, Name: "Read only", Description: "Refuse edits, commands and MCP tools that change things"},
	{ID: acp.ModeBypass, Name: "Bypass", Description: "Never ask"},
}

func modeStateOf(mode acp.Mode) *acp.ModeState {
	return &acp.ModeState{CurrentModeID: mode, AvailableModes: sessionModes}
}

// defaultModel is the model a new session starts on: --model's.
func (a *agent) defaultModel() string {
	if a.model == nil {
		return ""
	}
	return a.model.DefaultName()
}

// configOptions lists the session's config options with current values.
// The model list may be asked of the server.
func (a *agent) configOptions(mode acp.Mode, model string) []acp.ConfigOption {
	modes := make([]acp.SelectOption, len(sessionModes))
	for i, m := range sessionModes {
		modes[i] = acp.SelectOption{Value: string(m.ID), Name: m.Name, Description: m.Description}
	}
	opts := []acp.ConfigOption{{
		ID: "mode", Name: "Mode", Category: "mode", Type: "select",
		Description: "When acpbridge asks before using a tool", CurrentValue: string(mode), Options: modes,
	}}
	if a.model != nil {
		var models []acp.SelectOption
		for _, m := range a.model.Models() {
			models = append(models, acp.SelectOption{Value: m, Name: m})
		}
		opts = append(opts, acp.ConfigOption{
			ID: "model", Name: "Model", Category: "model", Type: "select",
			CurrentValue: model, Options: models,
		})
	}
	return opts
}

// setting is one change of a session's settings: a mode or a model.
type setting struct {
	field string // the params member that gave it, for errors
	mode  acp.Mode
	model string
}

func (a *agent) admitSetMode(id string, p *acp.SetModeParams) admission {
	mode, err := required("modeId", p.ModeID)
	if err != nil {
		return refuse(err)
	}
	if _, err := a.change(id, setting{field: "modeId", mode: acp.Mode(mode)}); err != nil {
		return refuse(err)
	}
	return answerNow(struct{}{})
}

func (a *agent) admitSetConfig(id string, p *acp.SetConfigParams) admission {
	cid, err := required("configId", p.ConfigID)
	if err != nil {
		return refuse(err)
	}
	var value string
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return refuse(acp.InvalidParams("value", "required: a string value id"))
	}
	var set setting
	switch cid {
	case "mode":
		set = setting{field: "value", mode: acp.Mode(value)}
	case "model":
		set = setting{field: "value", model: value}
	default:
		return refuse(acp.InvalidParams("configId", "unknown config option %q; the options are mode and model", cid))
	}
	opts, err := a.change(id, set)
	if err != nil {
		return refuse(err)
	}
	return answerNow(acp.ConfigOptionsResult{ConfigOptions: opts})
}

// change sets the session's mode or model at arrival, so that the running
// turn's next decision and a prompt behind it use it; it is announced and
// persisted (once the session is open, if it is still opening). It
// returns the config options after the change.
func (a *agent) change(id string, set setting) ([]acp.ConfigOption, error) {
	a.mu.Lock()
	b, err := a.requireLocked(id)
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rec := store.Record{Type: store.RecConfig}
	if set.mode != "" {
		if !slices.ContainsFunc(sessionModes, func(m acp.SessionMode) bool { return m.ID == set.mode }) {
			return nil, acp.InvalidParams(set.field, "unknown mode %q; the modes are ask, accept_edits, read_only and bypass", set.mode)
		}
		rec.Mode = string(set.mode)
	} else {
		var names []string
		if a.model != nil {
			names = a.model.Models()
		}
		if !slices.Contains(names, set.model) {
			return nil, acp.InvalidParams(set.field, "unknown model %q; the models are %s", set.model, strings.Join(names, ", "))
		}
		rec.Model = set.model
	}
	mode, model, err := b.change(rec)
	opts := a.configOptions(mode, model)
	var sent error
	if set.mode != "" {
		sent = a.out.NotifyJSON(id, acp.CurrentMode(mode))
	}
	sent = errors.Join(sent, a.out.NotifyJSON(id, acp.ConfigOptionsChanged(opts)))
	if sent != nil {
		// The setting holds: the answer says so. A notification fails only
		// when the client stopped reading, and then no answer reaches it.
		a.log.Warn("the client was not told of the changed setting", "session", id, "err", sent)
	}
	return opts, err // the setting holds in this process; the log failed
}

// --- the rest ---

// cancelRequest is $/cancel_request {requestId} at arrival: a running
// prompt ends cancelled, a running load or resume fails -32800; a queued
// prompt, session/new, load or resume is answered -32800 and never runs.
// Every other request is answered at arrival or cannot be withdrawn (a
// close acts at arrival); an answered or unknown id changes nothing.
func (a *agent) cancelRequest(params json.RawMessage) {
	if id := acp.CancelledRequest(params); id != nil {
		a.steps.cancelRequest(string(id))
	}
}

// cancelRequestHandler answers a $/cancel_request sent as a request: it is
// a notification, and has acted at arrival.
func (a *agent) cancelRequestHandler(ctx context.Context, req *jrpc2.Request) (any, error) {
	return nil, nil
}

// parsePrompt checks every block of a prompt.
func parsePrompt(raw []json.RawMessage) ([]acp.ContentBlock, error) {
	if raw == nil {
		return nil, acp.InvalidParams("prompt", "required: an array of content blocks")
	}
	blocks := make([]acp.ContentBlock, len(raw))
	images := 0
	for i, r := range raw {
		field := fmt.Sprintf("prompt[%d]", i)
		if err := json.Unmarshal(r, &blocks[i]); err != nil {
			return nil, acp.InvalidParams(field, "not a content block: %v", err)
		}
		if err := checkBlock(field, &blocks[i]); err != nil {
			return nil, err
		}
		if images += imageBytes(&blocks[i]); images > promptImageMaxBytes {
			return nil, acp.InvalidParams(field, "brings the prompt's images to more than %d MiB, the most acpbridge sends in one prompt: send fewer or smaller images", promptImageMaxBytes>>20)
		}
	}
	return blocks, nil
}

// The limits on images: one image at most imageMaxBytes decoded (the large
// hosted models' own limit), a prompt's images at most promptImageMaxBytes.
const (
	imageMaxBytes       = 20 << 20
	promptImageMaxBytes = 50 << 20
)

// checkImage refuses an image block (field names it) without a MIME type,
// without data or a uri, whose data is not base64, or that is too large.
// The data is checked as it streams through the decoder: no decoded copy
// is made.
func checkImage(field string, b *acp.ContentBlock) error {
	switch {
	case !strings.HasPrefix(b.MimeType, "image/"):
		return acp.InvalidParams(field+".mimeType", "an image needs its MIME type (image/png, image/jpeg, ...), not %q", b.MimeType)
	case b.Data == "" && b.URI == "":
		return acp.InvalidParams(field, "an image needs data (base64) or a uri")
	case b.Data == "":
		return nil
	}
	// The size follows from the length: an image too large is refused
	// before its data is read.
	if n := imageBytes(b); n > imageMaxBytes {
		return acp.InvalidParams(field, "is a %.1f MiB image; acpbridge sends images of at most %d MiB: scale it down or crop it", float64(n)/(1<<20), imageMaxBytes>>20)
	}
	if _, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(b.Data))); err != nil {
		return acp.InvalidParams(field+".data", "is not valid base64 (%v); send the image's bytes base64-encoded (RFC 4648, standard alphabet, with padding)", err)
	}
	return nil
}

// imageBytes is the decoded size of an image block's data, or 0.
func imageBytes(b *acp.ContentBlock) int {
	if b.Type != "image" || b.Data == "" {
		return 0
	}
	return base64.StdEncoding.DecodedLen(len(b.Data)) - strings.Count(b.Data[max(0, len(b.Data)-2):], "=")
}

// promptImages are a prompt's images, as the model is sent them.
func promptImages(blocks []acp.ContentBlock) []model.Image {
	var out []model.Image
	for _, b := range blocks {
		if b.Type == "image" {
			out = append(out, model.Image{MimeType: b.MimeType, Data: b.Data, URI: b.URI})
		}
	}
	return out
}

// checkBlock refuses a prompt's content block (field names it) that lacks
// what its type needs, or whose type acpbridge does not take.
func checkBlock(field string, b *acp.ContentBlock) error {
	switch b.Type {
	case "text":
		if b.Text == nil {
			return acp.InvalidParams(field+".text", "required for a text block")
		}
	case "resource_link":
		if b.URI == "" || b.Name == "" {
			return acp.InvalidParams(field, "a resource_link needs uri and name")
		}
	case "resource":
		if b.Resource == nil || b.Resource.URI == "" || (b.Resource.Text == nil && b.Resource.Blob == nil) {
			return acp.InvalidParams(field+".resource", "an embedded resource needs uri and text or blob")
		}
	case "image":
		return checkImage(field, b)
	case "audio":
		return acp.InvalidParams(field, "audio content is not supported (promptCapabilities.audio is false); send text, image, resource_link or resource blocks")
	case "":
		return acp.InvalidParams(field+".type", "required")
	default:
		return acp.InvalidParams(field+".type", "unknown content block type %q", b.Type)
	}
	return nil
}

// promptText renders a prompt as the text the model reads.
func promptText(blocks []acp.ContentBlock) string {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		switch b.Type {
		case "text":
			sb.WriteString(*b.Text)
		case "resource_link":
			fmt.Fprintf(&sb, "[%s](%s)", b.Name, b.URI)
		case "image":
			// The image itself goes with the message; the text says where
			// it stands (and a replay fixture's expect can see it).
			if b.Data != "" {
				fmt.Fprintf(&sb, "[image %s, %d bytes]", b.MimeType, imageBytes(&b))
			} else {
				fmt.Fprintf(&sb, "[image %s at %s]", b.MimeType, b.URI)
			}
		case "resource":
			r := b.Resource
			if r.Text != nil {
				fmt.Fprintf(&sb, "<resource uri=%q>\n%s\n</resource>", r.URI, *r.Text)
			} else {
				fmt.Fprintf(&sb, "<resource uri=%q mimeType=%q>(binary, %d base64 bytes)</resource>", r.URI, r.MimeType, len(*r.Blob))
			}
		}
	}
	return sb.String()
}

// titleFrom makes a session title from the first prompt.
func titleFrom(blocks []acp.ContentBlock) string {
	var t string
	for _, b := range blocks {
		switch {
		case b.Type == "text" && strings.TrimSpace(*b.Text) != "":
			t = *b.Text
		case b.Type == "resource_link":
			t = b.Name
		case b.Type == "resource":
			t = filepath.Base(b.Resource.URI)
		}
		if t != "" {
			break
		}
	}
	t = strings.TrimSpace(t)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	if r := []rune(t); len(r) > 80 {
		t = string(r[:79]) + "…"
	}
	return t
}

// update sends a session/update with a struct payload and flushes.
func (a *agent) update(sessionID string, u any) error {
	if err := a.out.NotifyJSON(sessionID, u); err != nil {
		return err
	}
	return a.out.Flush()
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

// info is what <id>.json holds for s.
func infoOf(s *SessionRecord) store.Info {
	return store.Info{SessionID: s.id, Cwd: s.ws.Cwd, Dirs: s.ws.Roots[1:], Title: s.title,
		CreatedAt: store.Stamp(s.created), UpdatedAt: store.Stamp(s.updated)}
}

// decodeRaw decodes params into v and names the field on failure.
func decodeRaw(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '[' {
		return acp.InvalidParams("params", "must be an object, not an array")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return acp.InvalidParams(te.Field, "must be %s, not %s", acp.JSONKind(te.Type.Kind().String()), te.Value)
		}
		return acp.Errorf(acp.CodeInvalidParams, "invalid params: %s", acp.DescribeJSONError(err))
	}
	return nil
}

// required returns *p or an error naming field.
func required(field string, p *string) (string, error) {
	if p == nil {
		return "", acp.InvalidParams(field, "required")
	}
	return *p, nil
}

// wireError is err as the client gets it: the store's errors get their
// codes, an error that already has one keeps it, any other is internal.
func wireError(err error) *jrpc2.Error {
	var (
		notFound *store.NotFoundError
		locked   *store.LockedError
		failed   *store.Error
	)
	switch {
	case errors.As(err, &notFound):
		return acp.Errorf(acp.CodeResourceNotFound, "%v", notFound).WithData(map[string]string{"sessionId": notFound.ID})
	case errors.As(err, &locked):
		return acp.Errorf(acp.CodeSessionLocked, "%v", locked).WithData(map[string]any{"sessionId": locked.ID, "pid": locked.PID})
	case errors.As(err, &failed):
		return acp.Errorf(acp.CodeStoreFailed, "%v", failed)
	case errors.Is(err, store.ErrBadCursor):
		return acp.InvalidParams("cursor", "%v", store.ErrBadCursor)
	}
	return acp.AsError(err)
}

// errNotInitialized answers a session method sent before initialize.
func errNotInitialized(method string) error {
	return acp.Errorf(acp.CodeNotInitialized, "%s before initialize: send initialize first", method)
}

// authenticate succeeds: acpbridge advertises no auth methods and takes its
// model key from the environment.
func (a *agent) authenticate(ctx context.Context, req *jrpc2.Request) (any, error) {
	return struct{}{}, nil
}
