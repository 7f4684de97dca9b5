// Package fanout holds the router of --fanout: many sessions on one connection,
// each in a single-session child process of its own: acpbridge, or with
// `--fanout -- CMD` any single-session ACP agent. It is for clients that
// open several sessions on one agent process (Zed's threads); the
// one-session agent (the root's session.go) is untouched, and the
// demultiplexing lives here only.
//
// What the router holds: which child serves which session id, each open
// session's opening params (to reopen it), and for each child the requests
// it forwarded and has not seen answered. Nothing else of a session.
//
//   - A warm child (started and initialized with the client's initialize
//     params) waits for the next session/new, load or resume, so opening a
//     thread costs no process start; the next warm child starts once the
//     thread's answer is written.
//     The warm child also serves what names no session (session/list,
//     session/delete, authenticate, unknown methods) against the same
//     state directory.
//   - Requests and notifications naming a sessionId go to its child, in
//     arrival order (one loop writes them to its stdin). The child's
//     responses go back with the client's id; its session/updates pass
//     through unchanged and in order.
//   - Requests a child sends (permission, fs/*, terminal/*) reach the client
//     through the channel's own requests (Wire.Call), with ids unique on the
//     connection; the answer goes back to the child with its own id.
//   - session/close ends the child once it has answered. A child that dies
//     fails its pending requests with an error naming the session; its
//     session is reopened in a new child on its next request (resume, or
//     load with the replay not passed on), as is a session whose idle child
//     --idle-timeout ended. stdin EOF or a signal closes every child's stdin
//     (each ends as at EOF) and the router exits 0 within its budget.
package fanout

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/jsonenc"
	"acpbridge/internal/proc"
)

// router serves one connection by fanning sessions out to child processes.
type router struct {
	out   *channel.Wire
	trace *channel.Tracer // --trace, or nil: it also records the reopenings
	log   *slog.Logger
	exe   string
	args  []string // the children's flags: ours less --fanout
	env   []string // the children's environment

	// detPart is ACPBRIDGE_DETERMINISTIC's part (scenario record
	// --deterministic), or 0; each child gets a part of its own, in the
	// order they start, so that children opened at once do not make the
	// same session ids.
	detPart int
	started atomic.Int64
	errw    io.Writer

	maxChildren int           // --max-children: children alive at most, the spares included
	version     string        // acpbridge's, which initialize's answer names
	command     []string      // the agent's command line, or nil for acpbridge
	guard       *proc.Guard   // for command children
	spareCount  int           // --spares
	idleTimeout time.Duration // --idle-timeout, or 0

	mu        sync.Mutex
	initArgs  json.RawMessage            // the client's initialize params, for new children
	authArgs  json.RawMessage            // a successful authenticate's params, repeated to children started after it
	noClose   bool                       // the agent offers no session/close: the router answers it, ending the child
	reopenBy  string                     // how a session whose child died is opened again: session/resume, session/load, or "" (it is not)
	openedBy  map[string]json.RawMessage // each open session's opening params (cwd, MCP servers), to reopen it
	lost      map[string]json.RawMessage // sessions whose child died, by id: their opening params
	spares    []*child                   // started (and initialized once the client has), serving no session
	sessions  map[string]*child          // session id → its child
	inflight  map[string]bool            // the client's request ids not answered yet
	children  map[*child]bool            // every child alive
	starting  int                        // children being started, each in a slot of --max-children
	warming   int                        // of those, the ones warmUp starts as spares
	transient *child                     // a child of the moment serving what names no session, or nil
	closing   bool
}

// child is one acpbridge process.
type child struct {
	r       *router
	cmd     *exec.Cmd
	in      io.WriteCloser
	stdout  io.Reader // read by read, once started
	session string    // the session it serves, once known ("" while warm)
	ending  bool      // r.mu: its session closed or failed to open; it is ending
	exited  chan struct{}

	writeMu sync.Mutex // one line at a time on its stdin

	errTail *tail // the end of its stderr, for an error when it ends unready

	mu           sync.Mutex // guards the fields below
	initialized  bool       // the client's initialize was sent to it
	ready        bool       // its initialize (and a repeated authenticate) answered: requests go straight to it
	active       time.Time  // when a request of the client's last went to it or was answered, or one of its own to the client
	calling      int        // its requests open at the client
	swallow      bool       // it replays a session the router reopens with session/load: its updates are not the client's
	reopening    bool       // the router's reopening of a session is out: it is not ready before its answer
	initAnswered bool       // its initialize is answered (r.mu too: see authenticated)
	authing      bool       // a repeated authenticate is out: it is not ready before its answer
	reopenHeld   bool       // the reopening is backlog[0], held until its initialize is answered
	backlog      [][]byte   // lines held until it is ready
	nextID       int64
	pending      map[int64]forwarded // our requests to it, by its id
	dead         bool                // it has exited: nothing more is sent to it
}

// forwarded is a client request a child has not answered yet.
type forwarded struct {
	clientID json.RawMessage // nil: the router's own (initialize of a new child)
	method   string
	session  string          // for load and resume: the session it opens
	once     bool            // the child was started for this request and ends after it
	params   json.RawMessage // an opening's (to reopen the session) or authenticate's (to repeat it)
	reopened time.Time       // the router's own reopening of a lost session: when it began
}

// authParams keeps an authenticate's params, which a success makes the
// router repeat to every child started after it.
func authParams(e envelope) json.RawMessage {
	if e.Method == acp.MethodAuthenticate {
		return append(json.RawMessage(nil), e.Params...)
	}
	return nil
}

