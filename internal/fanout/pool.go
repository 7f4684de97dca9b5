// pool.go holds the children waiting for threads: the one place that takes
// a spare or starts a process (take), the spares kept warm (warm), the
// count against --max-children, and what a child does once started.

package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/events"
)

// take gives want a child for a thread whose process runs in dir (see
// processDir): a spare there (ready, or still starting or initializing: it
// holds the thread's lines until ready), else one started now (a spare in
// another directory ends in its place); at --max-children the least
// recently used idle thread is evicted, and want waits until a process has
// ended. want runs on the loop.
func (r *router) take(dir string, want func(*child, error)) {
	r.openingWhileHeld()
	if r.ending() {
		want(nil, errClosing)
		return
	}
	if i := slices.IndexFunc(r.spares, func(c *child) bool { return c.dir == dir }); i >= 0 {
		c := r.spares[i]
		r.spares = slices.Delete(r.spares, i, i+1)
		if c.state == childStarting {
			c.claim = want // handed over once started
			return
		}
		want(c, nil)
		return
	}
	gaveWay := len(r.spares) > 0
	if gaveWay { // the oldest spare, in another directory, gives way (warm starts the next where threads now open)
		spare := r.spares[0]
		r.spares = r.spares[1:]
		r.endChild(spare, false)
	}
	if r.count() < r.MaxChildren {
		r.start(dir, want)
		return
	}
	if gaveWay || r.evictLeastRecent() || r.anyEnding() {
		r.waiting = append(r.waiting, take{dir, want})
		return
	}
	want(nil, fmt.Errorf("this acpbridge --fanout already runs %d processes (its sessions, those being opened, its spares), its limit (--max-children %d): close a thread, or start acpbridge with a higher --max-children", r.count(), r.MaxChildren))
}

// take is a thread's wait for a process slot.
type take struct {
	dir  string
	want func(*child, error)
}

// processDir is the directory an agent's process for a thread opened with
// params runs in: the router's own (""), where CMD starts and its relative
// paths mean what they meant to the user, and where any warm spare serves
// the thread whatever its cwd; for an agent known to need its process in
// the session's cwd (knownAgents: gemini keeps a session under its
// process's directory and looks for it under the session's), that cwd
// when it is a directory. acpbridge's own children take the cwd from the
// session.
func (r *router) processDir(params json.RawMessage) string {
	var p struct {
		Cwd string `json:"cwd"`
	}
	json.Unmarshal(params, &p)
	if r.Command == nil || !r.agent.inSessionDir || p.Cwd == "" || !filepath.IsAbs(p.Cwd) {
		return ""
	}
	if st, err := os.Stat(p.Cwd); err != nil || !st.IsDir() {
		return ""
	}
	dir := filepath.Clean(p.Cwd)
	if dir == r.cwd {
		return ""
	}
	return dir
}

// count is how many children count toward --max-children: every one not
// dead, those starting and those ending included.
func (r *router) count() int { return len(r.children) }

// anyEnding reports whether a child is ending, so that a slot will free.
func (r *router) anyEnding() bool {
	for c := range r.children {
		if c.state == childEnding {
			return true
		}
	}
	return false
}

// serveWaiters serves the takes waiting for a process slot (--max-children),
// in arrival order, whenever something may have changed for them: a
// process ended (a slot free: the first waiting take gets it, then the
// next), a spare came back (a withdrawn take's), or an answer left a
// thread idle. A take no ending process will
// free a slot for (more takes wait than processes end) has the least
// recently used idle thread evicted for it, as when it came: a take that
// found every thread busy waits for the first to turn idle, not for ever.
func (r *router) serveWaiters() {
	for len(r.waiting) > 0 && (r.count() < r.MaxChildren || len(r.spares) > 0) {
		w := r.waiting[0]
		r.waiting = r.waiting[1:]
		r.take(w.dir, w.want)
	}
	for len(r.waiting) > r.endingCount() && r.evictLeastRecent() {
	}
}

// endingCount is how many children are ending: the slots that will free.
func (r *router) endingCount() int {
	n := 0
	for c := range r.children {
		if c.state == childEnding {
			n++
		}
	}
	return n
}

// failing is the pool's back-off from an agent that exits at its start (a
// bad flag, a missing config): without it the spares would be started
// again hundreds of times a second, for ever. After each such exit the
// next spare waits twice as long; after maxStartFailures in a row no spare
// is started until the client asks for something, whose error then says
// why (the last exit, with its stderr's tail). A thread that opens ends it.
type failing struct {
	exits int         // spares that exited before serving a thread, in a row
	why   string      // how the last one ended
	timer *time.Timer // the next warm, while backing off
}

