// session.go holds the agent, its one optional SessionRecord, and every
// session method: initialize, session/new, load, resume, list, delete, close,
// prompt, cancel, set_mode and set_config_option.
//
// The rules:
//   - The agent holds at most one *SessionRecord. It is set (not yet ready)
//     the moment a session/new, load or resume claims it, so a second one is
//     rejected even while the first is being created or loaded.
//   - The rejection uses acp.CodeSessionLive, names the live id, and carries
//     {"activeSessionId": id}. The live session is not touched.
//   - A record has at most one running turn. session/cancel cancels it;
//     session/close cancels it, waits for it, and frees the record.
//
// Order. jrpc2 runs every request in a goroutine of its own, so the order in
// which handlers start is not the order in which messages arrived. Every
// change of the connection's and the session's state therefore happens at
// arrival instead: the wire calls arrive for each well-formed message on the
// goroutine that reads stdin, in the order of the lines, before jrpc2 sees
// it. arrive runs the method's admission (admit*), which checks the params,
// makes the state change under a.mu (initialized, claim, turn start,
// cancel, close, mode, model) and returns the step: the rest of the work
// (store I/O, the turn itself, the answer), which the jrpc2 handler runs
// concurrently with later messages. An admission never blocks on I/O of
// the client or the model. A step admitted but never started (jrpc2 drops
// queued requests when stdin ends) is abandoned by shutdown, which undoes
// what its admission began.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"acpbridge/internal/mcp"
	"acpbridge/internal/model"
	"acpbridge/internal/proc"
	"acpbridge/internal/store"
	"acpbridge/internal/tools"
)

// config is the parsed command line.
type config struct {
	modelSpec        string
	stateDir         string
	baseURL          string
	record           string
	trace            string
	maxTurnRequests  int
	maxLineBytes     int
	models           []string // --models
	fanout           bool     // --fanout: be the router (internal/fanout)
	maxContextTokens int      // --max-context-tokens
}

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

	// a.mu guards the fields below and the record's fields marked "a.mu".
	mu          sync.Mutex
	initialized bool
	client      acp.ClientCapabilities
	sess        *SessionRecord
	next        *SessionRecord    // claimed while sess is closing; live once sess is released
	tickets     map[string]ticket // admitted requests whose handler has not started, by id

	admit map[string]func(id string, params json.RawMessage) ticket // admissions(), set by serve
}

// SessionRecord is the one session this process serves.
//
// Who owns what: the fields marked "a.mu" are read and written under the
// agent's mutex. The fields marked "opener" are written only by the step
// that opens the record (session/new, load or resume) before it closes
// opened, and are read-only after that. The fields marked "turn" belong to
// the running turn (one at a time; the opener before the first), and
// session/close and shutdown touch them only after the turn is done.
// mcp and file lock themselves.
type SessionRecord struct {
	id string           // fixed at claim
	ws *tools.Workspace // opener: the cwd, then the additional directories

	ready  bool               // a.mu: false while session/new, load or resume is still opening it
	abort  context.CancelFunc // a.mu: ends an opening load; set while !ready
	opened chan struct{}      // closed by the opener when opening has finished, either way
	after  <-chan struct{}    // fixed at claim: a closing record's released, which this one waits for; or nil
	// afterReq (fixed at claim) is the id of that record's session/close;
	// closeReq (a.mu) is the id of the session/close that closes this one.
	afterReq, closeReq string
	// released is closed when the record's slot, files and lock are free.
	released    chan struct{}
	releaseOnce sync.Once
	openReq     string // a.mu: the id of the load or resume that opens it, or ""
	closing     bool   // a.mu: session/close (or shutdown) has begun: no new turn may start
	turn        *turn  // a.mu: the admitted or running turn, or nil

	title   string          // a.mu
	mode    acp.Mode        // a.mu
	model   string          // a.mu: the model the session's turns call
	rules   map[string]bool // a.mu: tool name → allow (true) or reject (false) always
	created time.Time       // opener
	updated time.Time       // a.mu

	mcp  *mcp.Hub            // opener sets; self-locked
	file *store.File         // opener sets; self-locked; nil only while opening
	conv *model.Conversation // turn: what the model is sent

	budget      int    // turn: a context budget lower than --max-context-tokens, learnt from the provider, or 0
	trimNoticed bool   // turn: the user was told that older context is left out
	enc         []byte // turn: scratch for encoding the turn's tool updates
}

// turn is one admitted session/prompt.
type turn struct {
	reqID  string // the id of its session/prompt request
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the prompt's step has finished (or was abandoned)

	started   bool // a.mu: the step has begun
	abandoned bool // a.mu: shutdown gave it up before it began
}