// Options configure the router.
type Options struct {
	Version     string        // acpbridge's, which initialize's answer names
	Args        []string      // acpbridge's command line, which the children get less --fanout
	Env         []string      // the children's environment
	MaxLine     int           // --max-line-bytes
	MaxChildren int           // --max-children
	IdleTimeout time.Duration // --idle-timeout: a thread idle this long gives its process back (0: never)
	Log         *slog.Logger
	Stderr      io.Writer       // the children's stderr
	Trace       *channel.Tracer // --trace, or nil
	// Command, when set, is the agent each thread's child runs (--fanout
	// -- CMD ARGS...) instead of acpbridge: any single-session ACP agent.
	Command []string
	Spares  int         // --spares: children kept started for the next threads
	Guard   *proc.Guard // starts a Command child in a group of its own, ended with the router
}

// deterministicVar makes a child's ids and clock stable (main.go).
const deterministicVar = "ACPBRIDGE_DETERMINISTIC"

// envValue is the value of name in env, or "".
func envValue(env []string, name string) string {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

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
	// A child reads the client's lines as the router re-wraps them: its own
	// id for the client's, up to 20 digits longer.
	args := append(withoutFanout(o.Args), fmt.Sprintf("--max-line-bytes=%d", o.MaxLine+rewrapSlack))
	part, _ := strconv.Atoi(envValue(o.Env, deterministicVar))
	r := &router{log: o.Log, exe: exe, args: args, env: o.Env, detPart: part, command: o.Command, guard: o.Guard, spareCount: o.Spares,
		openedBy: map[string]json.RawMessage{}, lost: map[string]json.RawMessage{}, idleTimeout: o.IdleTimeout, errw: o.Stderr, maxChildren: o.MaxChildren, version: o.Version,
		sessions: map[string]*child{}, children: map[*child]bool{}, inflight: map[string]bool{}}
	if r.command == nil {
		r.reopenBy = acp.MethodSessionResume // acpbridge resumes any session it persisted
	}
	r.out = channel.NewWire(stdin, stdout, o.MaxLine, o.Trace)
	r.trace = o.Trace
	r.out.OnHangUp = func() { r.endChildren() } // their answers come before the router stops
	go r.warmUp()                               // initialize is answered here: it need not wait
	if r.idleTimeout > 0 {
		go r.evictIdle(ctx)
	}
	r.serve(ctx)
	r.shutdown()
	return 0
}

// serve routes the client's lines until stdin ends or a signal (ctx)
// ends the router as stdin's end would.
func (r *router) serve(ctx context.Context) {
	msgs := make(chan channel.Message)
	go r.read(msgs)
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			r.route(m)
		case <-ctx.Done():
			r.log.Info("ending as at stdin EOF", "why", context.Cause(ctx))
			r.out.LimitWrites() // a client that stopped reading cannot hold the end
			r.out.CloseCalls()
			return
		}
	}
}

// read hands the client's messages, as the wire decoded them, to msgs,
// closing it when stdin ends.
func (r *router) read(msgs chan<- channel.Message) {
	defer close(msgs)
	for {
		m, err := r.out.RecvMessage()
		if err != nil {
			return
		}
		msgs <- m
	}
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

// start starts a child in a slot reserved (r.starting) under r.mu, so that
// two starts at once cannot pass --max-children; it is initialized at once
// when the client's initialize params are known.
func (r *router) start() (*child, error) {
	c, err := r.startProcess()
	r.mu.Lock()
	r.starting--
	if c != nil {
		r.children[c] = true
	}
	init := r.initArgs
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	go c.read(c.stdout)
	if init != nil {
		c.initialize(init)
	}
	return c, nil
}

// startProcess starts a child: the agent command, or acpbridge.
func (r *router) startProcess() (*child, error) {
	if r.command != nil {
		return r.startAgent()
	}
	cmd := exec.Command(r.exe, r.args...)
	cmd.Env = r.env
	if r.detPart > 0 {
		cmd.Env = append(slices.Clip(r.env), fmt.Sprintf("%s=%d", deterministicVar, r.detPart*1000+int(r.started.Add(1))))
	}
	cmd.Stderr = r.errw
	cmd.SysProcAttr = proc.ChildAcpbridgeAttr() // ends as at EOF should the router die
	c, err := r.startChild(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting a child acpbridge: %w", err)
	}
	c.ready = true // acpbridge takes requests before its initialize is answered, in order
	return c, nil
}

// startChild starts cmd with pipes to its stdin and from its stdout.
func (r *router) startChild(cmd *exec.Cmd) (*child, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{r: r, cmd: cmd, in: in, stdout: outp, exited: make(chan struct{}), pending: map[int64]forwarded{}}, nil
}

// startAgent starts a child running the agent command, in the router's
// working directory with its environment as it is, in a process group of
// its own (the keeper ends it should the router be killed). Its first
// requests wait for its initialize answer.
func (r *router) startAgent() (*child, error) {
	cmd := r.guard.Command(r.command[0], r.command[1:])
	cmd.Env = r.env
	errTail := &tail{}
	cmd.Stderr = io.MultiWriter(r.errw, errTail)
	c, err := r.startChild(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting the agent %q: %w", r.command[0], err)
	}
	if err := r.guard.Started(cmd); err != nil {
		r.log.Warn("an agent's children may outlive the router if it is killed", "err", err)
	}
	c.errTail = errTail
	return c, nil
}

// tail keeps the last bytes written to it (a child's stderr).
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// initialize sends the child the client's initialize params, once; the
// router answered the client itself.
func (c *child) initialize(params json.RawMessage) {
	c.mu.Lock()
	done := c.initialized
	c.initialized = true
	c.mu.Unlock()
	if !done {
		c.send(forwarded{method: acp.MethodInitialize}, acp.MethodInitialize, params)
	}
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

// warmUp starts children until spares of them wait or are starting
// (within --max-children): several warmUps at once (three threads
// answered together) start no more than that between them.
func (r *router) warmUp() {
	for {
		r.mu.Lock()
		need := len(r.spares)+r.warming < r.spareCount && !r.closing && r.countLocked() < r.maxChildren
		if need {
			r.starting++
			r.warming++
		}
		r.mu.Unlock()
		if !need {
			return
		}
		c, err := r.start()
		r.mu.Lock()
		r.warming--
		r.mu.Unlock()
		if err != nil {
			r.log.Error("cannot start a child", "err", err)
			return
		}
		r.mu.Lock()
		init := r.initArgs
		if len(r.spares) < r.spareCount && !r.closing {
			r.spares = append(r.spares, c)
			c = nil
		}
		r.mu.Unlock()
		if c == nil && init != nil {
			r.spares0(init) // a spare that started as the client's initialize came
		}
		if c != nil {
			c.in.Close()
			return
		}
	}
}

// spares0 initializes the spares not initialized yet.
func (r *router) spares0(init json.RawMessage) {
	r.mu.Lock()
	waiting := slices.Clone(r.spares)
	r.mu.Unlock()
	for _, c := range waiting {
		c.initialize(init)
	}
}

// spare is a waiting child for what names no session, or nil.
func (r *router) spare() *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spares) == 0 {
		return nil
	}
	return r.spares[0]
}

