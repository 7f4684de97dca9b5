// reopen.go holds the reopening of a thread in a new process: after its
// child died or was evicted (session/resume where the agent offers it, else
// session/load whose replay the client does not see), or for the client's
// own load or resume of a session that has no process here. A reopening
// has a time bound (--reopen-timeout) and can be cancelled (session/close,
// $/cancel_request of the load).

package fanout

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/events"
)

// reopen takes a child for t once its old process has ended: lost, the
// router reopens it the agent's way; loading, the client's load or resume
// (t.opener) is sent; retrying, the router's way once more.
func (r *router) reopen(t *thread) {
	if t.child != nil {
		return // its old process still ends (reopened when it has), or the reopening is under way
	}
	method := r.agent.reopenBy
	switch t.state {
	case threadLost:
		why := t.gone
		if method == "" {
			why = r.cannotReopen()
		}
		if why != "" {
			r.failHeld(t, acp.Errorf(acp.CodeInternal, "the process of session %s ended, and the thread cannot come back: %s; open a new thread", t.id, why))
			return
		}
		r.moveThread(t, threadReopening)
	case threadLoading:
		method = t.opener.method
	case threadRetrying:
	default:
		return
	}
	taking := t.state
	params := t.opened
	if t.opener != nil {
		params = t.opener.params
	}
	r.take(r.processDir(params), func(c *child, err error) {
		if t.state != taking || t.child != nil {
			if c != nil { // closed or withdrawn meanwhile: the child goes back to the pool
				r.spares = append([]*child{c}, r.spares...)
			}
			return
		}
		if err != nil {
			r.reopenFailed(t, fmt.Errorf("no process could be given to it: %w", err))
			return
		}
		r.sendReopen(t, c, method)
	})
}

// sendReopen sends c the reopening of t with method.
func (r *router) sendReopen(t *thread, c *child, method string) {
	t.child, c.thread, c.session = c, t, t.id
	req := &request{kind: kindReopen, method: method, thread: t}
	params := t.opened
	if t.state == threadLoading {
		req.clientID, params = t.opener.id, t.opener.params
		req.params = params // its thread's opening params once it succeeds
		t.opener = nil
		r.moveThread(t, threadReopening)
		r.becomes(c, childOpening)
	} else {
		params = withSessionID(params, t.id)
		if method == acp.MethodSessionLoad {
			r.becomes(c, childReplaying) // the client shows the conversation already
		} else {
			r.becomes(c, childOpening)
		}
	}
	r.Log.Debug("reopening a session", events.Of(events.Reopening), "session", t.id, "with", method, "pid", c.pid)
	r.send(c, req, params)
	t.timer = r.after(r.ReopenTimeout, func() { r.onReopenTimeout(t, c) })
}

// maxCrashes is how many times in a row a thread's process may end
// unexpectedly (no prompt answered between) before the thread is closed
// rather than reopened again.
const maxCrashes = 3

// crashed notes that t's process (c) ended unexpectedly while t was open.
// An agent that cannot reopen it, or that died maxCrashes times in a row,
// leaves the thread closed; the user is told where the client takes
// notices (else by the error of the thread's next request).
func (r *router) crashed(t *thread, c *child) {
	t.crashes++
	t.crashed = c.cmd.ProcessState.String()
	switch {
	case r.cannotReopen() != "":
		t.gone = r.cannotReopen()
		r.tell(t.id, "error", "The agent's process ended; this thread must be started again",
			fmt.Sprintf("The process serving this thread ended unexpectedly (%s), and the thread cannot come back: %s. Start a new thread.", t.crashed, r.cannotReopen()))
	case t.crashes > maxCrashes:
		why := fmt.Sprintf("its agent's process ended unexpectedly %d times in a row (the last: %s); the thread was closed rather than restarted again: start a new thread, and see the agent's log", t.crashes, exitReason(c, "").Error())
		r.tell(t.id, "error", "The agent's process keeps ending; this thread was closed", why)
		r.Log.Error("a thread's process keeps ending; the thread is closed", events.Of(events.ThreadGivenUp), "session", t.id, "crashes", t.crashes)
		r.forget(t, "closed, as "+why)
	}
}

// cannotReopen says why the agent cannot reopen a session in a new process,
// as the router knows it: it offers neither session/resume nor
// session/load, or the table of agents (knownAgents) says its version
// cannot; "" when it can.
func (r *router) cannotReopen() string {
	switch {
	case r.agent.reopenBy == "":
		return "the agent cannot reopen a session in a new process (it offers neither session/resume nor session/load)"
	case r.agent.noEvict != "":
		return r.agent.noEvict
	}
	return ""
}

// tell sends the client a notice for session id, where the client opted
// into notices at initialize (clientCapabilities.session.notices); never
// otherwise.
func (r *router) tell(id, severity, title, description string) {
	var p acp.InitializeParams
	if json.Unmarshal(r.conn.initArgs, &p) != nil || !p.ClientCapabilities.Notices() {
		return
	}
	r.out.NotifyJSON(id, acp.Notice(severity, title, description))
	r.out.Flush()
}