// step is what an admitted request does after its arrival: the slow work and
// the answer. It runs in the request's jrpc2 handler.
type step func(ctx context.Context) (any, error)

// ticket is what an admission decided: the answer itself (result or err),
// which is written at once, in arrival order, or a step for the request's
// handler to run.
type ticket struct {
	result  any
	err     error
	run     step
	abandon func() // undoes what the admission began, if run never starts; may be nil
}

// fail answers a request its admission refused.
func fail(err error) ticket { return ticket{err: err} }

// done answers a request its admission completed.
func done(result any) ticket { return ticket{result: result} }

// admissions maps every method whose effect on the agent's state must follow
// arrival order to its admission.
func (a *agent) admissions() map[string]func(id string, params json.RawMessage) ticket {
	return map[string]func(string, json.RawMessage) ticket{
		acp.MethodInitialize:             a.initialize,
		acp.MethodSessionNew:             a.afterInit(acp.MethodSessionNew, typed(a.admitNew)),
		acp.MethodSessionLoad:            a.afterInit(acp.MethodSessionLoad, typed(a.admitOpen(true))),
		acp.MethodSessionResume:          a.afterInit(acp.MethodSessionResume, typed(a.admitOpen(false))),
		acp.MethodSessionClose:           a.afterInit(acp.MethodSessionClose, typed(a.admitClose)),
		acp.MethodSessionPrompt:          a.afterInit(acp.MethodSessionPrompt, typed(a.admitPrompt)),
		acp.MethodSessionCancel:          typed(a.admitCancel),
		acp.MethodSessionSetMode:         a.afterInit(acp.MethodSessionSetMode, typed(a.admitSetMode)),
		acp.MethodSessionSetConfigOption: a.afterInit(acp.MethodSessionSetConfigOption, typed(a.admitSetConfig)),
	}
}

// handlers is the dispatch table: every ACP method acpbridge serves.
func (a *agent) handlers() handler.Map {
	m := handler.Map{
		acp.MethodAuthenticate:  a.guard(a.authenticate),
		acp.MethodSessionList:   a.guard(a.session(handle(a.listSessions))),
		acp.MethodSessionDelete: a.guard(a.session(handle(a.deleteSession))),
		acp.MethodCancelRequest: a.guard(a.cancelRequest),
	}
	for method := range a.admissions() {
		m[method] = a.guard(a.admitted)
	}
	return m
}

// arrive admits one message, in arrival order (the wire calls it on the
// reading goroutine). It returns the response to write at once when the
// admission decided the answer; otherwise nil, and the request goes on to
// jrpc2, whose handler takes the ticket and runs its step. session/cancel
// acts here and answers nothing. A request method sent as a notification is
// not admitted: it has nobody to answer.
func (a *agent) arrive(method, id string, params json.RawMessage) []byte {
	admit, ok := a.admit[method]
	if !ok || (id == "" && method != acp.MethodSessionCancel) {
		return nil
	}
	t := a.safeAdmit(method, id, admit, params)
	if id == "" {
		return nil
	}
	if t.run == nil {
		return encodeResponse(id, t.result, t.err)
	}
	a.mu.Lock()
	a.tickets[id] = t
	a.mu.Unlock()
	return nil
}

// encodeResponse is the response to request id, as jrpc2 would write it.
func encodeResponse(id string, result any, err error) []byte {
	if err != nil {
		return channel.EncodeResponse(id, nil, wireError(err))
	}
	return channel.EncodeResponse(id, result, nil)
}

// safeAdmit runs an admission and turns a panic into the request's error.
func (a *agent) safeAdmit(method, id string, admit func(string, json.RawMessage) ticket, params json.RawMessage) (t ticket) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("admission panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
			t = fail(acp.Errorf(acp.CodeInternal, "internal error in %s: %v (a bug in acpbridge; the process keeps serving)", method, p))
		}
	}()
	return admit(id, params)
}

// admitted is the handler of every ordered method: it runs the step its
// admission left.
func (a *agent) admitted(ctx context.Context, req *jrpc2.Request) (any, error) {
	a.mu.Lock()
	t, ok := a.tickets[req.ID()]
	delete(a.tickets, req.ID())
	a.mu.Unlock()
	if !ok {
		// A notification of a request method, or a step shutdown abandoned.
		return nil, acp.Errorf(acp.CodeRequestCancelled, "%s was not run: the agent is shutting down", req.Method())
	}
	return t.run(ctx)
}

// abandonTickets gives up every admitted request whose handler has not
// started; jrpc2 drops such requests when the connection ends.
func (a *agent) abandonTickets() {
	a.mu.Lock()
	ts := a.tickets
	a.tickets = map[string]ticket{}
	a.mu.Unlock()
	for _, t := range ts {
		if t.abandon != nil {
			t.abandon()
		}
	}
}