// countLocked is how many children count toward --max-children: those
// alive and not ending, and those starting. r.mu is held.
func (r *router) countLocked() int {
	n := r.starting
	for c := range r.children {
		if !c.ending {
			n++
		}
	}
	return n
}

// takeWarm hands a spare child over to a session, or, when none waits,
// one started now. The spares are refilled once the child has answered
// (answered): a start shares the CPU with whatever runs beside it, and a
// thread opened while a spare waits should not wait on the next one's.
func (r *router) takeWarm() (*child, error) {
	r.mu.Lock()
	var c *child
	if len(r.spares) > 0 {
		c, r.spares = r.spares[0], r.spares[1:]
	}
	n := r.countLocked()
	if c == nil && n < r.maxChildren {
		r.starting++
	}
	r.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if n >= r.maxChildren && r.evictLeastRecent() {
		return r.takeWarm() // the evicted thread's process no longer counts
	}
	if n >= r.maxChildren {
		return nil, fmt.Errorf("this acpbridge --fanout already runs %d processes (its sessions, those being opened, its spares), its limit (--max-children %d): close a thread, or start acpbridge with a higher --max-children", n, r.maxChildren)
	}
	c, err := r.start()
	if err != nil {
		r.log.Error("cannot start a child", "err", err)
		return nil, fmt.Errorf("no child process could be started (%v); see the log on stderr", err)
	}
	return c, nil
}

// envelope is what the router reads of a message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// route handles one client message, in arrival order. The wire has
// decoded it once and answered what is not a well-formed request or
// notification; what routes it (id, method, sessionId) is read from that,
// and its params go on to the child as they are, never copied again.
func (r *router) route(m channel.Message) {
	var e envelope
	method, _ := m.Get("method")
	if m == nil || json.Unmarshal(method, &e.Method) != nil {
		r.answerErr("null", jrpc2.InvalidRequest, "invalid request: not a JSON-RPC request object")
		return
	}
	e.ID, _ = m.Get("id")
	e.Params, _ = m.Get("params")
	id, hasID := e.ID, len(e.ID) > 0
	if hasID && r.duplicate(id) {
		return
	}
	var p struct {
		SessionID *string `json:"sessionId"`
	}
	json.Unmarshal(e.Params, &p)
	if !hasID {
		// A notification: session/cancel goes to its child; others to
		// whoever serves the session, or nowhere.
		if e.Method == acp.MethodCancelRequest {
			r.cancelRequest(e.Params)
			return
		}
		if p.SessionID != nil {
			if c := r.child(*p.SessionID); c != nil {
				c.notify(e.Method, e.Params)
			}
		}
		return
	}
	r.dispatch(id, e, p.SessionID)
}

// cancelRequest forwards $/cancel_request to the child that owns the
// request, with that child's id for it; an answered or unknown id goes
// nowhere.
func (r *router) cancelRequest(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	var want bytes.Buffer
	if json.Unmarshal(params, &p) != nil || json.Compact(&want, p.RequestID) != nil {
		return
	}
	r.mu.Lock()
	all := make([]*child, 0, len(r.children))
	for c := range r.children {
		all = append(all, c)
	}
	r.mu.Unlock()
	for _, c := range all {
		if id, ok := c.idOf(want.Bytes()); ok {
			c.notify(acp.MethodCancelRequest, fmt.Appendf(nil, `{"requestId":%d}`, id))
			return
		}
	}
}

// idle reports whether the child has no request of the client's pending.
func (c *child) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) == 0
}

// idOf is the child's id for the client's request id, if it has it pending.
func (c *child) idOf(clientID []byte) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, f := range c.pending {
		if bytes.Equal(f.clientID, clientID) {
			return id, true
		}
	}
	return 0, false
}

// duplicate answers, and reports, a request whose id is in flight.
func (r *router) duplicate(id json.RawMessage) bool {
	r.mu.Lock()
	dup := r.inflight[string(id)]
	r.inflight[string(id)] = true
	r.mu.Unlock()
	if dup {
		r.out.Send(channel.EncodeResponse(string(id), nil, &jrpc2.Error{Code: jrpc2.InvalidRequest, Message: "duplicate request ID"}))
	}
	return dup
}

