// states.go holds the router's four state machines as tables: a child's,
// a thread's, the connection's and the spares' hold, each state with what
// it is and every edge that leaves it. A state moves only through move, which refuses an
// edge that is not in its table; the package doc's tables are these,
// rendered (TestDocTables holds them together).

package fanout

import (
	"fmt"
	"strings"

	"acpbridge/internal/events"
)

// childState is where a child is in its life (childMachine).
type childState int

const (
	childStarting childState = iota
	childSpare
	childInitializing
	childAuthenticating
	childReady
	childOpening
	childReplaying
	childServing
	childEnding
	childDead
)

func (s childState) String() string { return childMachine.states[s].name }

// threadState is where a thread is (threadMachine).
type threadState int

const (
	threadOpen threadState = iota
	threadEvicting
	threadLost
	threadLoading
	threadReopening
	threadRetrying
	threadClosed
)

func (s threadState) String() string { return threadMachine.states[s].name }

// connState is where the client's connection is (connMachine).
type connState int

const (
	connNew connState = iota
	connInitializing
	connReady
	connEnding
)

func (s connState) String() string { return connMachine.states[s].name }

// holdState is where the spares' hold is (holdMachine).
type holdState int

const (
	holdNone holdState = iota
	holdAtStart
	holdForFirstTurn
	holdForTurns
	holdForOpening
)

func (s holdState) String() string { return holdMachine.states[s].name }

// machine is one state machine: its states, in the order of their
// constants, each with what it is and the edges that leave it.
type machine[S ~int] struct {
	name   string
	states []state[S]
	// endless: no state ends the machine, every one has an edge out (the
	// spares' hold goes round for the router's life).
	endless bool
}

type state[S ~int] struct {
	name  string
	is    string
	edges []edge[S]
}

// edge is a move to another state, and what makes it.
type edge[S ~int] struct {
	to S
	on string
}

// allows reports whether from → to is an edge of m.
func (m *machine[S]) allows(from, to S) bool {
	for _, e := range m.states[from].edges {
		if e.to == to {
			return true
		}
	}
	return false
}

// move sets *at to to along an edge of m, for what who names (the log's
// words). An edge not in the table is refused: it is logged as an error
// (the event move_refused, which the process tests watch for), told to
// Options.RefusedMove when set (the package's tests panic there), and the
// state stays.
func move[S ~int](r *router, m *machine[S], at *S, to S, who ...any) bool {
	if m.allows(*at, to) {
		*at = to
		return true
	}
	from := m.states[*at].name
	r.Log.Error("the router refused a move not in its table; this is a bug of acpbridge's, please report it", append([]any{events.Of(events.MoveRefused), "machine", m.name, "from", from, "to", m.states[to].name}, who...)...)
	if r.RefusedMove != nil {
		r.RefusedMove(fmt.Sprintf("fanout: %s %s → %s is not an edge of its table (%v)", m.name, from, m.states[to].name, who))
	}
	return false
}

// moveChild moves c to s. A child that starts serving a thread (opened,
// loaded, reopened; not back from a repeated authenticate) says which
// thread it holds: the event thread_held, so that a user watching top, or
// a test, can tell which process is which thread whatever its cwd.
func (r *router) moveChild(c *child, s childState) bool {
	from := c.state
	if !move(r, &childMachine, &c.state, s, "pid", c.pid, "session", c.session) {
		return false
	}
	if s == childServing && from != childAuthenticating && c.thread != nil {
		r.Log.Debug("a thread holds a process", events.Of(events.ThreadHeld), "session", c.thread.id, "pid", c.pid)
	}
	return true
}

// moveThread moves t to s.
func (r *router) moveThread(t *thread, s threadState) bool {
	return move(r, &threadMachine, &t.state, s, "session", t.id)
}

// moveConn moves the connection to s.
func (r *router) moveConn(s connState) bool {
	return move(r, &connMachine, &r.conn.state, s)
}

// moveHold moves the spares' hold to s.
func (r *router) moveHold(s holdState) bool {
	return move(r, &holdMachine, &r.holding.state, s)
}

