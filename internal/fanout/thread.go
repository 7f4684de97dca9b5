// thread.go holds the threads: the sessions the client has open on this
// connection, their states (doc.go), and the events that move them:
// opening, closing, deleting, loading and resuming, eviction, and what
// waits on a thread while its process is away.

package fanout

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/events"
)

// thread is a session the client has open on this connection.
type thread struct {
	id     string
	state  threadState
	child  *child          // open: its process; evicting: the one ending; reopening: the one opening it
	opened json.RawMessage // its opening params (cwd, MCP servers), to reopen it
	held   []clientMessage // what waits for its process (evicting, lost, reopening)
	opener *clientMessage  // loading: the client's load or resume, until it is sent
	timer  *time.Timer     // the reopening's bound
	why    string          // why it is evicting, for the log
	// listed says the agent's session/list has shown the session: an
	// agent that lists sessions can reopen only those it lists (gemini
	// keeps none before its first prompt), so a thread of such an agent is
	// evicted only once listed.
	listed bool
	// keptIdle says the log has said that it is kept past the idle
	// timeout, as its agent cannot reopen it.
	keptIdle bool
	// crashed is how its last process ended unexpectedly, until the user
	// has been told of it (a notice once it is reopened); crashes counts
	// such ends since its last prompt answered, bounded by maxCrashes.
	crashed string
	crashes int
	// gone says why t cannot come back, as the user was told when its
	// process ended (its agent cannot reopen it): its requests are
	// answered so at once, not reopened.
	gone string
	// joiners are the client's loads of this session that came while its
	// load by the client was in flight (Zed restoring a thread shown in
	// two panes): answered from that one opening, never replayed twice. A
	// joiner withdrawn is answered at once; the load they joined,
	// withdrawn, hands its opening to the first of them (passOn).
	joiners []clientMessage
}

// reopening reports whether a new process is being found for t or opens
// it: loading, reopening or retrying.
func (t *thread) reopening() bool {
	return t.state == threadLoading || t.state == threadReopening || t.state == threadRetrying
}

// openNew gives a session/new a child of its own; the thread exists once
// the child answers with its id.
func (r *router) openNew(m clientMessage) {
	dir := r.processDir(m.params)
	r.spareDir = dir // the next thread is likely opened where this one was
	r.holds(m.id, waitProcess, nil, nil)
	h := r.inflight.of(m.id)
	r.take(dir, func(c *child, err error) {
		if r.inflight.of(m.id) != h { // withdrawn while it waited (its id perhaps sent again since, for another wait)
			if c != nil {
				r.spares = append([]*child{c}, r.spares...)
				r.serveWaiters() // the next waiting take has it
			}
			return
		}
		if err != nil {
			r.answer(m.id, nil, acp.Errorf(acp.CodeInternal, "%v", err))
			return
		}
		r.becomes(c, childOpening)
		r.send(c, &request{clientID: m.id, method: m.method, params: m.params}, m.params)
	})
}

// opened: c answered the client's session/new with sid.
func (r *router) opened(c *child, req *request, sid string) bool {
	if t, live := r.threads[sid]; live {
		r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent answered session/new with session id %q, which is already live on this connection (a thread %s there); each session needs an id of its own: fix the agent, or close the other thread first", sid, t.state))
		r.endChild(c, false)
		return false
	}
	t := &thread{id: sid, state: threadOpen, child: c, opened: req.params}
	r.threads[sid] = t
	c.thread, c.session = t, sid
	r.served()
	r.becomes(c, childServing)
	return true
}