// dispatch sends a request where it goes: a child of its session, a new
// child, or the warm one; or answers it here.
func (r *router) dispatch(id json.RawMessage, e envelope, session *string) {
	switch e.Method {
	case acp.MethodInitialize:
		if r.command != nil {
			r.initializeAgent(id, e.Params)
			return
		}
		// Answered here: the children are this binary with these flags, so
		// their capabilities are known. The children waiting are
		// initialized now, each started later at its start.
		r.mu.Lock()
		r.initArgs = append(json.RawMessage(nil), e.Params...)
		waiting := slices.Clone(r.spares)
		r.mu.Unlock()
		for _, c := range waiting {
			c.initialize(r.initArgs)
		}
		r.answer(id, acp.AgentInitializeResult(r.version), nil)
	case acp.MethodSessionNew:
		r.open(e, "")
	case acp.MethodSessionLoad, acp.MethodSessionResume:
		r.reopen(id, e, session)
	case acp.MethodSessionDelete:
		if session != nil && r.child(*session) != nil {
			r.answer(id, nil, acp.Errorf(acp.CodeSessionLive, "session %s is open on this connection and cannot be deleted; close it with session/close first", *session).
				WithData(map[string]string{"activeSessionId": *session}))
			return
		}
		r.forwardWarm(e)
	default:
		r.toSession(id, e, session)
	}
}

// initializeAgent forwards the client's initialize to a child of the agent
// (a spare, or one started now), whose answer goes back as it is (but for
// session/close, which the router offers when the agent does not); the
// other spares, and every child started later, get the same params.
func (r *router) initializeAgent(id json.RawMessage, params json.RawMessage) {
	r.mu.Lock()
	var c *child
	if len(r.spares) > 0 {
		c = r.spares[0]
	} else {
		r.starting++
	}
	r.mu.Unlock()
	if c == nil {
		var err error
		if c, err = r.start(); err != nil {
			r.answer(id, nil, acp.Errorf(acp.CodeInternal, "cannot start the agent (%v): check the command after -- in the agent's settings", err))
			return
		}
		r.mu.Lock()
		r.spares = append(r.spares, c)
		r.mu.Unlock()
	}
	c.mu.Lock()
	c.initialized = true
	c.mu.Unlock()
	c.send(forwarded{clientID: id, method: acp.MethodInitialize}, acp.MethodInitialize, params)
	r.mu.Lock()
	r.initArgs = append(json.RawMessage(nil), params...)
	r.mu.Unlock()
	r.spares0(r.initArgs)
}

// reopen opens a session for session/load or resume in a child of its
// own, unless a child serves it already.
func (r *router) reopen(id json.RawMessage, e envelope, session *string) {
	if session == nil {
		r.forwardWarm(e) // the child answers the missing field
		return
	}
	if r.child(*session) != nil {
		r.answer(id, nil, acp.Errorf(acp.CodeSessionLive, "session %s is already open on this connection; use it, or close it with session/close before opening it again", *session).
			WithData(map[string]string{"activeSessionId": *session}))
		return
	}
	r.open(e, *session)
}

// toSession forwards a request to the child serving its session; one that
// names none (or session/list) goes to the warm child.
func (r *router) toSession(id json.RawMessage, e envelope, session *string) {
	if session == nil || e.Method == acp.MethodSessionList {
		r.forwardWarm(e)
		return
	}
	c := r.child(*session)
	if c == nil {
		c = r.reopenLost(*session)
	}
	if c == nil {
		r.answer(id, nil, acp.Errorf(acp.CodeResourceNotFound, "session %s is not open on this connection; open it with session/load or session/resume, or create one with session/new", *session).
			WithData(map[string]string{"sessionId": *session}))
		return
	}
	r.mu.Lock()
	noClose := r.noClose
	r.mu.Unlock()
	if e.Method == acp.MethodSessionClose && noClose {
		// The agent cannot close a session: ending its process does.
		r.mu.Lock()
		if r.sessions[*session] == c {
			delete(r.sessions, *session)
		}
		c.ending = true
		r.mu.Unlock()
		r.answer(id, struct{}{}, nil)
		r.endChild(c)
		return
	}
	c.send(forwarded{clientID: id, method: e.Method, params: authParams(e)}, e.Method, e.Params)
}

// reopenLost opens again, in a new child, a session whose child died: with
// session/resume where the agent offers it, else with session/load, whose
// replay the client does not see (it shows the conversation already). The
// request that named the session follows it to the child, in order. nil
// when the session was not lost (or cannot be reopened).
func (r *router) reopenLost(session string) *child {
	r.mu.Lock()
	opened, lost := r.lost[session]
	method := r.reopenBy
	delete(r.lost, session)
	r.mu.Unlock()
	if !lost || method == "" {
		return nil
	}
	c, err := r.takeWarm()
	if err != nil {
		r.log.Warn("cannot reopen a session whose process ended", "session", session, "err", err)
		return nil
	}
	var p map[string]json.RawMessage
	json.Unmarshal(opened, &p)
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	p["sessionId"], _ = json.Marshal(session)
	params, _ := json.Marshal(p)
	r.mu.Lock()
	r.sessions[session] = c
	r.openedBy[session] = opened
	c.session = session
	r.mu.Unlock()
	c.mu.Lock()
	c.swallow = method == acp.MethodSessionLoad
	if r.command != nil {
		// Another agent may run the request that named the session
		// beside the reopening: it waits for the reopening's answer. An
		// acpbridge child runs them in arrival order itself, so the
		// request follows the reopening at once.
		c.ready, c.reopening = false, true
	}
	c.mu.Unlock()
	r.log.Debug("reopening a session whose process ended", "session", session, "with", method, "pid", c.cmd.Process.Pid)
	c.send(forwarded{method: method, session: session, reopened: time.Now()}, method, params)
	return c
}

