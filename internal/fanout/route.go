// route.go holds the routing of lines: the client's to the children (by
// session, to the pool, or answered here), a child's to the client (its
// answers with the client's ids, its requests with the connection's, its
// updates as they are), and the checks that keep a child to its own thread.

package fanout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/events"
	"acpbridge/internal/jsonenc"
)

// clientMessage is a request or notification of the client's, as routed.
type clientMessage struct {
	id      json.RawMessage // nil for a notification
	method  string
	params  json.RawMessage
	session *string // params.sessionId, when there is one
}

// onClientMessage routes one client message, in arrival order. The wire has
// decoded it once and answered what is not a well-formed request or
// notification; its params go on to the child as they are.
func (r *router) onClientMessage(msg channel.Message) {
	method, _ := msg.Get("method")
	var m clientMessage
	if msg == nil || json.Unmarshal(method, &m.method) != nil {
		r.respond(json.RawMessage("null"), channel.EncodeResponse("null", nil, &jrpc2.Error{Code: jrpc2.InvalidRequest, Message: "invalid request: not a JSON-RPC request object"}))
		return
	}
	m.id, _ = msg.Get("id")
	m.params, _ = msg.Get("params")
	var p struct {
		SessionID *string `json:"sessionId"`
	}
	json.Unmarshal(m.params, &p)
	m.session = p.SessionID
	if m.id != nil && !r.arrived(m.id, m.method) {
		r.out.Send(channel.EncodeResponse(string(m.id), nil, &jrpc2.Error{Code: jrpc2.InvalidRequest, Message: "duplicate request ID"}))
		return
	}
	r.route(m)
}

// route sends m where it goes: a thread, the pool, or an answer here.
func (r *router) route(m clientMessage) {
	if r.ending() && m.id != nil {
		r.answer(m.id, nil, acp.Errorf(acp.CodeInternal, "acpbridge --fanout is ending (stdin closed or a signal); %s was not served", m.method))
		return
	}
	if r.Command != nil && r.conn.state == connNew && m.id != nil && m.method != acp.MethodInitialize {
		// Another agent's process takes nothing before its initialize.
		r.answer(m.id, nil, acp.Errorf(acp.CodeNotInitialized, "%s before initialize: send initialize first", m.method))
		return
	}
	switch {
	case m.method == acp.MethodCancelRequest:
		r.cancelRequest(m.params)
		if m.id != nil { // a notification sent as a request: done all the same, and answered, as acpbridge alone answers it
			r.answer(m.id, nil, nil)
		}
	case m.method == acp.MethodInitialize && m.id != nil:
		r.onInitialize(m)
	case m.method == acp.MethodSessionNew && m.id != nil:
		r.openNew(m)
	case m.session == nil || m.method == acp.MethodSessionList:
		if m.id != nil {
			r.send(r.sessionless(), &request{clientID: m.id, method: m.method, params: authParams(m)}, m.params)
		}
	default:
		r.toThread(m)
	}
}

// toThread routes what names a session to its thread (thread.go).
func (r *router) toThread(m clientMessage) {
	t := r.threads[*m.session]
	switch {
	case m.method == acp.MethodSessionLoad || m.method == acp.MethodSessionResume:
		r.loadOrResume(t, m)
	case m.method == acp.MethodSessionDelete:
		r.deleteThread(t, m)
	case t == nil && m.id != nil:
		r.answer(m.id, nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is not open on this connection; open it with session/load or session/resume, or create one with session/new", *m.session).
			WithData(map[string]string{"sessionId": *m.session}))
	case t == nil:
		// a notification for no thread: nothing to do
	case m.method == acp.MethodSessionClose && m.id != nil:
		r.closeThread(t, m)
	case t.state == threadOpen:
		r.send(t.child, &request{clientID: m.id, method: m.method, thread: t}, m.params)
	default:
		r.hold(t, m)
	}
}

// authParams keeps an authenticate's params, which a success makes the
// router repeat to every child.
func authParams(m clientMessage) json.RawMessage {
	if m.method == acp.MethodAuthenticate {
		return m.params
	}
	return nil
}

