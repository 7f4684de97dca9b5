// held.go holds the client's requests as the router holds them until they
// are answered: one value per request, saying what it waits for, kept in
// one place from its arrival to its answer, and the exits that answer it
// (the awaited event, $/cancel_request, the child's death, the router's
// end), each exactly once.

package fanout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"acpbridge/internal/acp"
	"acpbridge/internal/events"
)

// heldRequests are the client's requests not answered yet, by the client's
// id, each from its arrival to its answer (respond takes it out; a second
// answer is refused).
type heldRequests struct {
	byID     map[string]*held
	arrivals int // the client's requests so far, for their order
}

// of is the request id waits, or nil once answered (or never seen).
func (hs *heldRequests) of(id []byte) *held { return hs.byID[string(id)] }

// answered takes the request id out; false when it was not held.
func (hs *heldRequests) answered(id []byte) bool {
	if hs.byID[string(id)] == nil {
		return false
	}
	delete(hs.byID, string(id))
	return true
}

// held is a request of the client's (one with an id) that the router has
// not answered yet (heldRequests).
type held struct {
	seq    int    // arrival order
	method string // its method
	waits  wait   // what it waits for now
	thread *thread
	child  *child
}

// wait is what a held request waits for, and so which exit answers it.
type wait int

const (
	waitRouting wait = iota // being routed, or answered by the router at once
	waitProcess             // session/new: a process (a spare starting, or a slot at --max-children)
	waitThread              // its thread's process: the thread is evicting, lost or being reopened
	waitLoad                // the client's load or resume: its thread's old process to end, then a new one
	waitJoined              // a load joined to another load of its thread: that one's answer
	waitInit                // a later initialize: the answer to the first (-- CMD)
	waitReady               // its child to be ready: the line is held for it
	waitAnswer              // its child's answer
)

// The exits of each wait, and what answers the request at each (the death
// is of the process it waits on). Every exit answers it once: respond
// refuses a second answer (move_refused), and the router's end answers
// whatever is still held when its loop returns.
//
//	wait     what it waits for            $/cancel_request               the process's death             the router's end (EOF, a signal)
//	process  a child: sent (ready/answer)  -32800; the child is a spare   a slot frees: a child is taken  an error: the router ends
//	thread   its thread open: sent         -32800, never sent             the thread reopened: sent       a prompt cancelled, else an error
//	load     a child: sent (ready/answer)  -32800; a joined load goes on  the old one's end: sent         an error: the router ends
//	joined   the load's answer             -32800; the load goes on       the load's answer               the load's answer, or an error
//	init     the first's answer            (nothing: the first's answer)  the first's error               the first's error, or an error
//	ready    its child ready: sent         -32800, never sent             an error: the process ended     an error: the process ended
//	answer   its child's answer            sent on to the child           an error: the process ended     a prompt cancelled, else an error
//
// A request moves down its column of waits as it goes: session/new from
// process to ready or answer; a load from load to ready or answer; a
// joined load, its load withdrawn, to load or answer in its place.
// TestFanoutHeld_eachWaitEachExit drives each wait through each exit.

// arrived notes a request of the client's with id id: held until answered.
// It reports false for an id already in flight.
func (r *router) arrived(id []byte, method string) bool {
	hs := &r.inflight
	if hs.of(id) != nil {
		return false
	}
	hs.arrivals++
	hs.byID[string(id)] = &held{seq: hs.arrivals, method: method}
	return true
}

// holds notes what the client's request id waits for now (on t or c).
func (r *router) holds(id []byte, w wait, t *thread, c *child) {
	if h := r.inflight.of(id); h != nil {
		h.waits, h.thread, h.child = w, t, c
		r.Log.Debug("a request waits", events.Of(events.RequestHeld), "id", string(id), "method", h.method, "waits", w.String())
	}
}

func (w wait) String() string {
	return [...]string{"routing", "process", "thread", "load", "joined", "init", "ready", "answer"}[w]
}

// answerLeft answers, at the loop's last step and in arrival order,
// whatever request the router still holds: no request leaves unanswered,
// whatever its wait.
func (r *router) answerLeft() {
	byID := r.inflight.byID
	ids := slices.SortedFunc(maps.Keys(byID), func(a, b string) int { return cmp.Compare(byID[a].seq, byID[b].seq) })
	for _, id := range ids {
		r.answer([]byte(id), nil, acp.Errorf(acp.CodeInternal, "acpbridge --fanout ended (its input ended, or a signal) before %s was served; send it again to a new acpbridge", byID[id].method))
	}
}

// answeredTwice refuses a second answer to the client's request id: it is
// logged as a move not in a table is (move_refused), told to
// Options.RefusedMove, and not written.
func (r *router) answeredTwice(id []byte) {
	r.Log.Error("the router answered a request a second time; the second answer is dropped; this is a bug of acpbridge's, please report it", events.Of(events.MoveRefused), "machine", "held request", "from", "answered", "to", "answered", "id", string(id))
	if r.RefusedMove != nil {
		r.RefusedMove(fmt.Sprintf("fanout: request %s answered a second time", id))
	}
}