// maxStartFailures is how many spares in a row may exit before serving
// before the pool stops starting them.
const maxStartFailures = 5

// startFailed notes a spare that exited before it served a thread.
func (r *router) startFailed(c *child) {
	r.failing.exits++
	r.failing.why = exitReason(c, "before it served a thread").Error()
	if r.failing.exits == maxStartFailures {
		r.Log.Error("the agent exits at every start; no more are started until a thread asks for one", events.Of(events.WarmingStopped), "starts", r.failing.exits, "why", r.failing.why)
	}
}

// served ends the back-off: the agent served a thread.
func (r *router) served() {
	r.failing.exits = 0
	if r.failing.timer != nil {
		r.failing.timer.Stop()
		r.failing.timer = nil
	}
}

// warm starts children until --spares of them wait (or are starting),
// within --max-children, in the directory of the thread opened last:
// at once, once the spares are no longer held back (holding), or after
// the back-off (failing).
func (r *router) warm() {
	switch f := &r.failing; {
	case f.exits >= maxStartFailures || f.timer != nil || r.holding.held():
		return
	case f.exits > 0:
		f.timer = r.after(min(50*time.Millisecond<<(f.exits-1), 5*time.Second), func() {
			f.timer = nil
			r.warmTo(r.Spares)
		})
		return
	}
	r.warmTo(r.Spares)
}

// warmTo starts spares until n of them wait (or are starting), within
// --max-children, unless the router ends or a thread waits for a slot.
func (r *router) warmTo(n int) {
	for !r.ending() && len(r.spares) < n && r.count() < r.MaxChildren && len(r.waiting) == 0 {
		r.start(r.spareDir, nil)
	}
}

// holding is the spares held back so that a process's start does not
// share the CPU with a turn (holdMachine). At the router's start one spare
// starts and the others wait for it to be ready, or for the first thread,
// whose opening holds them on for its first turn (warmAtStart); the spare
// that replaces a thread's waits for the thread's turn (warmAfterTurns).
// Held for turns, spares start once no prompt is in flight, once the next
// thread's opening is answered, or spareWait after the hold began,
// whichever comes first: a long turn has its spares refilled behind it,
// and threads opened one after another find them ready.
type holding struct {
	state holdState
	timer *time.Timer // at start and for turns: the end of the wait
}

// spareWait is the longest the spares are held back.
const spareWait = time.Second

// held reports whether the spares wait on a timer now (at start, for
// turns): no spare starts. Waiting for an opening's answer holds back
// only the spare that the answer would start; others start as wanted.
func (h *holding) held() bool { return h.state == holdAtStart || h.state == holdForTurns }

// warmAtStart starts the router's first spare and holds the others back
// until it is ready or the first thread opens: an editor opens a thread
// and prompts in it as soon as it has started the agent, and processes
// starting beside that first turn slow it (docs/performance.md).
func (r *router) warmAtStart() {
	if r.Spares <= 1 {
		r.warm()
		return
	}
	r.warmTo(1)
	r.holdSpares(holdAtStart, "the first spare or thread")
}

// warmAfterTurns: a thread's opening or reopening was answered, and its
// turn comes before its successor's process starts. Spares waiting for
// this opening start; those waiting for the first thread wait for its
// turn, as do spares not held.
func (r *router) warmAfterTurns() {
	switch r.holding.state {
	case holdForOpening:
		r.endHold("another thread opened")
	case holdNone, holdForFirstTurn:
		r.holdSpares(holdForTurns, "the turns in flight")
	}
}

// holdSpares holds the spares back in state s, for at most spareWait.
func (r *router) holdSpares(s holdState, what string) {
	if !r.moveHold(s) {
		return
	}
	r.Log.Debug("the spares wait", events.Of(events.SparesWaiting), "for", what, "at_most", spareWait)
	var t *time.Timer
	t = r.after(spareWait, func() {
		if r.holding.timer == t {
			r.endHold("the wait passed")
		}
	})
	r.holding.timer = t
}

// turnEnded: a prompt was answered; the spares held for the turns start
// once none is in flight.
func (r *router) turnEnded() {
	if r.holding.state == holdForTurns && !r.turnsRunning() {
		r.endHold("no turn in flight")
	}
}

// spareReady: a spare is ready; those held at the router's start for the
// first one start now.
func (r *router) spareReady() {
	if r.holding.state == holdAtStart {
		r.endHold("the first spare is ready")
	}
}

// endHold ends the spares' hold and warms.
func (r *router) endHold(why string) {
	r.stopHoldTimer()
	if !r.moveHold(holdNone) {
		return
	}
	r.Log.Debug("the spares waited", events.Of(events.SparesWaited), "why", why)
	r.warm()
}