// send writes a request (or, with no id and kind client, a notification)
// to c under an id of c's own; it is held while c is not ready. A child
// whose queue is full does not read: the client's request is answered with
// an error naming it.
func (r *router) send(c *child, req *request, params json.RawMessage) {
	if c.state == childDead {
		if req.clientID != nil {
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent process for %s has ended; send it again", req.method))
		}
		return
	}
	notification := req.kind == kindClient && req.clientID == nil
	var head []byte
	if notification {
		head = jsonenc.AppendString([]byte(`{"jsonrpc":"2.0","method":`), req.method)
	} else {
		c.nextID++
		head = jsonenc.AppendString(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":`, c.nextID), req.method)
		req.sent = time.Now()
		c.pending[c.nextID] = req
	}
	c.active = time.Now()
	parts := [][]byte{head, []byte("}\n")}
	if len(params) > 0 {
		parts = [][]byte{append(head, `,"params":`...), params, []byte("}\n")}
	}
	if req.kind == kindReopen {
		r.Trace.Child("to-child", c.pid, bytes.TrimSuffix(bytes.Join(parts, nil), []byte("\n")))
	}
	if !r.accepts(c, req) {
		h := heldLine{parts: parts}
		if !notification {
			h.id = c.nextID
		}
		c.held = append(c.held, h)
		if req.clientID != nil {
			r.holds(req.clientID, waitReady, req.thread, c)
		}
		return
	}
	if req.clientID != nil {
		r.holds(req.clientID, waitAnswer, req.thread, c)
	}
	behind, _ := c.in.waiting()
	pushed := c.in.push(parts, r.queuedBytes())
	switch {
	case notification && req.method == acp.MethodSessionCancel && (behind > 0 || !pushed):
		r.cancelBehind(c)
	case !pushed && notification:
		r.Log.Warn("a child does not read its input; a notification to it is dropped", "pid", c.pid, "session", c.session, "method", req.method)
	case !pushed:
		delete(c.pending, c.nextID)
		r.notReading(c, req)
	}
}

// cancelBehind is a session/cancel for c while lines wait for c to read
// them (or its queue refused the cancel): c may never read it, and the turn
// the user stopped must not run on for them. The prompts c has not
// answered are answered cancelled here; c's own answers to them, should it
// read again, are dropped.
func (r *router) cancelBehind(c *child) {
	r.Log.Warn("a child is behind on its input; its prompts are answered cancelled by the router", events.Of(events.CancelBehind), "pid", c.pid, "session", c.session)
	r.promptsCancelled(c)
}

// promptsCancelled answers the prompts c has not answered cancelled, here;
// c's own answers to them are dropped.
func (r *router) promptsCancelled(c *child) {
	for id, p := range c.pending {
		if p.method == acp.MethodSessionPrompt && p.clientID != nil {
			delete(c.pending, id)
			r.answer(p.clientID, acp.PromptResult{StopReason: acp.StopCancelled}, nil)
		}
	}
}

// accepts reports whether a line for c goes to its stdin now: it is ready,
// or the line is part of making it ready, or it is an acpbridge child,
// which takes requests before its initialize is answered, in order.
func (r *router) accepts(c *child, req *request) bool {
	if c.in == nil { // not started, ending ones included: held until its start (which ends one ending)
		return false
	}
	switch c.state {
	case childStarting:
		return false
	case childSpare, childInitializing:
		return req.kind == kindInit || (req.kind == kindClient && req.method == acp.MethodInitialize) || r.Command == nil
	case childAuthenticating:
		return req.kind == kindAuth
	}
	return len(c.held) == 0
}

// notReading answers a request that c's full queue refused.
func (r *router) notReading(c *child, req *request) {
	lines, n := c.in.waiting()
	r.Log.Warn("a child does not read its input; a request to it is refused", "pid", c.pid, "session", c.session, "method", req.method, "lines", lines, "bytes", n)
	if req.clientID != nil {
		what := "its agent process"
		if c.session != "" {
			what = "the agent process of session " + c.session
		}
		r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "%s is not reading its input (%d messages, %d bytes wait for it); %s was not sent: wait for it, cancel its turn, or close the thread", what, lines, n, req.method))
	}
}