// guard turns a panic into an internal error and every error into a
// *jrpc2.Error, so that no handler can end the process or leak jrpc2's codes.
func (a *agent) guard(h jrpc2.Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (res any, err error) {
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("handler panicked", "method", req.Method(), "panic", p, "stack", string(debug.Stack()))
				res, err = nil, acp.Errorf(acp.CodeInternal, "internal error in %s: %v (a bug in acpbridge; the process keeps serving)", req.Method(), p)
			}
		}()
		res, err = h(ctx, req)
		if err != nil {
			err = wireError(err)
		}
		return res, err
	}
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

// afterInit requires initialize to have arrived before the message.
func (a *agent) afterInit(method string, admit func(string, json.RawMessage) ticket) func(string, json.RawMessage) ticket {
	return func(id string, p json.RawMessage) ticket {
		a.mu.Lock()
		ok := a.initialized
		a.mu.Unlock()
		if !ok {
			return fail(errNotInitialized(method))
		}
		return admit(id, p)
	}
}

// withSession is params that name a session: its sessionId is required.
type withSession interface{ Session() *string }

// typed makes an admission of a method whose params are a P: they are
// decoded (a wrong field is named), and when P names a session its
// sessionId is required and handed on.
func typed[P any](admit func(reqID, sessionID string, p *P) ticket) func(string, json.RawMessage) ticket {
	return func(reqID string, raw json.RawMessage) ticket {
		p, sid, err := decodeTyped[P](raw)
		if err != nil {
			return fail(err)
		}
		return admit(reqID, sid, p)
	}
}

// handle is typed for the methods jrpc2 runs as they come (list, delete).
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

// initialize is typed(a.admitInitialize), with the usual params read by
// acp.ScanInitializeParams rather than encoding/json.
func (a *agent) initialize(reqID string, raw json.RawMessage) ticket {
	if p, ok := acp.ScanInitializeParams(raw); ok {
		return a.admitInitialize(reqID, "", &p)
	}
	return typed(a.admitInitialize)(reqID, raw)
}

func (a *agent) admitInitialize(_, _ string, p *acp.InitializeParams) ticket {
	a.mu.Lock()
	a.initialized = true
	a.client = p.ClientCapabilities
	a.mu.Unlock()
	return done(json.RawMessage(initializeResult))
}

// initializeResult is the answer to initialize: an acp.InitializeResult
// written out, because it is every process's first answer and encoding/json's
// first use costs a cold process about 0.2 ms (README, Performance).
// TestInitializeResult_isTheStructEncoded holds it to the struct.
const initializeResult = `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,` +
	`"promptCapabilities":{"image":false,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":true},` +
	`"sessionCapabilities":{"close":{},"list":{},"resume":{},"delete":{},"additionalDirectories":{}}},` +
	`"authMethods":[],"agentInfo":{"name":"acpbridge","title":"acpbridge","version":"` + version + `"}}`

// authenticate succeeds: acpbridge advertises no auth methods and takes its
// model key from the environment.
func (a *agent) authenticate(ctx context.Context, req *jrpc2.Request) (any, error) {
	return struct{}{}, nil
}

// errSessionLive is the one-session rule's rejection.
func errSessionLive(id string) error {
	return acp.Errorf(acp.CodeSessionLive,
		"acpbridge serves one session per process and session %s is live here; close it with session/close, or start another acpbridge process for another conversation", id).
		WithData(map[string]string{"activeSessionId": id})
}

// claim makes a new, not yet ready record with id the live one, or fails
// with the one-session rejection.
//
// While the live record is closing (session/close has arrived), one record
// may be claimed behind it: it becomes the live one when the closing one is
// released, and its step waits for that (after).
func (a *agent) claim(id string) (*SessionRecord, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &SessionRecord{id: id, opened: make(chan struct{}), released: make(chan struct{}), rules: map[string]bool{}}
	switch {
	case a.sess == nil:
		a.sess = s
	case a.sess.closing && a.next == nil:
		s.after, s.afterReq = a.sess.released, a.sess.closeReq
		a.next = s
	case a.next != nil:
		return nil, errSessionLive(a.next.id)
	default:
		return nil, errSessionLive(a.sess.id)
	}
	return s, nil
}

// vacateLocked frees the slot s holds: a record claimed behind it becomes
// the live one.
func (a *agent) vacateLocked(s *SessionRecord) {
	if a.sess == s {
		a.sess, a.next = a.next, nil
	} else if a.next == s {
		a.next = nil
	}
}