// withSessionID is an opening's params with sessionId set to id.
func withSessionID(opened json.RawMessage, id string) json.RawMessage {
	var p map[string]json.RawMessage
	json.Unmarshal(opened, &p)
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	p["sessionId"], _ = json.Marshal(id)
	b, _ := json.Marshal(p)
	return b
}

// onReopened: t's new child answered its reopening.
func (r *router) onReopened(c *child, req *request, m childMessage) {
	t := req.thread
	r.Trace.Child("from-child", c.pid, m.line)
	if t.timer != nil {
		t.timer.Stop()
	}
	r.Log.Debug("reopened a session", "session", t.id, "with", req.method, "failed", len(m.err) > 0, "took", time.Since(req.sent))
	if req.clientID != nil {
		r.answerJoiners(t, r.relay(req, m))
	}
	r.out.Flush()
	r.warmAfterTurns() // the thread's next turn comes before its successor's process starts
	if !t.reopening() || t.child != c {
		return // closed or timed out meanwhile
	}
	if len(m.err) > 0 {
		r.endChild(c, false)
		why := fmt.Errorf("the agent answered %s: %s", req.method, errorMessage(m.err))
		if req.clientID == nil && r.agent.noEvict == "" { // the router's own reopening of a thread it had open
			r.agent.noEvict = fmt.Sprintf("it could not reopen session %s in a new process (%v)", t.id, why)
			r.Log.Warn("threads are no longer evicted", events.Of(events.EvictionStopped), "why", r.agent.noEvict)
		}
		r.reopenFailed(t, why)
		return
	}
	r.moveThread(t, threadOpen)
	if req.params != nil {
		t.opened = req.params
	}
	if t.crashed != "" {
		r.tell(t.id, "warning", "The agent's process ended, and was restarted",
			fmt.Sprintf("The process serving this thread ended unexpectedly (%s). The thread was reopened in a new process with its conversation; a prompt that was running then was stopped, and can be sent again.", t.crashed))
		t.crashed = ""
	}
	r.becomes(c, childServing)
	held := t.held
	t.held = nil
	for _, h := range held {
		r.toThread(h)
	}
}

// reopenFailed: t could not be reopened; what waits on it is told why, in
// the agent's words where it gave them. A thread made for the client's own
// load or resume is forgotten; another stays lost, for a later request.
func (r *router) reopenFailed(t *thread, why error) {
	r.Log.Warn("a session could not be reopened", "session", t.id, "why", why)
	err := acp.Errorf(acp.CodeInternal, "session %s could not be opened in a new process: %v", t.id, why)
	if t.opener != nil {
		r.answer(t.opener.id, nil, err)
		t.opener = nil
	}
	r.answerJoiners(t, channel.EncodeResponse("null", nil, err))
	if t.opened == nil { // it was never open here
		r.forget(t, "not opened")
		return
	}
	if t.child != nil && t.child.state != childDead {
		r.moveThread(t, threadEvicting) // its process still ends; a later reopening waits for it
	} else {
		r.moveThread(t, threadLost)
	}
	r.failHeld(t, acp.Errorf(acp.CodeInternal, "session %s could not be reopened in a new process (%v); send the request again to try again, or open a new thread", t.id, why))
}

// onReopenTimeout: t's reopening took longer than --reopen-timeout; its
// child is ended and what waits is told.
func (r *router) onReopenTimeout(t *thread, c *child) {
	if !t.reopening() || t.child != c {
		return
	}
	for id, req := range c.pending {
		if req.kind == kindReopen {
			delete(c.pending, id)
			if req.clientID != nil {
				r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "session %s: the agent did not answer %s within %s (--reopen-timeout); try again, or open a new thread", t.id, req.method, r.ReopenTimeout))
			}
		}
	}
	r.endChild(c, false)
	r.reopenFailed(t, fmt.Errorf("the agent did not answer within %s (--reopen-timeout)", r.ReopenTimeout))
}

// stopReopen cancels t's reopening: its bound is stopped and its child's
// reopening request forgotten (the caller ends the child).
func (r *router) stopReopen(t *thread) {
	if t.timer != nil {
		t.timer.Stop()
	}
	if c := t.child; c != nil {
		for id, req := range c.pending {
			if req.kind == kindReopen {
				delete(c.pending, id)
				if req.clientID != nil {
					r.answer(req.clientID, nil, acp.Errorf(acp.CodeRequestCancelled, "%s of session %s was cancelled", req.method, t.id))
				}
			}
		}
	}
}

// errorMessage is a JSON-RPC error's message, or the error as it is.
func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Message == "" {
		return string(raw)
	}
	// The agent's reason is often in data (gemini: "Internal error" with
	// data.details saying which session was not found, and where).
	var data struct {
		Details string `json:"details"`
		Message string `json:"message"`
	}
	json.Unmarshal(e.Data, &data)
	var s string
	if json.Unmarshal(e.Data, &s) == nil && s != "" {
		data.Details = s
	}
	if why := cmp.Or(data.Details, data.Message); why != "" && why != e.Message {
		return e.Message + ": " + why
	}
	return e.Message
}