// release writes c's held lines now that it is ready.
func (r *router) release(c *child) {
	held := c.held
	c.held = nil
	for _, h := range held {
		if req := c.pending[h.id]; h.id != 0 && req != nil && req.clientID != nil {
			r.holds(req.clientID, waitAnswer, req.thread, c)
		}
		if !c.in.push(h.parts, r.queuedBytes()) {
			r.Log.Warn("a child does not read its input; held lines dropped", "pid", c.pid, "session", c.session)
		}
	}
}

// cancelRequest is the client's $/cancel_request: the request it names is
// withdrawn where it waits (held.go): one waiting for a process, on a
// thread or for its child to be ready is answered -32800 and never sent;
// one at a child is cancelled there, under the child's id for it; an
// answered or unknown id changes nothing.
func (r *router) cancelRequest(params json.RawMessage) {
	want := acp.CancelledRequest(params)
	h := r.inflight.of(want)
	if want == nil || h == nil {
		return
	}
	switch h.waits {
	case waitProcess:
		// A session/new still waiting for a process (one starting, which
		// may never be ready, or a slot): withdrawn here, answered at
		// once; the process it would have taken stays a spare.
		r.answer(want, nil, acp.Errorf(acp.CodeRequestCancelled, "session/new was withdrawn ($/cancel_request) before an agent process was ready for it"))
	case waitThread, waitLoad, waitJoined:
		r.unhold(h.thread, want)
	case waitReady, waitAnswer:
		r.cancelAtChild(h.child, want)
	}
}

// cancelAtChild withdraws the client's request want, sent to c: a load that
// others joined goes on for the first of them; a request c is not ready
// for is answered -32800 and never sent; one c has is cancelled there.
func (r *router) cancelAtChild(c *child, want json.RawMessage) {
	for id, req := range c.pending {
		if req.clientID == nil || !bytes.Equal(req.clientID, want) {
			continue
		}
		if t := req.thread; req.kind == kindReopen && t != nil {
			if next, ok := r.passOn(t); ok {
				// A load that others joined: the withdrawn one is answered
				// now, and the opening goes on for the first that joined
				// it, whose answer it becomes.
				r.answer(req.clientID, nil, acp.Errorf(acp.CodeRequestCancelled, "%s of session %s was cancelled", req.method, t.id))
				req.clientID = next.id
				r.holds(next.id, waitAnswer, t, c)
				return
			}
		}
		if i := slices.IndexFunc(c.held, func(h heldLine) bool { return h.id == id }); i >= 0 {
			// Still waiting for its child to be ready (which may never
			// be): withdrawn here, answered at once.
			c.held = slices.Delete(c.held, i, i+1)
			delete(c.pending, id)
			r.answer(req.clientID, nil, acp.Errorf(acp.CodeRequestCancelled, "%s was withdrawn ($/cancel_request) before its agent process was ready for it", req.method))
			if c.once && len(c.pending) == 0 {
				r.endChild(c, false) // started past the cap for it alone: it serves nothing now
			}
			return
		}
		r.send(c, &request{method: acp.MethodCancelRequest}, fmt.Appendf(nil, `{"requestId":%d}`, id))
		return
	}
}

// onChildMessage handles one of c's lines, in the order c wrote them.
func (r *router) onChildMessage(c *child, m childMessage) {
	if !m.ok {
		r.Log.Warn("a child wrote a line that is not a JSON-RPC message; it is dropped", events.Of(events.ChildLineDropped), "pid", c.pid, "session", c.session, "bytes", len(m.line))
		return
	}
	if m.method != "" && !r.trusted(c, m.session) {
		r.Log.Warn("a child named a session it does not serve; its message is dropped", events.Of(events.ChildSpoofed), "pid", c.pid, "serves", c.session, "named", m.session, "method", m.method)
		return
	}
	switch {
	case m.method == acp.MethodCancelRequest:
		r.withdraw(c, m.reqID)
		if len(m.id) > 0 { // a notification sent as a request: translated all the same, and answered
			r.toChild(c, acp.Response{JSONRPC: "2.0", ID: m.id, Result: json.RawMessage("null")})
		}
	case m.method != "" && len(m.id) == 0:
		if c.state == childReplaying || c.state == childDead {
			r.Trace.Child("from-child", c.pid, m.line)
			return
		}
		r.out.Forward(m.line) // session/update: unchanged, in order
	case m.method != "":
		r.callClient(c, m)
	default:
		n, err := strconv.ParseInt(string(m.id), 10, 64)
		req, ok := c.pending[n]
		if err != nil || !ok {
			return
		}
		delete(c.pending, n)
		c.active = time.Now()
		r.onAnswer(c, req, m)
	}
}

