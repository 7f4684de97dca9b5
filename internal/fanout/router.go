// router.go holds the router itself: its options, the loop that owns every
// state and runs one event at a time, the goroutines it owns, its end, and
// how it answers the client.

package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/proc"
)

// Options configure the router.
type Options struct {
	Version       string        // acpbridge's, which initialize's answer names
	Args          []string      // acpbridge's command line, which the children get less --fanout
	Env           []string      // the children's environment
	MaxLine       int           // --max-line-bytes: the client's lines, and each child's
	MaxChildren   int           // --max-children
	IdleTimeout   time.Duration // --idle-timeout: a thread idle this long gives its process back (0: never)
	ReopenTimeout time.Duration // --reopen-timeout: how long a thread's reopening may take
	Log           *slog.Logger
	Stderr        io.Writer       // the children's stderr
	Trace         *channel.Tracer // --trace, or nil
	// Command, when set, is the agent each thread's child runs (--fanout
	// -- CMD ARGS...) instead of acpbridge: any ACP agent.
	Command []string
	Spares  int         // --spares: children kept started for the next threads
	Guard   *proc.Guard // starts a Command child in a group of its own, ended with the router
	// RefusedMove, when set, is told of a move not in a state table after
	// it is logged (move_refused): the package's tests panic there, to fail
	// at the move; the binary leaves it nil and goes on.
	RefusedMove func(what string)
}

// DefaultSpares is how many started children wait for the next threads by
// default: two acpbridge children, so that threads opened at an editor's
// pace each find one ready (a burst faster than a process starts drains
// them; docs/performance.md); one of another agent, which may be a large
// process (--spares).
func DefaultSpares(command []string) int {
	if command != nil {
		return 1
	}
	return 2
}

// DefaultReopenTimeout bounds a thread's reopening (--reopen-timeout): an
// agent's start and its resume or load, which take well under this.
const DefaultReopenTimeout = 30 * time.Second

// router serves one connection by fanning sessions out to child processes.
// Every field below the line is the loop's alone.
type router struct {
	Options
	out    *channel.Wire
	exe    string   // this program, for acpbridge children
	args   []string // an acpbridge child's flags: ours less --fanout
	events chan func()
	done   chan struct{} // closed when the loop has returned: posts are dropped
	budget *budget       // what the children's readers have read and the loop not yet written
	wg     sync.WaitGroup

	// ---- the loop's
	conn           connection         // the client's connection: its state and what its initialize and authenticate said
	agent          agentFacts         // what the router knows of the agent it runs
	failing        failing            // the pool's back-off from an agent that exits at its start
	holding        holding            // the spares held back from a turn or the first thread's start
	children       map[*child]bool    // every child not dead, ending ones included: they count toward --max-children
	spares         []*child           // children for the next threads, in the order they were started
	waiting        []take             // takes waiting for a process slot to free (--max-children)
	cwd            string             // the router's own directory
	spareDir       string             // where spares start: the directory of the thread opened last ("": cwd, always unless knownAgents says otherwise)
	threads        map[string]*thread // the client's open sessions, by id
	inflight       heldRequests       // the client's requests not answered yet (held.go)
	transient      *child             // a child started past the cap for what names no session, or nil
	started        int                // children started, for their deterministic part
	endedMeanwhile bool               // ending: a child ended since the end's wait was last armed
	clientDone     bool               // stdin's reader has returned (or a signal: it is not waited for)
	detPart        int                // ACPBRIDGE_DETERMINISTIC's part, or 0
	idleTimer      *time.Timer
}

// connection is the client's connection as the router holds it: where it
// is (connMachine), and what the client's initialize and authenticate
// said, which every child is told in turn.
type connection struct {
	state       connState
	initArgs    json.RawMessage   // the client's initialize params, asking for v1, for every child (nil until one is seen, and again after the first failed)
	initClient  *request          // the client's initialize, for the first child to be initialized (-- CMD)
	initAnswer  []byte            // the agent's answer to it, as relayed (-- CMD): a later initialize gets it too
	initWaiting []json.RawMessage // later initializes waiting for that answer
	authArgs    json.RawMessage   // a successful authenticate's params, repeated to every child
}

// agentFacts is what the router knows of the agent it runs, from the
// agent's answer to initialize and the table of agents it knows
// (knownAgents), or learned at a reopening that failed: they decide what
// it promises (eviction, reopening, a crash's message, a load of a live
// thread, close).
type agentFacts struct {
	noClose      bool   // the agent offers no session/close: the router answers it, ending the child
	reopenBy     string // how a lost thread is reopened: session/resume, session/load, or "" (it cannot be)
	canList      bool   // the agent offers session/list: a thread is evicted once the agent lists its session
	noEvict      string // why threads are not evicted: the agent cannot reopen them ("": they are)
	inSessionDir bool   // a thread's process runs in its session's cwd (knownAgents)
}

