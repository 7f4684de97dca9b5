// session.go is the card of acpbridge: the agent, its one optional
// SessionRecord, the outlook arrival refuses by, the refusals of a second
// session, and the agent loop. The session methods live beside it:
// arrival.go (dispatch and admission), opening.go (new, load, resume,
// close, delete, list, the connection's end), prompt.go (prompt, cancel),
// modes.go (set_mode, set_config_option); turn.go runs a turn.
//
// One record, one loop:
//   - At most one *SessionRecord exists (a.sess). Only the agent loop, one
//     goroutine, creates, runs and frees it.
//   - Every step that opens, runs or ends the session (session/new, load,
//     resume, prompt, close, a delete of the session being closed, and
//     shutdown at EOF or a signal) runs on the loop, one at a time, in
//     arrival order. The loop writes each step's answer itself and starts
//     the next step only once that answer is on the wire. No step waits on
//     another request.
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
//     the connection's end. The box is the one thing a turn shares with
//     arrival: mode, model and rules under one small mutex. `load X;
//     set_mode X; prompt X` in one write: the set_mode changes X's box at
//     arrival, the load step's record takes the box, and the prompt runs
//     with the mode.
//
// A record's fields have two owners: the loop (which also runs the turn)
// writes every field but the box, which guards itself.

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
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
	mcpStart time.Duration   // the MCP servers' start bound; 0 is mcp's own (in-process tests give a deadlock guard)

	// Signing in (auth.go): decided at start, and again at arrival while
	// a sign-in is missing.
	keys         keyring // the provider's key, which the model asks for at each request
	envKey       string  // OPENAI_API_KEY as the process started
	signinPath   string  // the stored sign-in's file
	signInNeeded string  // why a session must wait for a sign-in, or ""

	arrivals map[string]arrival // the methods decided at arrival (arrival.go)
	steps    agentLoop          // the steps in arrival order
	sess     *SessionRecord     // the loop's: the one session, or nil

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

// errNotInitialized answers a session method sent before initialize.
func errNotInitialized(method string) error {
	return acp.Errorf(acp.CodeNotInitialized, "%s before initialize: send initialize first", method)
}