// awaitTurn waits until a record claimed behind a closing one may open; it
// reports false when the client has gone meanwhile.
func (a *agent) awaitTurn(ctx context.Context, s *SessionRecord) bool {
	if s.after == nil {
		return true
	}
	<-s.after
	a.awaitAnswer(ctx, s.afterReq) // the close answers first
	return !a.out.Gone()
}

// finishOpen makes s ready, or frees the slot when err is set.
func (a *agent) finishOpen(s *SessionRecord, err error) {
	a.mu.Lock()
	if err == nil {
		s.ready = true
	} else {
		a.vacateLocked(s)
	}
	s.abort = nil
	a.mu.Unlock()
	close(s.opened)
	if err != nil {
		s.ws.Close()
		s.mcp.Close()
		if s.file != nil {
			s.file.Close()
		}
		s.releaseOnce.Do(func() { close(s.released) })
	}
}

// errAbandoned is why a step that never started ended.
var errAbandoned = errors.New("the agent shut down before the request ran")

// setRoots sets the session's roots; roots[0] is the cwd.
func (s *SessionRecord) setRoots(roots []string) { s.ws = tools.Open(roots) }

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

// openParams checks what session/new, load and resume give: the roots and
// the MCP servers.
func openParams(p *acp.NewSessionParams) ([]string, []mcp.ServerSpec, error) {
	roots, err := checkRoots(p.Cwd, p.AdditionalDirectories)
	if err != nil {
		return nil, nil, err
	}
	specs, err := mcp.ParseServers(p.McpServers)
	return roots, specs, err
}

// admitNew claims the slot for a new session; its step creates it.
func (a *agent) admitNew(_, _ string, p *acp.NewSessionParams) ticket {
	roots, specs, err := openParams(p)
	if err != nil {
		return fail(err)
	}
	s, err := a.claim(a.newID("sess"))
	if err != nil {
		return fail(err)
	}
	return ticket{
		run: func(ctx context.Context) (any, error) {
			if !a.awaitTurn(ctx, s) {
				a.finishOpen(s, errAbandoned)
				return nil, acp.Errorf(acp.CodeRequestCancelled, "the client went away before the session was created")
			}
			return a.newSession(s, roots, specs)
		},
		abandon: func() { a.finishOpen(s, errAbandoned) },
	}
}

func (a *agent) newSession(s *SessionRecord, roots []string, specs []mcp.ServerSpec) (any, error) {
	a.awaitSignals()
	s.setRoots(roots)
	s.created = a.now()
	a.mu.Lock()
	s.mode = acp.ModeAsk
	s.model = a.defaultModel()
	s.updated = s.created
	a.mu.Unlock()
	s.conv = model.NewConversation(a.model)
	var err error
	s.file, err = a.store.Create(infoOf(s))
	if err == nil {
		s.mcp = mcp.Start(specs, version, a.procs, a.log, a.stderr)
	}
	a.finishOpen(s, err)
	if err != nil {
		return nil, err
	}
	a.log.Info("session created", "session", s.id, "cwd", s.ws.Cwd)
	mode, model := a.settings(s)
	return acp.NewSessionResult{SessionID: s.id, Modes: modeStateOf(mode), ConfigOptions: a.configOptions(mode, model)}, nil
}

// awaitSignals returns once SIGTERM, SIGINT and SIGHUP are caught, so that
// nothing a signal must end (a session, its turns, its children) begins
// before a signal can end it. Agents built by tests catch none.
func (a *agent) awaitSignals() {
	if a.caught != nil {
		<-a.caught
	}
}

// admitOpen claims the slot for session/load (replay true) or
// session/resume; its step opens the session.
func (a *agent) admitOpen(replay bool) func(reqID, id string, p *acp.LoadSessionParams) ticket {
	return func(reqID, id string, p *acp.LoadSessionParams) ticket { return a.open(reqID, id, p, replay) }
}