// stopHoldTimer stops the hold's wait, if it runs.
func (r *router) stopHoldTimer() {
	if r.holding.timer != nil {
		r.holding.timer.Stop()
		r.holding.timer = nil
	}
}

// openingWhileHeld: a thread is opening. Spares held at the router's
// start are held on for this first thread's turn, from its answer;
// spares held for another thread's turn start once this opening is
// answered, not beside it: the editor opens threads, and more may come.
func (r *router) openingWhileHeld() {
	switch r.holding.state {
	case holdAtStart:
		r.stopHoldTimer()
		r.moveHold(holdForFirstTurn)
	case holdForTurns:
		r.stopHoldTimer()
		r.moveHold(holdForOpening)
	}
}

// turnsRunning reports whether a prompt is in flight at a child.
func (r *router) turnsRunning() bool {
	for c := range r.children {
		for _, req := range c.pending {
			if req.kind == kindClient && req.method == acp.MethodSessionPrompt {
				return true
			}
		}
	}
	return false
}

// start starts a child in dir for want, or as a spare when want is nil;
// the start runs beside the loop, which hears of it in onStarted.
func (r *router) start(dir string, want func(*child, error)) *child {
	c := &child{state: childStarting, next: childReady, claim: want, dir: dir, pending: map[int64]*request{}, calls: map[string]context.CancelFunc{}, active: time.Now()}
	r.children[c] = true
	if want == nil {
		r.spares = append(r.spares, c)
		r.Log.Debug("a spare is started", events.Of(events.SpareStarted), "dir", dir)
	}
	cmd := r.command()
	cmd.Dir = dir
	c.errTail = &tail{}
	r.spawn(func() {
		p, err := r.startProcess(c, cmd, c.errTail)
		r.post(func() { r.onStarted(c, p, err) })
		if err == nil {
			r.follow(c, p)
		}
	})
	return c
}

// onStarted: c's process started (or could not). It is initialized when
// the client's initialize params are known, and handed to whoever claimed
// it.
func (r *router) onStarted(c *child, p *process, err error) {
	want := c.claim
	c.claim = nil
	if err != nil {
		r.Log.Error("cannot start a child", "err", err)
		r.moveChild(c, childDead)
		delete(r.children, c)
		r.spares = slices.DeleteFunc(r.spares, func(s *child) bool { return s == c })
		if r.transient == c {
			r.transient = nil
		}
		err = fmt.Errorf("no child process could be started (%v); see the log on stderr", err)
		for _, req := range c.pending { // sent to it while it started
			if req.clientID != nil {
				r.answer(req.clientID, nil, acp.Errorf(acp.CodeInternal, "%s could not be served: %v", req.method, err))
			}
		}
		if r.conn.initClient != nil { // the client's initialize waited for a child: it fails, and the next is a first one
			e := acp.Errorf(acp.CodeInternal, "cannot start the agent (%v): check the command after -- in the agent's settings", err)
			r.answer(r.conn.initClient.clientID, nil, e)
			r.conn.initClient = nil
			r.firstInitAnswered(channel.EncodeResponse("null", nil, e), false)
		}
		if want != nil {
			want(nil, err)
		}
		r.serveWaiters() // no new spare: the next may fail as this one did
		return
	}
	c.cmd, c.pid, c.in = p.cmd, p.cmd.Process.Pid, p.in
	if c.state == childEnding { // the router's end came first
		r.endStepNext(c)
		if want != nil {
			want(nil, errClosing)
		}
		return
	}
	r.moveChild(c, childSpare)
	if r.conn.state == connInitializing || r.conn.state == connReady {
		r.initialize(c)
	} else if r.Command == nil {
		r.release(c) // acpbridge answers what comes before initialize itself
	}
	if want != nil {
		want(c, nil)
	}
}

// sessionless is a child for what names no session (session/list,
// session/delete, authenticate, unknown methods): a spare, or a child of
// the moment, started for it even past the cap and ended once it has
// answered: these requests never hold a thread's slot.
func (r *router) sessionless() *child {
	if len(r.spares) > 0 {
		return r.spares[0]
	}
	if r.transient == nil {
		r.transient = r.start("", func(*child, error) {})
		r.transient.once = true
	}
	return r.transient
}

// evictLeastRecent evicts the idle thread used least recently, to make room
// under --max-children; it reports whether there was one.
func (r *router) evictLeastRecent() bool {
	var lru *thread
	for _, t := range r.threads {
		if r.evictable(t) && (lru == nil || t.child.active.Before(lru.child.active)) {
			lru = t
		}
	}
	return lru != nil && r.evict(lru, "--max-children", threadEvicting)
}