// idle reports whether the child serves a session with nothing in flight:
// no request of the client's pending (so no turn running), none of its own
// open at the client; and since when.
func (c *child) idleSince() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active, len(c.pending) == 0 && c.calling == 0 && !c.dead
}

// evictIdle ends, every so often, the processes of threads idle for the
// idle timeout: their sessions stay open for the client and are reopened,
// as after a crash, on their next request.
func (r *router) evictIdle(ctx context.Context) {
	tick := time.NewTicker(min(r.idleTimeout/2, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		if r.closing {
			r.mu.Unlock()
			return
		}
		var idle []*child
		for _, c := range r.sessions {
			if since, ok := c.idleSince(); ok && time.Since(since) >= r.idleTimeout {
				idle = append(idle, c)
			}
		}
		r.mu.Unlock()
		for _, c := range idle {
			r.evict(c, "idle")
		}
	}
}

// evict gives back the process of an idle thread: the session is closed in
// it (where the agent offers session/close; else the process just ends) and
// the child ends; the session stays open for the client, lost until its
// next request reopens it.
func (r *router) evict(c *child, why string) bool {
	r.mu.Lock()
	sid := c.session
	opened, ok := r.openedBy[sid]
	if !ok || r.sessions[sid] != c || c.ending || r.reopenBy == "" {
		r.mu.Unlock()
		return false
	}
	delete(r.sessions, sid)
	r.lost[sid] = opened
	c.ending = true
	noClose := r.noClose
	r.mu.Unlock()
	since, _ := c.idleSince()
	r.log.Debug("evicting a thread's process", "session", sid, "why", why, "pid", c.cmd.Process.Pid, "idle", time.Since(since).Round(time.Millisecond))
	if noClose {
		r.endChild(c)
	} else {
		c.send(forwarded{method: acp.MethodSessionClose, session: sid}, acp.MethodSessionClose, json.RawMessage(fmt.Sprintf(`{"sessionId":%q}`, sid)))
	}
	return true
}

// evictLeastRecent evicts the idle thread used least recently, to make room
// under --max-children; it reports whether there was one.
func (r *router) evictLeastRecent() bool {
	r.mu.Lock()
	var lru *child
	var oldest time.Time
	for _, c := range r.sessions {
		if since, ok := c.idleSince(); ok && (lru == nil || since.Before(oldest)) {
			lru, oldest = c, since
		}
	}
	r.mu.Unlock()
	return lru != nil && r.evict(lru, "--max-children")
}

// child returns the child serving session id, or nil.
func (r *router) child(id string) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// forwardWarm sends a request that names no session (session/list,
// delete, ...) to the warm child; with none waiting (a burst took them, or
// --max-children leaves no room for one), to a child of the moment, started
// for it even past the cap, one at a time, and ended once it has answered
// what it was sent: these requests never hold a thread's slot.
func (r *router) forwardWarm(e envelope) {
	if c := r.spare(); c != nil {
		c.send(forwarded{clientID: e.ID, method: e.Method, params: authParams(e)}, e.Method, e.Params)
		return
	}
	r.mu.Lock()
	c := r.transient
	if c == nil || c.ending {
		c = nil
		r.starting++ // over the cap if it must: see above
	}
	r.mu.Unlock()
	if c == nil {
		var err error
		if c, err = r.start(); err != nil {
			r.log.Error("cannot start a child", "err", err)
			r.answer(e.ID, nil, acp.Errorf(acp.CodeInternal, "no child process could be started to answer %s (%v); see the log on stderr", e.Method, err))
			return
		}
		r.mu.Lock()
		r.transient = c
		r.mu.Unlock()
	}
	c.send(forwarded{clientID: e.ID, method: e.Method, once: true, params: authParams(e)}, e.Method, e.Params)
}

// open gives a session/new, load or resume a child of its own. For load
// and resume the session is routed to it at once, so that requests
// pipelined behind the load reach it in order.
func (r *router) open(e envelope, session string) {
	c, err := r.takeWarm()
	if err != nil {
		r.answer(e.ID, nil, acp.Errorf(acp.CodeInternal, "%v", err))
		return
	}
	if session != "" {
		r.mu.Lock()
		r.sessions[session] = c
		c.session = session
		r.mu.Unlock()
	}
	c.send(forwarded{clientID: e.ID, method: e.Method, session: session, params: e.Params}, e.Method, e.Params)
}

// answer writes a response to the client.
func (r *router) answer(id json.RawMessage, result any, err error) {
	var e *jrpc2.Error
	if err != nil {
		e = acp.AsError(err)
	}
	r.respond(string(id), channel.EncodeResponse(string(id), result, e))
}

func (r *router) answerErr(id string, code jrpc2.Code, msg string) {
	r.respond(id, channel.EncodeResponse(id, nil, &jrpc2.Error{Code: code, Message: msg}))
}

// respond writes the response to the client's request id; the id may be
// used again after it.
func (r *router) respond(id string, msg []byte) {
	r.mu.Lock()
	delete(r.inflight, id)
	r.mu.Unlock()
	r.out.Send(msg)
}

// send writes a request to the child under an id of its own.
func (c *child) send(f forwarded, method string, params json.RawMessage) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		if f.clientID != nil {
			c.r.answer(f.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent process for this request has ended; open the session again with session/load"))
		}
		return
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = f
	c.active = time.Now()
	head := jsonenc.AppendString(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":`, id), method)
	if !f.reopened.IsZero() {
		c.r.trace.Child("to-child", c.cmd.Process.Pid, messageLine(head, params))
	}
	if !f.reopened.IsZero() && !c.initAnswered && c.r.command != nil {
		// A reopening in a process whose initialize is not answered yet
		// goes first once it is; the rest waits for the reopening's
		// answer.
		c.backlog = append([][]byte{messageLine(head, params)}, c.backlog...)
		c.reopenHeld = true
		c.mu.Unlock()
		return
	}
	if !c.ready && method != acp.MethodInitialize && !(f.clientID == nil && method == acp.MethodAuthenticate) && f.reopened.IsZero() {
		// Its initialize is not answered yet: an agent may refuse what
		// comes before (the TypeScript SDK does).
		c.backlog = append(c.backlog, messageLine(head, params))
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.writeMessage(head, params)
}

// messageLine is a whole message line: head, params, end.
func messageLine(head []byte, params json.RawMessage) []byte {
	if len(params) == 0 {
		return append(head, '}')
	}
	return append(append(append(head, `,"params":`...), params...), '}')
}

// setReady lets the child's held lines go, in order, and the next ones
// straight after them.
func (c *child) setReady() {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	if c.reopening && c.reopenHeld && !c.authing {
		reopen := c.backlog[0]
		c.backlog, c.reopenHeld = c.backlog[1:], false
		c.mu.Unlock()
		c.in.Write(append(reopen, '\n'))
		return // its answer makes it ready
	}
	if c.reopening || c.authing {
		c.mu.Unlock()
		return // the reopening's or the authenticate's answer makes it ready
	}
	backlog := c.backlog
	c.backlog, c.ready = nil, true
	c.mu.Unlock()
	for _, line := range backlog {
		c.in.Write(append(line, '\n'))
	}
}

// notify forwards a notification of the client's to the child (held with
// its requests until it is ready).
func (c *child) notify(method string, params json.RawMessage) {
	head := jsonenc.AppendString([]byte(`{"jsonrpc":"2.0","method":`), method)
	c.mu.Lock()
	if !c.ready {
		c.backlog = append(c.backlog, messageLine(head, params))
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.writeMessage(head, params)
}

// writeMessage writes a message's head, its params as they are, and its end.
func (c *child) writeMessage(head []byte, params json.RawMessage) {
	if len(params) == 0 {
		c.write(head, []byte("}"))
		return
	}
	c.write(append(head, `,"params":`...), params, []byte("}"))
}

// write writes one line to the child, made of parts (a long prompt's
// params are written as they are, not copied into a new line); a child that
// is gone has already failed its pending requests.
func (c *child) write(parts ...[]byte) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for _, p := range parts {
		if _, err := c.in.Write(p); err != nil {
			return
		}
	}
	c.in.Write([]byte("\n"))
}

// read takes the child's output until it exits.
func (c *child) read(out io.Reader) {
	br := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := readWhole(br)
		if len(line) > 0 {
			c.handle(line)
			if br.Buffered() == 0 {
				c.r.out.Flush()
			}
		}
		if err != nil {
			break
		}
	}
	c.r.out.Flush()
	c.cmd.Wait()
	close(c.exited)
	c.died()
}

// readWhole reads one line. A line within the reader's buffer is returned
// without a copy, valid until the next read. A child is this program, so
// its lines are not limited here: a load may replay a prompt as long as the
// client's line limit allowed.
func readWhole(br *bufio.Reader) ([]byte, error) {
	frag, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return bytes.TrimSuffix(frag, []byte("\n")), err
	}
	line := append([]byte(nil), frag...)
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			return bytes.TrimSuffix(line, []byte("\n")), err
		}
	}
}

