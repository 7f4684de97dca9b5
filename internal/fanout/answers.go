// answers.go holds what a child's answers and its end move: the client's
// answers relayed under the client's ids, a child made ready or serving
// (settle), and a child's death (what it left unanswered, its thread lost,
// its slot freed).

package fanout

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/events"
	"acpbridge/internal/jsonenc"
)

// onAnswer: c answered req with m.
func (r *router) onAnswer(c *child, req *request, m childMessage) {
	failed := len(m.err) > 0
	switch req.kind {
	case kindInit:
		r.initAnswered(c, failed)
	case kindAuth:
		if failed {
			r.Log.Warn("an agent process refused the repeated authenticate", "pid", c.pid, "error", errorMessage(m.err))
		}
		r.settle(c)
	case kindReopen:
		r.onReopened(c, req, m)
	case kindEvict:
		if c.state == childEnding && c.endStep == 0 {
			r.endStepNext(c) // closed: its stdin now
		}
	case kindList:
		r.listed(req.thread, m)
	default:
		r.clientAnswered(c, req, m)
	}
	r.serveWaiters() // an answer may leave a thread idle, to give way to a waiting one
}

// clientAnswered relays c's answer to a client's request and moves what it
// changes: the agent learnt, a thread opened or closed, an authenticate to
// repeat, a child of the moment ended.
func (r *router) clientAnswered(c *child, req *request, m childMessage) {
	failed := len(m.err) > 0
	switch req.method {
	case acp.MethodInitialize:
		if !failed {
			m.result = r.learnAgent(m.result)
		}
		r.firstInitAnswered(r.relay(req, m), !failed)
		r.initAnswered(c, failed)
		return
	case acp.MethodAuthenticate:
		if !failed {
			r.authenticated(c, req.params)
		}
	case acp.MethodSessionNew:
		var res struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(m.result, &res)
		if failed || res.SessionID == "" {
			r.endChild(c, false) // it serves nothing
		} else if !r.opened(c, req, res.SessionID) {
			return
		}
		r.relay(req, m)
		r.out.Flush()
		r.warmAfterTurns() // the thread's first turn comes before its successor's process starts
		return
	case acp.MethodSessionClose:
		if t := req.thread; !failed && t != nil && t.child == c {
			r.forget(t, "closed")
			r.endChild(c, false)
		}
	}
	r.relay(req, m)
	if t := c.thread; t != nil && req.method == acp.MethodSessionPrompt && len(m.err) == 0 {
		t.crashes = 0 // it serves again
	}
	if req.method == acp.MethodSessionPrompt {
		r.turnEnded()
	}
	if c.once && len(c.pending) == 0 {
		r.endChild(c, false)
	}
	if t := c.thread; req.method == acp.MethodSessionPrompt && t != nil && t.child == c && r.agent.canList && !t.listed {
		r.checkListed(t)
	}
}

// relay writes c's answer m to the client under the client's id, and
// returns the line written.
func (r *router) relay(req *request, m childMessage) []byte {
	resp := acp.Response{JSONRPC: "2.0", ID: req.clientID, Result: m.result, Error: m.err}
	if len(m.err) > 0 {
		resp.Result = nil
	} else if len(m.result) == 0 {
		resp.Result = json.RawMessage("null")
	}
	b, _ := jsonenc.AppendTrusted(nil, resp)
	r.respond(req.clientID, b)
	return b
}

// settle moves c, now initialized (and authenticated), to what it was
// told it does (c.next: ready in the pool unless it was taken for a
// thread); its held lines go.
func (r *router) settle(c *child) {
	if c.state == childEnding || c.state == childDead {
		return
	}
	if c.state != c.next {
		r.moveChild(c, c.next)
	}
	r.release(c)
	if c.state == childReady {
		r.spareReady()
	}
}

// becomes tells c what it does from now: s at once when it is initialized
// (its held lines then go), else once it is (settle).
func (r *router) becomes(c *child, s childState) {
	c.next = s
	switch c.state {
	case childStarting, childSpare, childInitializing, childAuthenticating, childEnding, childDead:
		return
	}
	r.settle(c)
}

// onChildExited: c's process ended and its output was read. What it left
// unanswered is answered, its thread is lost (and reopened at once when
// something waits on it), what waited for its end runs, and its slot goes
// to whoever waits for one, or to a new spare.
func (r *router) onChildExited(c *child) {
	wasEnding := c.state == childEnding
	ownReopen := slices.ContainsFunc(slices.Collect(maps.Values(c.pending)), func(req *request) bool { return req.kind == kindReopen && req.clientID == nil })
	asked := len(c.pending) > 0 // before answerUnanswered empties it
	r.moveChild(c, childDead)
	r.endedMeanwhile = r.ending()
	delete(r.children, c)
	r.spares = slices.DeleteFunc(r.spares, func(s *child) bool { return s == c })
	if r.transient == c {
		r.transient = nil
	}
	closed := r.answerUnanswered(c)
	for _, cancel := range c.calls {
		cancel() // the client is told to drop them
	}
	if !wasEnding && !r.ending() && !closed && (c.session != "" || asked) {
		r.Log.Error("the process of a session ended", events.Of(events.ChildEnded), "session", c.session, "pid", c.pid, "status", c.cmd.ProcessState.String())
	}
	if (!wasEnding || c.gaveUp != "") && !r.ending() && c.session == "" && c.thread == nil {
		// A spare, or a process taken for a thread, that never served one:
		// it exited, or was ended for not answering initialize in time (an
		// agent that hangs there every time is not restarted for ever).
		r.startFailed(c)
	}
	if t := c.thread; t != nil && t.child == c && t.state != threadClosed {
		switch t.state {
		case threadReopening, threadRetrying:
			if t.state == threadReopening && ownReopen && !r.ending() {
				r.moveThread(t, threadRetrying) // tried once more, below
				break
			}
			r.reopenFailed(t, exitReason(c, "before it answered the reopening"))
			if t.state != threadClosed && !r.ending() {
				r.crashed(t, c) // a process that dies at every reopen is bounded as a flapping thread is
			}
		case threadOpen:
			r.moveThread(t, threadLost)
			r.crashed(t, c)
		case threadEvicting:
			r.moveThread(t, threadLost)
		}
		t.child = nil // loading: its old process has ended
		again := t.state == threadLost && len(t.held) > 0 || t.state == threadLoading || t.state == threadRetrying
		if again && !r.ending() {
			r.reopen(t)
		}
	}
	for _, f := range c.after {
		f()
	}
	r.serveWaiters()
	r.warm()
}

