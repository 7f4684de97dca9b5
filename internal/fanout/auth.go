// auth.go holds how a child is made ready: the client's initialize
// (answered here for acpbridge children, relayed from a child for another
// agent), the same params sent to every child, the agent's capabilities
// learnt, and a successful authenticate repeated to every child.

package fanout

import (
	"encoding/json"

	"acpbridge/internal/acp"
)

// onInitialize serves the client's initialize. acpbridge children are this
// binary with these flags, so the router answers it; another agent's
// answer comes from the first child initialized (a spare, or one started
// now), relayed as it is but for session/close, offered when the agent
// lacks it. Every child gets the same params.
func (r *router) onInitialize(m clientMessage) {
	r.initArgs = m.params
	if r.Command == nil {
		r.answer(m.id, acp.AgentInitializeResult(r.Version), nil)
	} else {
		r.initClient = &request{clientID: m.id, method: acp.MethodInitialize}
		if len(r.spares) == 0 {
			r.start(nil) // a spare whatever the cap: the client waits on it
		}
	}
	for c := range r.children {
		if c.state == childSpare {
			r.initialize(c)
		}
	}
}

// initialize sends c the client's initialize params: as the client's own
// request for the first child (another agent's answer is the client's),
// else as the router's.
func (r *router) initialize(c *child) {
	req := r.initClient
	r.initClient = nil
	if req == nil {
		req = &request{kind: kindInit, method: acp.MethodInitialize}
	}
	c.state = childInitializing
	r.send(c, req, r.initArgs)
	if r.Command == nil {
		r.release(c) // acpbridge orders what it reads: what waited goes behind it
	}
}

// initAnswered: c's initialize is answered. A child that refused it serves
// nothing; one initialized after a successful authenticate gets that
// authenticate first; the others are ready.
func (r *router) initAnswered(c *child, failed bool) {
	switch {
	case failed:
		r.Log.Warn("an agent process refused initialize", "pid", c.pid)
		r.endChild(c, false)
	case r.authArgs != nil:
		c.state = childAuthenticating
		r.send(c, &request{kind: kindAuth, method: acp.MethodAuthenticate}, r.authArgs)
	default:
		r.settle(c)
	}
}

// authenticated repeats a successful authenticate to every other child
// whose initialize is answered: authentication is per process, and each
// thread's child must have it. Such a child takes nothing else until it
// has answered (an agent that runs requests at once would run the next
// session/new beside it, unauthenticated); one still initializing gets it
// after its initialize answer.
func (r *router) authenticated(done *child, params json.RawMessage) {
	r.authArgs = params
	for c := range r.children {
		switch c.state {
		case childReady, childOpening, childServing:
			if c != done {
				c.state = childAuthenticating
				r.send(c, &request{kind: kindAuth, method: acp.MethodAuthenticate}, params)
			}
		}
	}
}

// learnAgent notes from the agent's initialize answer how a lost thread is
// reopened and whether it offers session/close; when it does not, the
// router offers it (ending the child), so that an editor still frees
// processes.
func (r *router) learnAgent(result json.RawMessage) json.RawMessage {
	var res map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil {
		return result
	}
	var caps map[string]json.RawMessage
	json.Unmarshal(res["agentCapabilities"], &caps)
	var sc map[string]json.RawMessage
	json.Unmarshal(caps["sessionCapabilities"], &sc)
	switch _, resume := sc["resume"]; {
	case resume:
		r.reopenBy = acp.MethodSessionResume
	case string(caps["loadSession"]) == "true":
		r.reopenBy = acp.MethodSessionLoad
	}
	if _, ok := sc["close"]; ok {
		return result
	}
	r.noClose = true
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	if sc == nil {
		sc = map[string]json.RawMessage{}
	}
	sc["close"] = json.RawMessage(`{}`)
	caps["sessionCapabilities"], _ = json.Marshal(sc)
	res["agentCapabilities"], _ = json.Marshal(caps)
	out, err := json.Marshal(res)
	if err != nil {
		return result
	}
	return out
}
