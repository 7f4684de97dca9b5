// auth.go holds how a child is made ready: the client's initialize
// (answered here for acpbridge children, relayed from a child for another
// agent), the same params sent to every child, the agent's capabilities
// learnt, and a successful authenticate repeated to every child.

package fanout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/events"
)

// onInitialize serves the client's initialize. acpbridge children are this
// binary with these flags, so the router answers it; another agent's
// answer comes from the first child initialized (a spare, or one started
// now), relayed as it is but for session/close, offered when the agent
// lacks it. Every child gets the same params, asking for ACP v1: the
// router speaks v1 to the client and its children (a client that asks for
// a later version is answered v1, as the spec has an agent answer the
// version it supports), so no answer mixes v1's shapes and v2's.
func (r *router) onInitialize(m clientMessage) {
	if r.Command != nil && r.conn.state != connNew {
		r.initAgain(m) // the agent's answer is the connection's: given again, not asked again
		return
	}
	r.conn.initArgs = asVersion1(m.params)
	if r.Command == nil {
		// Capabilities it cannot read offer the client the least: no
		// terminal sign-in (the children, given the same params, agree).
		var p acp.InitializeParams
		_ = json.Unmarshal(m.params, &p)
		r.answer(m.id, acp.AgentInitializeResult(r.Version, p.ClientCapabilities), nil)
		if r.conn.state == connNew {
			r.moveConn(connReady)
		}
	} else {
		r.conn.initClient = &request{clientID: m.id, method: acp.MethodInitialize}
		r.moveConn(connInitializing)
		if len(r.spares) == 0 {
			r.start(r.spareDir, nil) // a spare whatever the cap: the client waits on it
		}
	}
	for c := range r.children {
		if c.state == childSpare {
			r.initialize(c)
		}
	}
}

// asVersion1 is initialize's params asking for protocol version 1 when they
// ask for a later one; any other params as they are.
func asVersion1(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	var v float64
	if json.Unmarshal(p["protocolVersion"], &v) != nil || v <= acp.ProtocolVersion {
		return params
	}
	p["protocolVersion"] = json.RawMessage(strconv.Itoa(acp.ProtocolVersion))
	b, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return b
}

// initAgain answers a later initialize of the client's with the agent's
// answer to the first, once it has come (a repeated initialize waited for
// ever while the one spare was past its own initialize).
func (r *router) initAgain(m clientMessage) {
	if r.conn.initAnswer == nil {
		r.conn.initWaiting = append(r.conn.initWaiting, m.id)
		r.holds(m.id, waitInit, nil, nil)
		return
	}
	r.respond(m.id, acp.WithID(r.conn.initAnswer, m.id))
}

// firstInitAnswered is the answer to the client's first initialize (line,
// as written to the client): the initializes that came meanwhile get it
// too. A successful one is kept for any later one; after a failure the
// next initialize is a first one again (its agent is started anew).
func (r *router) firstInitAnswered(line []byte, ok bool) {
	if ok {
		r.conn.initAnswer = line
	} else {
		r.conn.initArgs = nil
	}
	if r.conn.state == connInitializing {
		if ok {
			r.moveConn(connReady)
		} else {
			r.moveConn(connNew)
		}
	}
	for _, id := range r.conn.initWaiting {
		r.respond(id, acp.WithID(line, id))
	}
	r.conn.initWaiting = nil
}

// initialize sends c the client's initialize params: as the client's own
// request for the first child (another agent's answer is the client's),
// else as the router's.
func (r *router) initialize(c *child) {
	req := r.conn.initClient
	r.conn.initClient = nil
	if req == nil {
		req = &request{kind: kindInit, method: acp.MethodInitialize}
	}
	r.moveChild(c, childInitializing)
	r.send(c, req, r.conn.initArgs)
	if r.Command == nil {
		r.release(c) // acpbridge orders what it reads: what waited goes behind it
	}
	r.after(r.initTimeout(), func() { r.onInitTimeout(c) })
}

// initTimeout bounds a child's initialize: --reopen-timeout, and never
// less than minInitTimeout (a process that starts under load).
func (r *router) initTimeout() time.Duration { return max(r.ReopenTimeout, minInitTimeout) }

const minInitTimeout = 5 * time.Second