var childMachine = machine[childState]{name: "child", states: []state[childState]{
	childStarting: {"starting", "its process is being started; it counts toward --max-children", []edge[childState]{
		{childSpare, "its process started"},
		{childEnding, "the router ends first: ended once started"},
		{childDead, "its process could not be started"}}},
	childSpare: {"spare", "started; the client's initialize not seen yet", []edge[childState]{
		{childInitializing, "the client's initialize (at once when it came first)"},
		{childEnding, "a spare in another directory gives way, or the router ends"},
		{childDead, "its process ends"}}},
	childInitializing: {"initializing", "initialize sent, not answered (bounded: --reopen-timeout, at least 5 s)", []edge[childState]{
		{childAuthenticating, "answered, and the client has authenticated: repeated to it"},
		{childReady, "answered: a spare"},
		{childOpening, "answered: it was taken for a thread that the client sees opened"},
		{childReplaying, "answered: it was taken for the router's own load of a thread"},
		{childEnding, "refused, or not answered in time"},
		{childDead, "its process ends"}}},
	childAuthenticating: {"authenticating", "the client's successful authenticate repeated to it, not answered", []edge[childState]{
		{childReady, "answered: back to what it was told it does"},
		{childOpening, "answered: back to what it was told it does"},
		{childReplaying, "answered: back to what it was told it does"},
		{childServing, "answered: back to what it was told it does"},
		{childEnding, "closed or evicted meanwhile, or the router ends"},
		{childDead, "its process ends"}}},
	childReady: {"ready", "initialized, serving no session: a spare (a session-less request is served here)", []edge[childState]{
		{childOpening, "taken for a thread: session/new, a resume, or the client's load"},
		{childReplaying, "taken for the router's own session/load of a lost thread"},
		{childAuthenticating, "the client authenticated through another child"},
		{childEnding, "gives way, a request of the moment answered, or the router ends"},
		{childDead, "its process ends"}}},
	childOpening: {"opening", "session/new, a resume or the client's load sent for a thread, not answered", []edge[childState]{
		{childServing, "answered with success"},
		{childAuthenticating, "the client authenticated through another child"},
		{childEnding, "refused, timed out, or its thread closed"},
		{childDead, "its process ends"}}},
	childReplaying: {"replaying", "the router's own session/load of a thread sent: its replay is dropped (the client shows it already)", []edge[childState]{
		{childServing, "answered with success"},
		{childAuthenticating, "the client authenticated through another child"},
		{childEnding, "refused, timed out, or its thread closed"},
		{childDead, "its process ends"}}},
	childServing: {"serving", "serves one thread", []edge[childState]{
		{childAuthenticating, "the client authenticated through another child"},
		{childEnding, "session/close or delete, eviction, the client's load of its thread, or the router ends"},
		{childDead, "its process ends: a crash, told to the thread"}}},
	childEnding: {"ending", "told to end: session/close, stdin, SIGTERM, SIGKILL, each after the last had its time; still counted", []edge[childState]{
		{childDead, "its process ends"}}},
	childDead: {"dead", "its process ended and its output was read: forgotten", nil},
}}