// exitReason says how c's process ended, with its stderr's tail.
func exitReason(c *child, what string) error {
	return fmt.Errorf("the process %s %s; its stderr ends: %s", ended(c), what, cmp.Or(c.errTail.String(), "(nothing)"))
}

// ended says how c's process ended: its exit status, or that it was ended
// and is not reaped yet (killed at the router's end, its wait still due).
func ended(c *child) string {
	if c.cmd.ProcessState == nil {
		return "was ended (killed, not yet reaped)"
	}
	return fmt.Sprintf("ended (%s)", c.cmd.ProcessState)
}

// answerUnanswered answers the client's requests that the dead child c did
// not answer. When the router is ending (the client's EOF or a signal), a
// prompt the child did not answer in time was cancelled by that end, and
// is answered so: however many children end at once on however few cores,
// every running prompt is answered cancelled (the child persists its turn
// as interrupted before it exits). An exit with the client's session/close
// pending is the agent's way of closing (closed reports it): the close is
// answered, and a prompt it ended is cancelled.
func (r *router) answerUnanswered(c *child) (closed bool) {
	pending := c.pending
	c.pending = nil
	closing := slices.ContainsFunc(slices.Collect(maps.Values(pending)), func(req *request) bool {
		return req.method == acp.MethodSessionClose && req.clientID != nil
	})
	for _, req := range pending {
		switch {
		case req.clientID == nil:
			continue // the router's own
		case req.kind == kindReopen: // the client's load or resume; its thread is told by reopenFailed
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "session %s could not be opened in a new process: %v", c.session, exitReason(c, "before it answered "+req.method)))
			continue
		}
		switch {
		case req.method == acp.MethodSessionClose && req.thread != nil && !r.ending():
			// Some agents close a session by exiting: a close, not a
			// crash. The thread is closed as the client asked.
			r.forget(req.thread, "closed (its process exited at session/close)")
			r.answer(req.clientID, struct{}{}, nil)
			closed = true
		case closing && req.method == acp.MethodSessionPrompt:
			r.answer(req.clientID, acp.PromptResult{StopReason: acp.StopCancelled}, nil) // the close ends its turn
		case r.ending() && req.method == acp.MethodSessionPrompt:
			r.answer(req.clientID, acp.PromptResult{StopReason: acp.StopCancelled}, nil)
		case r.ending() && req.method != acp.MethodInitialize:
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "acpbridge was ending (its input ended, or a signal), and the agent process of session %s had not answered %s; it %s: send it again to a new acpbridge",
				cmp.Or(c.session, "(none yet)"), req.method, ended(c)))
		case req.method == acp.MethodInitialize:
			how := ended(c)
			if c.gaveUp != "" {
				how = c.gaveUp + ", and was ended"
			}
			err := acp.Errorf(acp.CodeInternal, "the agent %q %s before it answered initialize; its stderr ends: %s", strings.Join(r.Command, " "), how, cmp.Or(c.errTail.String(), "(nothing)"))
			r.answer(req.clientID, nil, err)
			r.firstInitAnswered(channel.EncodeResponse("null", nil, err), false)
		case c.session == "" && c.gaveUp != "":
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent process that was to serve %s %s; send it again", req.method, c.gaveUp))
		case c.session == "":
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent process that served %s %s before it answered; its stderr ends: %s; send it again once that is fixed", req.method, ended(c), cmp.Or(c.errTail.String(), "(nothing)")))
		default:
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "the process of session %s %s before it answered %s; %s", c.session, ended(c), req.method, r.afterDeath(c)))
		}
	}
	c.held = nil // their requests were pending, answered above
	return closed
}

// afterDeath says what becomes of the thread whose process (c) died.
func (r *router) afterDeath(c *child) string {
	switch {
	case r.cannotReopen() != "":
		return "the thread is lost, and cannot come back: " + r.cannotReopen() + "; open a new thread"
	case c.thread != nil && c.thread.crashes >= maxCrashes:
		return fmt.Sprintf("it has ended %d times in a row, so the thread is closed: open a new thread", c.thread.crashes+1)
	}
	return "the session is reopened in a new process on its next request"
}