// loadOrResume serves session/load and session/resume of a session. Of
// one not open here: a thread is made for it and reopened by this request.
// Of an open thread: resume goes to its child (a reattach), load reopens
// it in a new process whose replay the client sees (refused while
// anything of the thread is in flight). Of an evicted or lost one: this
// request reopens it.
func (r *router) loadOrResume(t *thread, m clientMessage) {
	if t == nil {
		t = &thread{id: *m.session, state: threadLost}
		r.threads[t.id] = t
	}
	switch {
	case t.state == threadOpen && m.method == acp.MethodSessionResume:
		r.send(t.child, &request{clientID: m.id, method: m.method, thread: t}, m.params)
	case m.method == acp.MethodSessionLoad && r.clientLoading(t):
		t.joiners = append(t.joiners, m)
		r.holds(m.id, waitJoined, t, nil)
	case t.reopening():
		r.hold(t, m)
	case t.state == threadOpen && r.clientBusy(t):
		r.answer(m.id, nil, acp.Errorf(acp.CodeTurnRunning, "session %s has a prompt or another request in flight; wait for its answer or cancel it, then load it again", t.id).
			WithData(map[string]string{"sessionId": t.id}))
	case t.state == threadOpen:
		t.opener = &m
		r.holds(m.id, waitLoad, t, nil)
		if !r.evict(t, "session/load", threadLoading) {
			// It cannot be reopened in a new process (its agent does not
			// list it yet, or cannot reopen at all): the process that
			// serves it loads it, and any refusal is the agent's own.
			t.opener = nil
			r.send(t.child, &request{clientID: m.id, method: m.method, thread: t}, m.params)
		}
	default: // lost, or evicting
		t.opener = &m
		r.holds(m.id, waitLoad, t, nil)
		r.moveThread(t, threadLoading)
		r.reopen(t)
	}
}

// closeThread serves session/close: an open thread's child closes it and
// ends (for an agent without close, the router answers and ends it); a
// thread with no process, or one being reopened (the reopening is
// cancelled), is closed here.
func (r *router) closeThread(t *thread, m clientMessage) {
	switch {
	case t.state == threadOpen && !r.agent.noClose:
		r.send(t.child, &request{clientID: m.id, method: m.method, thread: t}, m.params)
		return
	case t.state == threadOpen: // a close the client asked for ends its turn cancelled, not as a crash
		r.promptsCancelled(t.child)
		r.endChild(t.child, false)
	case t.reopening():
		r.stopReopen(t)
		if t.child != nil { // else it still waits for a process: given back when it comes
			r.endChild(t.child, false)
		}
	}
	r.forget(t, "closed")
	r.answer(m.id, struct{}{}, nil)
}

// deleteThread serves session/delete: a thread open here is closed (its
// process ended), then the session is deleted by a child of the pool,
// once the process that held it has ended.
func (r *router) deleteThread(t *thread, m clientMessage) {
	forward := func() {
		if m.id != nil {
			r.send(r.sessionless(), &request{clientID: m.id, method: m.method}, m.params)
		}
	}
	if t == nil {
		forward()
		return
	}
	c := t.child
	if t.reopening() {
		r.stopReopen(t)
	}
	if c != nil && c.state != childDead {
		r.endChild(c, true) // session/close first, while the child still serves it
		c.after = append(c.after, forward)
	}
	r.forget(t, "deleted")
	if c == nil || c.state == childDead {
		forward()
	}
}

// clientLoading reports whether a session/load of the client's is opening
// t: waiting for its process, or sent to it.
func (r *router) clientLoading(t *thread) bool {
	if t.opener != nil {
		return t.opener.method == acp.MethodSessionLoad
	}
	if t.state != threadReopening || t.child == nil {
		return false
	}
	for _, req := range t.child.pending {
		if req.kind == kindReopen && req.clientID != nil && req.method == acp.MethodSessionLoad {
			return true
		}
	}
	return false
}

// answerJoiners answers the loads that joined t's opening with its
// answer (line, as written to the client).
func (r *router) answerJoiners(t *thread, line []byte) {
	for _, j := range t.joiners {
		r.respond(j.id, acp.WithID(line, j.id))
	}
	t.joiners = nil
}