// onInitTimeout bounds a child's initialize as a reopening is bounded: a
// child that has not answered it in time is ended, and what waits on it
// (the client's initialize, a session/new, a list) is answered with an
// error saying so, rather than held for ever.
func (r *router) onInitTimeout(c *child) {
	if c.state != childInitializing {
		return
	}
	c.gaveUp = fmt.Sprintf("did not answer initialize within %s (--reopen-timeout, at least %s)", r.initTimeout(), minInitTimeout)
	r.Log.Error("an agent process did not answer initialize in time; it is ended", events.Of(events.InitTimeout), "pid", c.pid, "timeout", r.initTimeout())
	r.endChild(c, false)
}

// initAnswered: c's initialize is answered. A child ended meanwhile (the
// router's end, a spare given way, its initialize too late) stays ending;
// one that refused it serves nothing; one initialized after a successful
// authenticate gets that authenticate first; the others are ready.
func (r *router) initAnswered(c *child, failed bool) {
	switch {
	case c.state == childEnding || c.state == childDead:
	case failed:
		r.Log.Warn("an agent process refused initialize", "pid", c.pid)
		r.endChild(c, false)
	case r.conn.authArgs != nil:
		r.moveChild(c, childAuthenticating)
		r.send(c, &request{kind: kindAuth, method: acp.MethodAuthenticate}, r.conn.authArgs)
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
	r.conn.authArgs = params
	for c := range r.children {
		switch c.state {
		case childReady, childOpening, childReplaying, childServing:
			if c != done {
				c.next = c.state // back to it once answered
				r.moveChild(c, childAuthenticating)
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
		r.agent.reopenBy = acp.MethodSessionResume
	case string(caps["loadSession"]) == "true":
		r.agent.reopenBy = acp.MethodSessionLoad
	}
	_, r.agent.canList = sc["list"]
	var info struct{ Name, Version string }
	json.Unmarshal(res["agentInfo"], &info)
	known := knownAgents[info.Name]
	if known.cannotReopenThrough != "" && !versionAfter(info.Version, known.cannotReopenThrough) {
		r.agent.noEvict = fmt.Sprintf("%s %s cannot reopen a session in a new process: %s", info.Name, info.Version, known.cannotReopen)
		r.Log.Info("threads are not evicted", events.Of(events.EvictionOff), "agent", info.Name+" "+info.Version, "why", r.agent.noEvict)
	}
	r.agent.inSessionDir = known.inSessionDir
	if _, ok := sc["close"]; ok {
		return result
	}
	r.agent.noClose = true
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

// knownAgents is what the router knows of the agents people run, by the
// name in initialize's agentInfo; an agent not named here gets the
// defaults (its threads evicted when idle, its processes run in the
// router's directory and taken warm whatever a session's cwd).
var knownAgents = map[string]agentTraits{
	"gemini-cli": {
		cannotReopenThrough: "0.61.0",
		cannotReopen:        "its session/load starts a new chat recording under the session's id before it reads the session, and then finds nothing to load",
		inSessionDir:        true, // it keeps a session under its process's directory and looks for it under the session's cwd
	},
}

// agentTraits is what the router knows of one agent.
type agentTraits struct {
	// cannotReopenThrough: through this version the agent cannot reopen a
	// session in a new process ("": it can), for the reason cannotReopen;
	// its threads are never evicted (an evicted thread could not come
	// back). The router learns the same of any agent at its first such
	// failure.
	cannotReopenThrough, cannotReopen string
	// inSessionDir: a thread's process must run in the session's cwd.
	inSessionDir bool
}

// versionAfter reports whether the dotted version v is later than w
// (numbers compared as numbers; an unreadable v is not later).
func versionAfter(v, w string) bool {
	a, b := strings.Split(v, "."), strings.Split(w, ".")
	for i := range max(len(a), len(b)) {
		x, y := 0, 0
		if i < len(a) {
			var err error
			if x, err = strconv.Atoi(strings.TrimLeftFunc(a[i], func(r rune) bool { return r < '0' || r > '9' })); err != nil {
				return false
			}
		}
		if i < len(b) {
			y, _ = strconv.Atoi(b[i])
		}
		if x != y {
			return x > y
		}
	}
	return false
}