// trusted reports whether c may send a message naming session: its own, or
// (while it opens a session whose id is not known yet) one that is no other
// thread's.
func (r *router) trusted(c *child, session string) bool {
	switch {
	case session == "":
		return true
	case c.session != "":
		return session == c.session
	}
	_, other := r.threads[session]
	return !other
}

// onChildLineTooLong: c wrote a line over the line limit, dropped unkept;
// its thread is told.
func (r *router) onChildLineTooLong(c *child) {
	c.dropped++
	r.Log.Warn("a child wrote a line over --max-line-bytes; it is dropped", "pid", c.pid, "session", c.session, "limit", r.MaxLine, "dropped", c.dropped)
	if c.session == "" || c.state == childReplaying {
		return
	}
	text := fmt.Sprintf("[acpbridge: the agent wrote a message longer than the line limit (--max-line-bytes %d); it was dropped. If a request waits on it, cancel it.]", r.MaxLine)
	u, _ := json.Marshal(map[string]any{"sessionId": c.session, "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}})
	r.out.Notify(acp.MethodSessionUpdate, u)
}

// callClient passes c's request on to the client with an id of the
// connection's, and its answer back under c's id; at most childCalls of c's
// are open at once (a child that floods the client is answered an error).
// The request is written here, on the loop, as every other line of c's:
// the client reads c's lines in the order c wrote them, and c's reader
// counts the request's bytes (the budget) until the client has taken them.
// Only its id is kept while the answer is awaited.
func (r *router) callClient(c *child, m childMessage) {
	key := string(m.id)
	if _, dup := c.calls[key]; dup || len(c.calls) >= childCalls {
		why := fmt.Sprintf("too many requests open at the client (%d at most per agent process)", childCalls)
		if dup {
			why = "a request with this id is already open"
		}
		r.toChild(c, acp.Response{JSONRPC: "2.0", ID: m.id, Error: acp.MustJSON(acp.Errorf(acp.CodeInternal, "acpbridge --fanout did not send %s to the client: %s", m.method, why))})
		return
	}
	params := m.params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	id := bytes.Clone(m.id)
	asked, err := r.out.Ask(m.method, params)
	if err != nil {
		r.toChild(c, acp.Response{JSONRPC: "2.0", ID: id, Error: acp.MustJSON(acp.AsError(err))})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.calls[key] = cancel
	r.spawn(func() {
		defer cancel()
		raw, err := asked.Wait(ctx, true)
		resp := acp.Response{JSONRPC: "2.0", ID: id, Result: raw}
		switch {
		case err != nil:
			resp.Result, resp.Error = nil, acp.MustJSON(acp.AsError(err))
		case len(raw) == 0:
			resp.Result = json.RawMessage("null")
		}
		r.post(func() { r.onCallAnswered(c, key, resp) })
	})
}

// onCallAnswered: the client answered (or could not answer) c's request.
func (r *router) onCallAnswered(c *child, key string, resp acp.Response) {
	delete(c.calls, key)
	c.active = time.Now()
	r.toChild(c, resp)
	r.serveWaiters() // its thread may be idle now
}

// toChild writes a response to c's own request; it needs no readiness (c
// asked), but a child that does not read loses it.
func (r *router) toChild(c *child, resp acp.Response) {
	if c.state == childDead {
		return
	}
	b, _ := jsonenc.AppendTrusted(nil, resp)
	if !c.in.push([][]byte{append(b, '\n')}, r.queuedBytes()) {
		r.Log.Warn("a child does not read its input; an answer to it is dropped", "pid", c.pid, "session", c.session)
	}
}

// withdraw is c's own $/cancel_request for a request of its at the client:
// the client is told under the connection's id for it.
func (r *router) withdraw(c *child, id json.RawMessage) {
	if cancel, ok := c.calls[string(id)]; ok {
		cancel()
	}
}