// forget closes t for the client: what waits on it is answered, and later
// requests naming it are not open here.
func (r *router) forget(t *thread, why string) {
	if t.state == threadClosed {
		return
	}
	r.moveThread(t, threadClosed)
	delete(r.threads, t.id)
	r.failHeldWith(t, func(m clientMessage) error {
		return acp.Errorf(acp.CodeResourceNotFound, "session %s was %s before %s could be served", t.id, why, m.method)
	})
	if t.opener != nil {
		r.answer(t.opener.id, nil, acp.Errorf(acp.CodeRequestCancelled, "session %s was %s before %s was served", t.id, why, t.opener.method))
		t.opener = nil
	}
	r.answerJoiners(t, channel.EncodeResponse("null", nil, acp.Errorf(acp.CodeRequestCancelled, "session %s was %s before its load was served", t.id, why)))
	if t.child != nil && t.child.thread == t && t.child.state != childDead {
		t.child.session = "" // its late lines name no thread of ours
	}
}

// hold keeps m on t until t is open again; a request on a lost thread
// starts its reopening.
func (r *router) hold(t *thread, m clientMessage) {
	if m.method == acp.MethodSessionCancel {
		// Nothing of the thread runs: the prompts waiting end cancelled;
		// what else waits stays.
		var rest []clientMessage
		for _, h := range t.held {
			if h.method == acp.MethodSessionPrompt && h.id != nil {
				r.answer(h.id, acp.PromptResult{StopReason: acp.StopCancelled}, nil)
			} else {
				rest = append(rest, h)
			}
		}
		t.held = rest
		return
	}
	t.held = append(t.held, m)
	if m.id != nil {
		r.holds(m.id, waitThread, t, nil)
	}
	if t.state == threadLost && m.id != nil {
		r.reopen(t)
	}
}

// unhold answers -32800 to the request id waiting on t, if it is there.
func (r *router) unhold(t *thread, id []byte) bool {
	if i := slices.IndexFunc(t.joiners, func(j clientMessage) bool { return string(j.id) == string(id) }); i >= 0 {
		// A load that joined another: that one goes on.
		r.answer(id, nil, acp.Errorf(acp.CodeRequestCancelled, "session/load of session %s was cancelled", t.id))
		t.joiners = slices.Delete(t.joiners, i, i+1)
		return true
	}
	if t.opener != nil && string(t.opener.id) == string(id) {
		// Not sent yet: its thread waits for its old process to end.
		r.answer(t.opener.id, nil, acp.Errorf(acp.CodeRequestCancelled, "%s of session %s was cancelled", t.opener.method, t.id))
		t.opener = nil
		if next, ok := r.passOn(t); ok {
			t.opener = &next // the load that joined it opens the thread instead
			r.holds(next.id, waitLoad, t, nil)
			return true
		}
		switch {
		case t.opened == nil && len(t.held) == 0:
			r.forget(t, "not opened")
		case t.child != nil: // its old process still ends
			r.moveThread(t, threadEvicting)
		default: // the process being given goes back to the pool
			r.moveThread(t, threadLost)
			if len(t.held) > 0 {
				r.reopen(t)
			}
		}
		return true
	}
	for i, m := range t.held {
		if string(m.id) == string(id) {
			t.held = append(t.held[:i], t.held[i+1:]...)
			r.answer(m.id, nil, acp.Errorf(acp.CodeRequestCancelled, "%s of session %s was cancelled before it was sent", m.method, t.id))
			return true
		}
	}
	return false
}

// passOn takes the first of the loads that joined t's opening, when the
// client's load that opens it was withdrawn: the opening goes on for it.
func (r *router) passOn(t *thread) (clientMessage, bool) {
	if len(t.joiners) == 0 {
		return clientMessage{}, false
	}
	next := t.joiners[0]
	t.joiners = t.joiners[1:]
	return next, true
}

// failHeld answers what waits on t with err: a prompt ends cancelled when
// err is nil (the router's end, a session/cancel); other requests get err,
// or an error saying the router ends.
func (r *router) failHeld(t *thread, err error) {
	r.failHeldWith(t, func(clientMessage) error { return err })
}