// notificationPrefix starts every notification acpbridge writes (internal/channel).
var notificationPrefix = []byte(`{"jsonrpc":"2.0","method":"`)

// handle passes one line of the child's on.
func (c *child) handle(line []byte) {
	c.mu.Lock()
	swallow := c.swallow
	c.mu.Unlock()
	if bytes.HasPrefix(line, notificationPrefix) && !bytes.Contains(line, []byte(`"id"`)) {
		// A notification for sure (it has no id anywhere): session/update,
		// unchanged, in order, not decoded. A request written with its
		// method first is decoded below.
		if !swallow {
			c.r.out.Forward(line)
		} else {
			c.r.trace.Child("from-child", c.cmd.Process.Pid, line)
		}
		return
	}
	var e envelope
	if json.Unmarshal(line, &e) != nil {
		c.r.log.Warn("a child wrote a line that is not JSON", "pid", c.cmd.Process.Pid)
		return
	}
	switch {
	case e.Method != "" && len(e.ID) == 0:
		if !swallow {
			c.r.out.Forward(line) // session/update: unchanged, in order
		} else {
			c.r.trace.Child("from-child", c.cmd.Process.Pid, line)
		}
	case e.Method != "":
		go c.callClient(e) // it waits for the client
	default:
		n, err := strconv.ParseInt(string(e.ID), 10, 64)
		c.mu.Lock()
		f, ok := c.pending[n]
		delete(c.pending, n)
		c.active = time.Now()
		c.mu.Unlock()
		if err != nil || !ok {
			return
		}
		if !f.reopened.IsZero() {
			c.r.trace.Child("from-child", c.cmd.Process.Pid, line)
		}
		c.r.answered(c, f, e)
	}
}