func (a *agent) open(reqID, id string, p *acp.LoadSessionParams, replay bool) ticket {
	roots, specs, err := openParams(&p.NewSessionParams)
	if err != nil {
		return fail(err)
	}
	s, err := a.claim(id)
	if err != nil {
		return fail(err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	s.abort = cancel
	s.openReq = reqID
	a.mu.Unlock()
	return ticket{
		run: func(ctx context.Context) (any, error) {
			defer context.AfterFunc(ctx, cancel)()
			defer cancel()
			if !a.awaitTurn(ctx, s) {
				a.finishOpen(s, errAbandoned)
				return nil, acp.Errorf(acp.CodeRequestCancelled, "the client went away before session %s was opened", s.id)
			}
			return a.openSession(lctx, s, roots, specs, replay)
		},
		abandon: func() { cancel(); a.finishOpen(s, errAbandoned) },
	}
}

// openSession serves session/load (replay true) and session/resume.
func (a *agent) openSession(ctx context.Context, s *SessionRecord, roots []string, specs []mcp.ServerSpec, replay bool) (any, error) {
	a.awaitSignals()
	err := a.restore(ctx, s, roots, replay)
	if err == nil && ctx.Err() == nil {
		s.mcp = mcp.Start(specs, version, a.procs, a.log, a.stderr)
	}
	if ctx.Err() != nil {
		err = acp.Errorf(acp.CodeRequestCancelled, "loading session %s was ended by session/close", s.id)
	}
	a.finishOpen(s, err)
	if err != nil {
		return nil, err
	}
	a.log.Info("session opened", "session", s.id, "replay", replay, "cwd", s.ws.Cwd)
	mode, model := a.settings(s)
	return acp.OpenSessionResult{Modes: modeStateOf(mode), ConfigOptions: a.configOptions(mode, model)}, nil
}

// restore reads s from the store, takes its lock, and replays its history
// when asked. The roots of the request replace the stored ones.
func (a *agent) restore(ctx context.Context, s *SessionRecord, roots []string, replay bool) error {
	conv := model.NewConversation(a.model)
	feed := newFeeder(conv)
	hist, f, err := a.store.Open(ctx, s.id, feed.add)
	if err != nil {
		return err
	}
	feed.finish()
	s.conv = conv
	s.file = f
	s.setRoots(roots)
	a.resumeSettings(s, hist)
	if err := f.WriteInfo(infoOf(s)); err != nil {
		return err
	}
	if !replay {
		return nil
	}
	return f.Replay(hist.Good, func(rec store.Record) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return a.replayRecord(s.id, rec)
	})
}

// resumeSettings gives s what its history says: created, title, mode,
// model (when this process has it), rules, and the replay's position.
func (a *agent) resumeSettings(s *SessionRecord, hist *store.History) {
	s.created = hist.Created
	if rm, ok := a.model.(*model.Replay); ok {
		// Replay is positional per session: continue where it stopped.
		if err := rm.AdvanceTo(hist.ReplayPos); err != nil {
			a.log.Warn("the replay fixture cannot continue where the session stopped", "session", s.id, "entry", hist.ReplayPos+1, "err", err)
		}
	}
	model := a.defaultModel()
	if hist.Model != "" && a.model != nil && slices.Contains(a.model.Models(), hist.Model) {
		model = hist.Model
	}
	a.mu.Lock()
	s.title, s.mode, s.updated, s.model = hist.Title, cmp.Or(acp.Mode(hist.Mode), acp.ModeAsk), hist.Updated, model
	maps.Copy(s.rules, hist.Rules)
	a.mu.Unlock()
}

// admitClose marks the session closing and cancels its turn or its load;
// the step waits for them, then frees the record.
func (a *agent) admitClose(reqID, id string, _ *acp.SessionIDParams) ticket {
	a.mu.Lock()
	s, err := a.requireLiveLocked(id, 0)
	if err != nil {
		a.mu.Unlock()
		return fail(err)
	}
	s.closeReq = reqID
	if s.abort != nil {
		a.log.Info("session/close ends the load of the session", "session", id)
	}
	t := closingLocked(s)
	a.mu.Unlock()
	return ticket{run: func(ctx context.Context) (any, error) {
		if t != nil {
			// The prompt answers (cancelled) before the close does.
			<-t.done
			a.awaitAnswer(ctx, t.reqID)
		}
		<-s.opened
		if a.isReady(s) {
			a.release(s)
			a.log.Info("session closed", "session", id)
		}
		return struct{}{}, nil
	}}
}

// closingLocked marks s closing, ends its load if it is opening and cancels
// its turn, which it returns (or nil). a.mu is held.
func closingLocked(s *SessionRecord) *turn {
	s.closing = true
	if s.abort != nil {
		s.abort()
	}
	if s.turn != nil {
		s.turn.cancel()
	}
	return s.turn
}

// isReady reports whether s has opened and is not yet released.
func (a *agent) isReady(s *SessionRecord) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return s.ready
}

// awaitAnswer waits until the request reqID has been answered, or ctx ends.
func (a *agent) awaitAnswer(ctx context.Context, reqID string) {
	select {
	case <-a.out.WhenAnswered(reqID):
	case <-ctx.Done():
	}
}