func (r *router) failHeldWith(t *thread, errFor func(clientMessage) error) {
	held := t.held
	t.held = nil
	for _, m := range held {
		if m.id == nil {
			continue
		}
		err := errFor(m)
		switch {
		case err == nil && m.method == acp.MethodSessionPrompt:
			r.answer(m.id, acp.PromptResult{StopReason: acp.StopCancelled}, nil)
		case err == nil:
			r.answer(m.id, nil, acp.Errorf(acp.CodeRequestCancelled, "%s of session %s was not sent: the thread's turn was cancelled, or acpbridge --fanout is ending", m.method, t.id))
		default:
			r.answer(m.id, nil, err)
		}
	}
}

// evictable reports whether t's process may be given back: open, with
// nothing in flight (no request of the client's, none of the child's open
// at the client), and an agent that can reopen it.
func (r *router) evictable(t *thread) bool {
	return t.state == threadOpen && !r.busy(t) && r.cannotReopen() == "" && (!r.agent.canList || t.listed)
}

// busy reports whether something of open t's is in flight: a request of
// the client's or of the agent's (clientBusy), or the router's own.
func (r *router) busy(t *thread) bool {
	return r.clientBusy(t) || len(t.child.pending) > 0
}

// clientBusy reports whether something of the client's with open t is in
// flight: its request, or the agent's request to it; not the router's own
// (its check of the agent's list after a turn), which a load need not
// wait for.
func (r *router) clientBusy(t *thread) bool {
	c := t.child
	for _, req := range c.pending {
		if req.clientID != nil {
			return true
		}
	}
	return len(c.calls) > 0 || len(c.held) > 0
}

// checkListed asks t's process, after a turn, whether the agent lists t's
// session (in its working directory): then t can be evicted.
func (r *router) checkListed(t *thread) {
	var opened struct {
		Cwd string `json:"cwd"`
	}
	json.Unmarshal(t.opened, &opened)
	params, _ := json.Marshal(map[string]any{"cwd": opened.Cwd})
	if opened.Cwd == "" {
		params = []byte("{}")
	}
	r.send(t.child, &request{kind: kindList, method: acp.MethodSessionList, thread: t}, params)
}

// listed: t's process answered checkListed with m.
func (r *router) listed(t *thread, m childMessage) {
	var res struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
	}
	json.Unmarshal(m.result, &res)
	t.listed = slices.ContainsFunc(res.Sessions, func(s struct {
		SessionID string `json:"sessionId"`
	}) bool {
		return s.SessionID == t.id
	})
	if !t.listed {
		r.Log.Debug("the agent does not list a session; its thread is kept", "session", t.id, "error", errorMessage(m.err))
	}
}

// evict gives back t's process: the session is closed in it (where the
// agent offers session/close) and the child ends; the thread waits for the
// end (evicting), then is lost until its next request reopens it (at once,
// when something waits); or, loading, is opened by the client's load.
func (r *router) evict(t *thread, why string, to threadState) bool {
	if !r.evictable(t) {
		return false
	}
	c := t.child
	r.moveThread(t, to)
	t.why = why
	r.Log.Debug("evicting a thread's process", events.Of(events.Evicting), "session", t.id, "why", why, "pid", c.pid, "idle", time.Since(c.active).Round(time.Millisecond))
	r.endChild(c, true)
	return true
}

// armIdle checks for idle threads every so often (--idle-timeout).
func (r *router) armIdle() {
	if r.IdleTimeout > 0 && !r.ending() {
		r.idleTimer = r.after(min(r.IdleTimeout/2, time.Second), r.onIdleCheck)
	}
}

// onIdleCheck evicts the threads idle for --idle-timeout.
func (r *router) onIdleCheck() {
	for _, t := range r.threads {
		if t.state == threadOpen && time.Since(t.child.active) >= r.IdleTimeout && !r.evict(t, "idle", threadEvicting) && !t.keptIdle {
			t.keptIdle = true // said once: the check runs every so often
			r.Log.Debug("an idle thread is kept", events.Of(events.IdleKept), "session", t.id, "why", cmp.Or(r.agent.noEvict, "not evictable now"))
		}
	}
	r.armIdle()
}