var threadMachine = machine[threadState]{name: "thread", states: []state[threadState]{
	threadOpen: {"open", "served by its child", []edge[threadState]{
		{threadEvicting, "idle past --idle-timeout, or the idlest at --max-children"},
		{threadLoading, "the client's session/load of it: its child is ended first"},
		{threadLost, "its child dies (the user is told)"},
		{threadClosed, "session/close or delete, or its child died too often"}}},
	threadEvicting: {"evicting", "its child is ending; requests wait on the thread", []edge[threadState]{
		{threadLost, "the child's end (reopened at once when something waits)"},
		{threadLoading, "the client's session/load or resume of it"},
		{threadClosed, "session/close or delete"}}},
	threadLost: {"lost", "no process; reopened on its next request (where its agent cannot, answered so)", []edge[threadState]{
		{threadReopening, "a request: the router reopens it"},
		{threadLoading, "the client's session/load or resume of it"},
		{threadClosed, "session/close or delete"}}},
	threadLoading: {"loading", "the client's load or resume waits for a process: its old child's end, then one from the pool", []edge[threadState]{
		{threadReopening, "a child is given: the client's request is sent to it"},
		{threadEvicting, "the request withdrawn while its old child still ends"},
		{threadLost, "the request withdrawn, or no child could be given"},
		{threadClosed, "session/close or delete; withdrawn or failed for a session never open here"}}},
	threadReopening: {"reopening", "a new child opens it (resume, the router's load, the client's load or resume); requests wait", []edge[threadState]{
		{threadOpen, "answered with success: what waited is routed, in order"},
		{threadRetrying, "the router's own reopening's child died unanswered (a spare killed as it was taken): once more"},
		{threadLost, "refused, --reopen-timeout, or its child died"},
		{threadEvicting, "refused or timed out while its child still ends"},
		{threadClosed, "session/close or delete; a failed load of a session never open here"}}},
	threadRetrying: {"retrying", "reopened once more, in another new child; a second death is the agent's answer", []edge[threadState]{
		{threadOpen, "answered with success"},
		{threadLost, "refused, --reopen-timeout, or its child died again"},
		{threadEvicting, "refused or timed out while its child still ends"},
		{threadClosed, "session/close or delete"}}},
	threadClosed: {"closed", "session/close or delete: forgotten", nil},
}}

var connMachine = machine[connState]{name: "connection", states: []state[connState]{
	connNew: {"new", "no initialize answered yet", []edge[connState]{
		{connInitializing, "the client's initialize, sent to the first child (-- CMD), asking for v1 whatever version the client asked"},
		{connReady, "the client's initialize, answered by the router (acpbridge children): v1 whatever version the client asked"},
		{connEnding, "stdin ends or a signal comes"}}},
	connInitializing: {"initializing", "the first child's answer awaited; later initializes wait for it", []edge[connState]{
		{connReady, "answered with success: later initializes get the same answer"},
		{connNew, "refused, or its child died: the next initialize is a first one again"},
		{connEnding, "stdin ends or a signal comes"}}},
	connReady: {"ready", "initialized: sessions are routed", []edge[connState]{
		{connEnding, "stdin ends or a signal comes"}}},
	connEnding: {"ending", "every child is ending; the router exits once all are dead and stdin is read (5 s at most)", nil},
}}

var holdMachine = machine[holdState]{name: "spares' hold", endless: true, states: []state[holdState]{
	holdNone: {"none", "spares start as they are wanted (within --spares and --max-children)", []edge[holdState]{
		{holdAtStart, "the router starts with more than one spare: one starts, the others wait"},
		{holdForTurns, "a thread's opening or reopening is answered: its turn comes first"}}},
	holdAtStart: {"at start", "the router's first spare starts alone; the others wait (1 s at most)", []edge[holdState]{
		{holdNone, "the first spare is ready, or the wait passed: the others start"},
		{holdForFirstTurn, "the first thread opens"}}},
	holdForFirstTurn: {"first thread", "the first thread opens; the spares wait for its answer", []edge[holdState]{
		{holdForTurns, "its opening is answered: they wait for its turn"}}},
	holdForTurns: {"turns", "a turn runs; the spares wait for it (1 s at most)", []edge[holdState]{
		{holdNone, "no prompt in flight, or the wait passed: they start"},
		{holdForOpening, "another thread opens"}}},
	holdForOpening: {"opening", "a thread opens while the spares wait for turns; they wait for its answer", []edge[holdState]{
		{holdNone, "its opening is answered: they start"}}},
}}

// render is m's table as the package doc shows it: each state with what
// it is, then each edge that leaves it and what makes it.
func (m *machine[S]) render() string {
	var b strings.Builder
	for _, s := range m.states {
		fmt.Fprintf(&b, "%s: %s\n", s.name, s.is)
		for _, e := range s.edges {
			fmt.Fprintf(&b, "  → %-15s %s\n", m.states[e.to].name, e.on)
		}
	}
	return b.String()
}