// answered passes a child's response on and updates the routing.
func (r *router) answered(c *child, f forwarded, e envelope) {
	if f.method == acp.MethodSessionNew && len(e.Error) == 0 {
		if refused := r.sameSession(c, f, e); refused {
			return
		}
	}
	r.track(c, f, e)
	switch {
	case f.method == acp.MethodInitialize:
		if f.clientID != nil {
			e.Result = r.learnAgent(e.Result)
		}
		// Under r.mu, so that a client's authenticate answered now is
		// either seen here or repeats to this child (authenticated).
		r.mu.Lock()
		auth := r.authArgs
		if len(e.Error) > 0 {
			auth = nil
		}
		c.mu.Lock()
		c.initAnswered, c.authing = true, auth != nil
		c.mu.Unlock()
		r.mu.Unlock()
		if auth != nil {
			c.send(forwarded{method: acp.MethodAuthenticate}, acp.MethodAuthenticate, auth)
		} else {
			c.setReady()
		}
	case f.method == acp.MethodAuthenticate && f.clientID == nil:
		c.mu.Lock()
		c.authing = false
		c.mu.Unlock()
		c.setReady()
	case !f.reopened.IsZero():
		c.mu.Lock()
		c.swallow, c.reopening = false, false
		c.mu.Unlock()
		c.setReady()
		r.log.Debug("reopened a session whose process ended", "session", f.session, "with", f.method, "failed", len(e.Error) > 0, "took", time.Since(f.reopened))
	case f.method == acp.MethodAuthenticate && len(e.Error) == 0:
		r.authenticated(c, f.params)
	}
	if f.clientID == nil {
		return // the router's own initialize or authenticate of a child
	}
	resp := acp.Response{JSONRPC: "2.0", ID: f.clientID, Result: e.Result, Error: e.Error}
	if len(e.Error) > 0 {
		resp.Result = nil
	}
	b, _ := jsonenc.AppendTrusted(nil, resp)
	r.respond(string(f.clientID), b)
	if opening(f.method) {
		r.out.Flush() // the thread is open before its successor's process starts
		go r.warmUp()
	}
}