// deterministicVar makes a child's ids and clock stable (main.go).
const deterministicVar = "ACPBRIDGE_DETERMINISTIC"

// rewrapSlack is how much longer a line the router passes on may be than
// the client's: the child's id in place of the client's, whitespace aside.
const rewrapSlack = 64

// Serve serves stdin/stdout as the router until EOF or a signal.
func Serve(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(o.Stderr, "acpbridge: --fanout: cannot find this program to start its children: %v\n", err)
		return 1
	}
	r := newRouter(o, exe)
	r.out = channel.NewWire(stdin, stdout, o.MaxLine, o.Trace)
	r.out.OnHangUp = func() { r.post(r.onStdinEnd) } // the children's answers come before the router stops
	r.warmAtStart()                                  // initialize is answered here: it need not wait
	r.armIdle()
	r.spawn(r.readClient)
	r.spawn(func() { r.watchSignal(ctx) })
	r.run()
	r.waitGoroutines()
	return 0
}

// newRouter is a router with its maps made, before its wire.
func newRouter(o Options, exe string) *router {
	if o.ReopenTimeout <= 0 {
		o.ReopenTimeout = DefaultReopenTimeout
	}
	part, _ := strconv.Atoi(envValue(o.Env, deterministicVar))
	r := &router{Options: o, exe: exe, detPart: part,
		// A child reads the client's lines as the router re-wraps them:
		// its own id for the client's, up to 20 digits longer.
		args:     append(withoutFanout(o.Args), fmt.Sprintf("--max-line-bytes=%d", o.MaxLine+rewrapSlack)),
		events:   make(chan func(), 64),
		budget:   newBudget(budgetBytes, shareBytes),
		done:     make(chan struct{}),
		children: map[*child]bool{}, threads: map[string]*thread{}, inflight: heldRequests{byID: map[string]*held{}}}
	if o.Command == nil {
		r.agent.reopenBy = acp.MethodSessionResume // acpbridge resumes any session it persisted
	} else {
		// What the agents start inherits the tag, in sessions of their own
		// too (codex-acp and claude-agent-acp run commands so): the keeper
		// ends them all should the router be killed.
		tag := fmt.Sprintf("fanout-%d", os.Getpid())
		r.Env = append(slices.DeleteFunc(slices.Clone(o.Env), func(kv string) bool { return strings.HasPrefix(kv, proc.TagVar+"=") }), proc.TagVar+"="+tag)
		r.Guard.KeepTagged(tag)
	}
	if wd, err := os.Getwd(); err == nil {
		r.cwd = filepath.Clean(wd)
	}
	if len(o.Command) > 0 && strings.ContainsAny(o.Command[0], `/\`) && !filepath.IsAbs(o.Command[0]) {
		// A child of an agent known to need it runs in its session's
		// directory (knownAgents): a relative command is the router's
		// directory's.
		r.Command = append([]string{filepath.Join(r.cwd, o.Command[0])}, o.Command[1:]...)
	}
	return r
}

// post hands an event to the loop; after the loop has returned it is dropped.
func (r *router) post(event func()) {
	select {
	case r.events <- event:
	case <-r.done:
	}
}

// spawn runs f in a goroutine the router waits for at its end.
func (r *router) spawn(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// after posts event to the loop once d has passed.
func (r *router) after(d time.Duration, event func()) *time.Timer {
	return time.AfterFunc(d, func() { r.post(event) })
}

// run is the loop: one event at a time until stdin has ended (or a signal
// came) and every child is dead. The end's wait is bounded by progress,
// not by a total: while children keep ending (persisting their turns
// takes long on a loaded machine) it waits on; once fanoutExitWait passes
// with none ending, those left are killed, and once they are reaped (1 s
// at most) what they left unanswered is answered and the loop returns.
func (r *router) run() {
	defer close(r.done)
	var end *time.Timer
	var deadline <-chan time.Time
	killed := false
	for !(r.ending() && r.clientDone && len(r.children) == 0) {
		if r.ending() && end == nil {
			end = time.NewTimer(fanoutExitWait)
			defer end.Stop()
			deadline = end.C
		}
		select {
		case event := <-r.events:
			event()
		case <-deadline:
			switch {
			case killed:
				for c := range r.children {
					r.answerUnanswered(c) // killed and not reaped in time: what it held is answered here
				}
				r.answerLeft()
				r.out.Flush()
				return
			case r.endedMeanwhile:
				r.endedMeanwhile = false // a slow machine, not a stuck child
				end.Reset(fanoutExitWait)
			default:
				r.killAll()
				killed = true
				end.Reset(time.Second)
			}
		}
		if len(r.events) == 0 {
			r.out.Flush()
		}
	}
	r.answerLeft()
	r.out.Flush()
}

// watchSignal ends the router as stdin's end would when a signal (ctx)
// comes. The wire's writes are limited from here, not from the loop, which
// may be blocked writing to a client that stopped reading.
func (r *router) watchSignal(ctx context.Context) {
	select {
	case <-r.done:
	case <-ctx.Done():
		r.Log.Info("ending as at stdin EOF", "why", context.Cause(ctx))
		r.out.LimitWrites() // a client that stopped reading cannot hold the end
		r.out.CloseCalls()
		r.post(func() {
			r.clientDone = true // its reader may wait on stdin for ever
			r.onStdinEnd()
		})
	}
}

// fanoutExitWait bounds how long the end waits for the next child to end,
// each ending as at EOF (its turn answered and persisted, which takes well
// under a second on an idle machine); only children stuck past it, with
// none ending meanwhile, are killed.
const fanoutExitWait = 5 * time.Second

// waitGoroutines waits, bounded, for the goroutines the router started:
// each ends with its child or its call, which the end has ended.
func (r *router) waitGoroutines() {
	ended := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(time.Second):
		r.Log.Debug("the router exits with goroutines still running")
	}
}

// readClient hands the client's messages, as the wire decoded them, to the
// loop until stdin ends.
func (r *router) readClient() {
	for {
		m, err := r.out.RecvMessage()
		if err != nil {
			r.post(func() { r.clientDone = true })
			return
		}
		r.post(func() { r.onClientMessage(m) })
	}
}

// onStdinEnd (or a signal) ends every child as stdin's EOF ends one
// acpbridge: each answers its running prompt cancelled and persists it.
// What waits on a thread is answered now.
func (r *router) onStdinEnd() {
	if r.ending() {
		return
	}
	r.moveConn(connEnding)
	if r.idleTimer != nil {
		r.idleTimer.Stop()
	}
	for _, t := range r.threads {
		r.failHeld(t, nil)
		if t.state == threadLoading && t.opener != nil {
			// The client's load waits for the old process to end, and no
			// new one will be taken for it now: answered here, once.
			err := acp.Errorf(acp.CodeInternal, "acpbridge was ending (its input ended, or a signal) before session %s could be opened in a new process; send %s again to a new acpbridge", t.id, t.opener.method)
			r.answer(t.opener.id, nil, err)
			t.opener = nil
			r.answerJoiners(t, channel.EncodeResponse("null", nil, err))
		}
	}
	for _, w := range r.waiting {
		w.want(nil, errClosing)
	}
	r.waiting = nil
	for c := range r.children {
		r.endChild(c, false)
	}
}

// ending reports whether stdin has ended or a signal came: every child is
// ending.
func (r *router) ending() bool { return r.conn.state == connEnding }

// errClosing answers what could not start because the router is ending.
var errClosing = fmt.Errorf("acpbridge --fanout is ending (stdin closed or a signal)")

// killAll kills every child left at the end's deadline.
func (r *router) killAll() {
	for c := range r.children {
		r.kill(c)
	}
}

// answer writes a response to the client's request id.
func (r *router) answer(id json.RawMessage, result any, err error) {
	var e *jrpc2.Error
	if err != nil {
		e = acp.AsError(err)
	}
	r.respond(id, channel.EncodeResponse(string(id), result, e))
}

// respond writes the response msg to the client's request id, which may be
// used again after it: the one way out of a held request. A second answer
// to an id is refused (answeredTwice); null is the id of what could not be
// read as a request.
func (r *router) respond(id json.RawMessage, msg []byte) {
	if string(id) != "null" && !r.inflight.answered(id) {
		r.answeredTwice(id)
		return
	}
	r.out.Send(msg)
}

// withoutFanout is args less the --fanout flag.
func withoutFanout(args []string) []string {
	var out []string
	for _, a := range args {
		switch a {
		case "--fanout", "-fanout", "--fanout=true", "-fanout=true":
			continue
		}
		out = append(out, a)
	}
	return out
}

// envValue is the value of name in env, or "".
func envValue(env []string, name string) string {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