// release frees the live record s and closes what it holds.
func (a *agent) release(s *SessionRecord) {
	a.mu.Lock()
	a.vacateLocked(s)
	a.mu.Unlock()
	s.mcp.Close()
	s.ws.Close()
	if s.file != nil {
		if err := s.file.Close(); err != nil {
			a.log.Error("closing session file", "session", s.id, "err", err)
		}
	}
	// Last: a record claimed behind s may now open, the lock included.
	s.releaseOnce.Do(func() { close(s.released) })
}

// shutdownWait bounds how long shutdown waits for the turn and an opening
// load to end, so that the process exits within a second of EOF or a
// signal even when a tool will not stop.
const shutdownWait = 600 * time.Millisecond

// shutdown ends the live session when the connection is gone (stdin ended,
// stdout broke, or a signal): the turn is cancelled and persisted, a load in
// progress is ended, and the record is released.
func (a *agent) shutdown() {
	a.out.CloseCalls() // no answer will come from the client now
	a.abandonTickets()
	a.mu.Lock()
	s := a.sess
	var t *turn
	if s != nil {
		t = closingLocked(s)
	}
	a.mu.Unlock()
	if s == nil {
		return
	}
	deadline := time.NewTimer(shutdownWait)
	defer deadline.Stop()
	for _, ch := range []chan struct{}{s.opened, turnDone(t)} {
		select {
		case <-ch:
		case <-deadline.C:
			a.log.Warn("the session did not wind down in time; exiting anyway", "session", s.id)
			return
		}
	}
	if a.isReady(s) {
		a.release(s)
	}
}

// hangup ends what runs when stdin ends, before jrpc2 stops: a load in
// progress and the turn, so that their answers (-32800, cancelled) are
// written at once rather than after the channel's grace for answers.
func (a *agent) hangup() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sess; s != nil {
		if s.abort != nil {
			s.abort()
		}
		if s.turn != nil {
			s.turn.cancel()
		}
	}
}

// turnDone is t's done channel, or a closed one when there is no turn.
func turnDone(t *turn) chan struct{} {
	if t == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return t.done
}

// What requireLiveLocked accepts beyond a live session that is not closing.
const (
	mustBeReady  = 1 << iota // and it must have finished opening
	mayBeNext                // or the session opening behind a closing one
	mayBeClosing             // or one that is closing
)

// requireLiveLocked returns the session record with id that a request may
// act on, or the error that answers it: the live session, if it is not
// closing (unless mayBeClosing), has finished opening (if mustBeReady),
// or, with mayBeNext, the one claimed behind it while it closes. It is the
// one check of "is this session live here"; call it with a.mu held.
func (a *agent) requireLiveLocked(id string, accept int) (*SessionRecord, error) {
	for _, s := range []*SessionRecord{a.sess, a.next} {
		switch {
		case s == nil || s.id != id:
		case s == a.next && accept&mayBeNext == 0:
		case s.closing && accept&mayBeClosing == 0:
		case !s.ready && accept&mustBeReady != 0:
		default:
			return s, nil
		}
	}
	if a.sess == nil {
		return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is not live in this process (no session is); open it with session/load or session/resume, or create one with session/new", id).
			WithData(map[string]string{"sessionId": id})
	}
	return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is not live in this process; the live session is %s", id, a.sess.id).
		WithData(map[string]string{"sessionId": id, "activeSessionId": a.sess.id})
}