// learnAgent notes from the agent's initialize answer whether it offers
// session/close; when it does not, the router offers it (ending the
// child), so that an editor still frees processes.
func (r *router) learnAgent(result json.RawMessage) json.RawMessage {
	var res map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil {
		return result
	}
	var caps map[string]json.RawMessage
	json.Unmarshal(res["agentCapabilities"], &caps)
	var sc map[string]json.RawMessage
	json.Unmarshal(caps["sessionCapabilities"], &sc)
	r.mu.Lock()
	switch _, resume := sc["resume"]; {
	case resume:
		r.reopenBy = acp.MethodSessionResume
	case string(caps["loadSession"]) == "true":
		r.reopenBy = acp.MethodSessionLoad
	}
	r.mu.Unlock()
	if _, ok := sc["close"]; ok {
		return result
	}
	r.mu.Lock()
	r.noClose = true
	r.mu.Unlock()
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

// authenticated repeats a successful authenticate to every other child:
// authentication is per process, and each thread's child must have it.
//
// A child whose initialize is answered is not ready again until this
// authenticate is answered: an agent that runs requests at once would
// otherwise run the client's next session/new beside it, unauthenticated.
// One whose initialize is not answered yet gets it after that answer.
func (r *router) authenticated(done *child, params json.RawMessage) {
	r.mu.Lock()
	r.authArgs = params
	var others []*child
	for c := range r.children {
		if c == done {
			continue
		}
		c.mu.Lock()
		if c.initAnswered && !c.dead {
			c.ready, c.authing = false, true
			others = append(others, c)
		}
		c.mu.Unlock()
	}
	r.mu.Unlock()
	for _, c := range others {
		c.send(forwarded{method: acp.MethodAuthenticate}, acp.MethodAuthenticate, params)
	}
}

// sameSession refuses a session/new whose answer names a session already
// live on this connection in another child (an agent that always answers
// the same id): the client is told, and the child ended.
func (r *router) sameSession(c *child, f forwarded, e envelope) bool {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(e.Result, &res)
	r.mu.Lock()
	other, live := r.sessions[res.SessionID]
	live = live && other != c
	if live {
		c.ending = true
	}
	r.mu.Unlock()
	if !live {
		return false
	}
	r.answer(f.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent answered session/new with session id %q, which is already live on this connection in another of its processes; each session needs an id of its own: fix the agent, or close the other thread first", res.SessionID))
	r.endChild(c)
	go r.warmUp()
	return true
}

// opening is whether method opens a session, in a child taken from the spares.
func opening(method string) bool {
	return method == acp.MethodSessionNew || method == acp.MethodSessionLoad || method == acp.MethodSessionResume
}

// track follows the child c's answer e to method: the session it now
// serves, or its end (its stdin closed) when opening failed or the session
// closed.
func (r *router) track(c *child, f forwarded, e envelope) {
	method, session := f.method, f.session
	failed := len(e.Error) > 0
	opens := opening(method)
	ends := (opens && failed) || (method == acp.MethodSessionClose && !failed) || (f.once && c.idle())
	r.mu.Lock()
	switch {
	case method == acp.MethodSessionNew && !failed:
		var res struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(e.Result, &res)
		r.sessions[res.SessionID] = c
		c.session = res.SessionID
		r.openedBy[res.SessionID] = f.params
	case opens && !failed && f.clientID != nil:
		r.openedBy[session] = f.params
	case opens && failed: // the child serves nothing and goes
		if session != "" && r.sessions[session] == c {
			delete(r.sessions, session)
		}
	case ends: // closed: it ends as at EOF
		if r.sessions[c.session] == c {
			delete(r.sessions, c.session)
		}
		if _, evicted := r.lost[c.session]; !evicted {
			delete(r.openedBy, c.session)
		}
	}
	if ends {
		c.ending = true
		if r.transient == c {
			r.transient = nil
		}
	}
	r.mu.Unlock()
	if ends {
		r.endChild(c)
	}
}

// endChild ends a child as its session's close: its stdin closed (it ends
// as at EOF); an agent child that has not ended a while later gets
// SIGTERM, then SIGKILL, with its group, so that one ignoring EOF does not
// keep its thread's memory.
func (r *router) endChild(c *child) {
	c.in.Close()
	if r.command == nil {
		return
	}
	go func() {
		for _, step := range []struct {
			after time.Duration
			end   func(pid int)
		}{{agentEOFWait, proc.TermGroup}, {agentTermWait, r.guard.KillGroup}} {
			select {
			case <-c.exited:
				return
			case <-time.After(step.after):
				step.end(c.cmd.Process.Pid)
			}
		}
	}()
}

// How long an agent child may take to end after its stdin's close before
// SIGTERM, and after SIGTERM before SIGKILL: within the router's exit
// budget.
const (
	agentEOFWait  = time.Second
	agentTermWait = 500 * time.Millisecond
)

// callClient forwards a child's request to the client and its answer back.
func (c *child) callClient(e envelope) {
	c.mu.Lock()
	c.calling++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.calling--
		c.active = time.Now()
		c.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	var params any = e.Params
	if len(e.Params) == 0 {
		params = struct{}{}
	}
	raw, err := c.r.out.CallOrWithdraw(ctx, e.Method, params)
	resp := acp.Response{JSONRPC: "2.0", ID: e.ID, Result: raw}
	switch {
	case err != nil:
		resp.Result, resp.Error = nil, acp.MustJSON(acp.AsError(err))
	case len(raw) == 0:
		resp.Result = json.RawMessage("null")
	}
	b, _ := jsonenc.AppendTrusted(nil, resp)
	c.write(b)
}

// died fails what the child left unanswered and forgets it.
func (c *child) died() {
	r := c.r
	r.mu.Lock()
	delete(r.children, c)
	r.spares = slices.DeleteFunc(r.spares, func(s *child) bool { return s == c })
	if r.transient == c {
		r.transient = nil
	}
	session := c.session
	if session != "" && r.sessions[session] == c {
		delete(r.sessions, session)
		if opened, ok := r.openedBy[session]; ok && r.reopenBy != "" && !c.ending {
			r.lost[session] = opened // reopened on its next request
		}
	}
	closing := r.closing
	r.mu.Unlock()
	c.mu.Lock()
	pending := c.pending
	c.pending = map[int64]forwarded{}
	c.dead = true
	c.mu.Unlock()
	if (len(pending) > 0 && !closing) || (!closing && session != "" && c.cmd.ProcessState != nil && !c.cmd.ProcessState.Success()) {
		if session == "" {
			r.log.Error("a spare agent process ended", "pid", c.cmd.Process.Pid, "status", c.cmd.ProcessState.String())
		} else {
			r.log.Error("the process of a session ended", "session", session, "pid", c.cmd.Process.Pid, "status", c.cmd.ProcessState.String())
		}
	}
	c.answerUnanswered(session, pending, closing)
	for _, f := range pending {
		if opening(f.method) {
			go r.warmUp() // as answered would have
			break
		}
	}
}

// answerUnanswered answers the client's requests that the dead child c
// (serving session) did not answer. When the router is ending (the
// client's EOF or a signal), a prompt the child did not answer in time was
// cancelled by that end, and is answered so: however many children end at
// once on however few cores, every running prompt is answered cancelled
// (the child persists its turn as interrupted before it exits).
func (c *child) answerUnanswered(session string, pending map[int64]forwarded, ending bool) {
	for _, f := range pending {
		if f.clientID == nil {
			continue
		}
		if ending && f.method == acp.MethodSessionPrompt {
			c.r.answer(f.clientID, acp.PromptResult{StopReason: acp.StopCancelled}, nil)
			continue
		}
		if f.method == acp.MethodInitialize {
			c.r.answer(f.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent %q ended (%s) before it answered initialize; its stderr ends: %s", strings.Join(c.r.command, " "), c.cmd.ProcessState, cmp.Or(c.errTail.String(), "(nothing)")))
			continue
		}
		if session == "" { // a spare serving what names no session
			c.r.answer(f.clientID, nil, acp.Errorf(acp.CodeInternal, "the agent process that served %s ended (%s) before it answered; send it again", f.method, c.cmd.ProcessState))
			continue
		}
		c.r.answer(f.clientID, nil, acp.Errorf(acp.CodeInternal, "the process of session %s ended (%s) before it answered %s; it is not restarted: open the session again with session/load", session, c.cmd.ProcessState, f.method))
	}
}

// fanoutExitWait bounds how long shutdown waits for the children, each
// ending as at EOF (its turn answered and persisted, which takes well under
// a second); only one stuck past it is killed.
const fanoutExitWait = 5 * time.Second

// endChildren closes every child's stdin: each ends as at EOF.
func (r *router) endChildren() []*child {
	r.mu.Lock()
	r.closing = true
	var all []*child
	for c := range r.children {
		all = append(all, c)
	}
	r.mu.Unlock()
	for _, c := range all {
		c.in.Close()
	}
	return all
}

// shutdown ends every child as stdin's EOF ends one acpbridge, waits for
// them (bounded), and kills what is left.
func (r *router) shutdown() {
	all := r.endChildren()
	if r.command != nil {
		for _, c := range all {
			r.endChild(c) // SIGTERM, then SIGKILL, for one that ignores its stdin's end
		}
	}
	deadline := time.NewTimer(fanoutExitWait)
	defer deadline.Stop()
	for _, c := range all {
		select {
		case <-c.exited:
		case <-deadline.C:
			for _, c := range all {
				c.cmd.Process.Kill()
			}
			r.out.Flush()
			return
		}
	}
	r.out.Flush()
}