// admitPrompt starts a turn: from here on a session/cancel or close that
// arrives applies to it, even before its step runs. A prompt that arrives
// while its session is still loading waits for the load; one that arrives
// while a cancelled turn winds down runs after it; one that arrives while
// a turn runs is refused (1003).
func (a *agent) admitPrompt(reqID, id string, p *acp.PromptParams) ticket {
	blocks, err := parsePrompt(p.Prompt)
	if err == nil && a.model == nil {
		err = a.errNoModel()
	}
	if err != nil {
		return fail(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.requireLiveLocked(id, mayBeNext)
	if err != nil {
		return fail(err)
	}
	prev := s.turn
	if prev != nil && prev.ctx.Err() == nil {
		return fail(acp.Errorf(acp.CodeTurnRunning,
			"a turn is already running in session %s; wait for its response or cancel it with session/cancel before sending another prompt", id))
	}
	// A cancelled turn still winding down (an editor sends cancel and the
	// next prompt back to back): this prompt follows it.
	t := newTurn(reqID)
	s.turn = t
	behind := "" // the load or resume still opening the session, by its id
	if !s.ready {
		behind = s.openReq
	}
	return a.promptTicket(s, t, prev, behind, blocks, p.Prompt)
}

// newTurn is the turn of the prompt reqID, not yet started.
func newTurn(reqID string) *turn {
	ctx, cancel := context.WithCancel(context.Background())
	return &turn{reqID: reqID, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// promptTicket is the admitted prompt's ticket: its step runs turn t, and
// abandoning it before it starts frees the turn.
func (a *agent) promptTicket(s *SessionRecord, t, prev *turn, behind string, blocks []acp.ContentBlock, raw []json.RawMessage) ticket {
	end := func() {
		t.cancel()
		a.mu.Lock()
		if s.turn == t {
			s.turn = nil
		}
		a.mu.Unlock()
		close(t.done)
	}
	return ticket{
		run: func(ctx context.Context) (any, error) {
			return a.promptStep(ctx, s, t, prev, behind, end, blocks, raw)
		},
		abandon: func() {
			a.mu.Lock()
			started := t.started
			t.abandoned = !started
			a.mu.Unlock()
			if !started {
				end()
			}
		},
	}
}

// promptStep runs an admitted turn t in s once what it must wait for is
// done: the load behind which it arrived (behind, a request id) and the
// cancelled turn prev still winding down; end frees the turn.
func (a *agent) promptStep(ctx context.Context, s *SessionRecord, t *turn, prev *turn, behind string, end func(),
	blocks []acp.ContentBlock, raw []json.RawMessage) (any, error) {
	a.mu.Lock()
	if t.abandoned {
		a.mu.Unlock()
		return acp.PromptResult{StopReason: acp.StopCancelled}, nil
	}
	t.started = true
	a.mu.Unlock()
	defer end()
	defer context.AfterFunc(ctx, t.cancel)()
	if !a.awaitBefore(ctx, s, prev, behind) {
		return nil, acp.Errorf(acp.CodeResourceNotFound, "session %s did not open, so the prompt was not run; open it again with session/load or session/resume", s.id).
			WithData(map[string]string{"sessionId": s.id})
	}
	stop, err := a.runTurn(t.ctx, s, blocks, raw)
	if err != nil {
		return nil, err
	}
	return acp.PromptResult{StopReason: stop}, nil
}

// awaitBefore waits for what a prompt's turn follows: s's opening (and the
// answer of the load or resume behind which it arrived), and the cancelled
// turn prev ending and answering. It reports whether s opened.
func (a *agent) awaitBefore(ctx context.Context, s *SessionRecord, prev *turn, behind string) bool {
	<-s.opened
	ready := a.isReady(s)
	if behind != "" {
		// The load answers before the prompt behind it does.
		a.awaitAnswer(ctx, behind)
	}
	if ready && prev != nil {
		// The cancelled turn ends, and answers, first.
		<-prev.done
		a.awaitAnswer(ctx, prev.reqID)
	}
	return ready
}

// errNoModel answers a prompt when no model is configured or --model's is
// not usable.
func (a *agent) errNoModel() error {
	if a.modelErr != nil {
		return acp.Errorf(acp.CodeNoModel, "acpbridge cannot use its model: %v. Fix --model (replay:PATH of an existing fixture, or openai:MODEL with an http(s) --base-url) in the agent's command and start it again", a.modelErr)
	}
	return acp.Errorf(acp.CodeNoModel,
		"no model is configured: start acpbridge with --model openai:MODEL (with OPENAI_API_KEY, and --base-url for Ollama and other servers) or --model replay:FIXTURE.jsonl, or set ACPBRIDGE_MODEL")
}

// admitCancel cancels the session's turn, admitted or running. It is a
// notification: it acts at arrival and answers nothing.
func (a *agent) admitCancel(_, id string, _ *acp.SessionIDParams) ticket {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, err := a.requireLiveLocked(id, mayBeNext); err == nil && s.turn != nil {
		s.turn.cancel()
	}
	return done(nil)
}

// cancelRequest accepts $/cancel_request and ignores it: a turn is
// cancelled with session/cancel, and every other request is answered at once.
func (a *agent) cancelRequest(ctx context.Context, req *jrpc2.Request) (any, error) {
	return nil, nil
}

// parsePrompt checks every block of a prompt.
func parsePrompt(raw []json.RawMessage) ([]acp.ContentBlock, error) {
	if raw == nil {
		return nil, acp.InvalidParams("prompt", "required: an array of content blocks")
	}
	blocks := make([]acp.ContentBlock, len(raw))
	for i, r := range raw {
		field := fmt.Sprintf("prompt[%d]", i)
		if err := json.Unmarshal(r, &blocks[i]); err != nil {
			return nil, acp.InvalidParams(field, "not a content block: %v", err)
		}
		if err := checkBlock(field, &blocks[i]); err != nil {
			return nil, err
		}
	}
	return blocks, nil
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
	case "image", "audio":
		return acp.InvalidParams(field, "%s content is not supported (promptCapabilities.%s is false); send text, resource_link or resource blocks", b.Type, b.Type)
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

// settings returns the session's mode and model.
func (a *agent) settings(s *SessionRecord) (mode acp.Mode, model string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return s.mode, s.model
}

// defaultModel is the model a new session starts on: --model's.
func (a *agent) defaultModel() string {
	if a.model == nil {
		return ""
	}
	return a.model.DefaultName()
}

// configOptions lists the session's config options with current values.
// Call it without a.mu held: the model list may be asked of the server.
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

func (a *agent) admitSetMode(_, id string, p *acp.SetModeParams) ticket {
	mode, err := required("modeId", p.ModeID)
	if err != nil {
		return fail(err)
	}
	return a.changeSetting(id, "modeId", store.Record{Type: store.RecConfig, Mode: mode}, struct{}{})
}

func (a *agent) admitSetConfig(_, id string, p *acp.SetConfigParams) ticket {
	cid, err := required("configId", p.ConfigID)
	if err != nil {
		return fail(err)
	}
	var value string
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return fail(acp.InvalidParams("value", "required: a string value id"))
	}
	switch cid {
	case "mode":
		return a.changeSetting(id, "value", store.Record{Type: store.RecConfig, Mode: value}, nil)
	case "model":
		return a.changeSetting(id, "value", store.Record{Type: store.RecConfig, Model: value}, nil)
	}
	return fail(acp.InvalidParams("configId", "unknown config option %q; the options are mode and model", cid))
}

// changeSetting sets the session's mode or model (rec says which) at
// arrival, so that a prompt behind it runs with it, announces it, writes it
// to the log, and answers result, or the options when result is nil.
func (a *agent) changeSetting(id, field string, rec store.Record, result any) ticket {
	a.mu.Lock()
	_, err := a.requireLiveLocked(id, mustBeReady)
	a.mu.Unlock()
	if err == nil {
		err = a.checkSetting(field, rec)
	}
	if err != nil {
		return fail(err)
	}
	s, mode, model, err := a.applySetting(id, rec)
	if err != nil {
		return fail(err)
	}
	opts := a.configOptions(mode, model)
	var sent error
	if rec.Mode != "" {
		sent = a.out.NotifyJSON(id, acp.CurrentMode(mode))
	}
	sent = errors.Join(sent, a.out.NotifyJSON(id, acp.ConfigOptionsChanged(opts)))
	if err := errors.Join(s.file.AppendNow(rec), sent); err != nil {
		return fail(err) // the setting holds; the log or the client failed
	}
	if result == nil {
		result = acp.ConfigOptionsResult{ConfigOptions: opts}
	}
	return done(result)
}

// applySetting sets rec's mode or model on the live session id and returns
// the session and both settings.
func (a *agent) applySetting(id string, rec store.Record) (*SessionRecord, acp.Mode, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.requireLiveLocked(id, mustBeReady)
	if err != nil {
		return nil, "", "", err
	}
	if rec.Mode != "" {
		s.mode = acp.Mode(rec.Mode)
	} else {
		s.model = rec.Model
	}
	return s, s.mode, s.model, nil
}

// checkSetting refuses a mode or model (rec's) that acpbridge does not have,
// naming field and the ones it has.
func (a *agent) checkSetting(field string, rec store.Record) error {
	if rec.Mode != "" {
		if !slices.ContainsFunc(sessionModes, func(m acp.SessionMode) bool { return m.ID == acp.Mode(rec.Mode) }) {
			return acp.InvalidParams(field, "unknown mode %q; the modes are ask, accept_edits, read_only and bypass", rec.Mode)
		}
		return nil
	}
	// A live session has its options listed, so the model list is known:
	// models() does not wait on the server here.
	var names []string
	if a.model != nil {
		names = a.model.Models()
	}
	if !slices.Contains(names, rec.Model) {
		return acp.InvalidParams(field, "unknown model %q; the models are %s", rec.Model, strings.Join(names, ", "))
	}
	return nil
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

func (a *agent) deleteSession(_ context.Context, id string, _ *acp.SessionIDParams) (any, error) {
	a.mu.Lock()
	_, err := a.requireLiveLocked(id, mayBeClosing)
	a.mu.Unlock()
	if err == nil {
		return nil, acp.Errorf(acp.CodeSessionLive, "session %s is live in this process and cannot be deleted; close it with session/close first", id).
			WithData(map[string]string{"activeSessionId": id})
	}
	if err := a.store.Remove(id); err != nil {
		return nil, err
	}
	return struct{}{}, nil
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
		return a.out.NotifyJSON(sessionID, acp.ToolCallStart(rec.ToolCallID, rec.Title, acp.ToolKind(rec.Kind), rec.Locations, rawInput(rec.Call)))
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
