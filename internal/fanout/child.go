// child.go holds one child process: its states, its start with pipes of
// the router's own, the writer that feeds its stdin from a bounded queue,
// the reader that holds its lines to the line limit, the watch on its
// process's end, and the steps that end it.

package fanout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/events"
	"acpbridge/internal/proc"
)

// child is one process and what the router knows of it.
type child struct {
	state   childState
	next    childState // what it does once initialized (settle): ready unless taken for a thread
	pid     int
	cmd     *exec.Cmd
	session string  // the session it serves or opens, once known
	thread  *thread // the thread it serves, opens, or ends for
	claim   func(*child, error)
	once    bool   // started past the cap for what names no session: it ends once it has nothing open
	dir     string // where its process runs ("": the router's directory; see processDir)

	nextID  int64
	pending map[int64]*request            // what it was sent and has not answered, by its id
	calls   map[string]context.CancelFunc // its requests open at the client, by its id
	held    []heldLine                    // lines waiting for it to be ready
	active  time.Time                     // when a request last went to it or was answered
	dropped int                           // its lines dropped for their length
	endStep int                           // how far ending it has gone (endChild)
	after   []func()                      // what runs once it is dead
	gaveUp  string                        // why the router ended it before it was ready, or ""

	in      *outbox
	errTail *tail
}

// request is a message the router sent a child and waits on an answer to.
type request struct {
	kind     requestKind
	clientID json.RawMessage // the client's id, where the answer goes to the client
	method   string
	params   json.RawMessage // kept for openings (to reopen) and authenticate (to repeat)
	thread   *thread         // the thread it opens, reopens or closes
	sent     time.Time
}

// requestKind says whose a request is and what its answer moves.
type requestKind int

const (
	kindClient requestKind = iota // the client's, answered to the client
	kindInit                      // the router's initialize of a child
	kindAuth                      // the router's repeat of the client's authenticate
	kindReopen                    // the router's reopening of a thread (or the client's load or resume doing it)
	kindEvict                     // the router's session/close of a child it ends
	kindList                      // the router's session/list: does the agent list the thread's session
)

// Bounds on what one child may hold of the router's.
const (
	queuedLines = 256     // lines waiting to be written to its stdin
	childCalls  = 64      // its requests open at the client at once
	lineSlack   = 4 << 10 // a child's line may exceed the client's limit by this (a replayed prompt's wrapping)
	drainWait   = 500 * time.Millisecond
)

// queuedBytes bounds the bytes waiting for one child's stdin: room for two
// of the longest lines.
func (r *router) queuedBytes() int { return 2*r.MaxLine + 1<<20 }

// process is a started child's process and the router's ends of its pipes.
type process struct {
	cmd    *exec.Cmd
	in     *outbox
	stdout *os.File
	out    *account      // its part of the router's budget: what its reader has read, not yet written
	stderr *os.File      // copied to the router's stderr
	copied chan struct{} // closed once its stderr is copied to its end
}

// startProcess starts c's process with pipes of the router's own (so that
// waiting on the process waits on nothing else), its writer and the copy of
// its stderr; follow reads its output and watches its end once the loop
// has been told of its start. It runs beside the loop and touches none of
// c's fields: onStarted takes what it returns.
func (r *router) startProcess(c *child, cmd *exec.Cmd, errTail *tail) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	started := r.Guard.Starting()
	err = cmd.Start()
	started(cmd)
	closeAll(inR, outW, errW) // the child's ends
	if err != nil {
		closeAll(inW, outR, errR)
		if r.Command != nil {
			return nil, fmt.Errorf("starting the agent %q: %w", r.Command[0], err)
		}
		return nil, fmt.Errorf("starting a child acpbridge: %w", err)
	}
	if r.Command != nil {
		if err := r.Guard.Started(cmd); err != nil {
			r.Log.Warn("an agent's children may outlive the router if it is killed", "err", err)
		}
	}
	p := &process{cmd: cmd, in: &outbox{w: inW, wake: make(chan struct{}, 1)}, stdout: outR, out: r.budget.open(), stderr: errR, copied: make(chan struct{})}
	r.spawn(p.in.run)
	r.spawn(func() { defer close(p.copied); io.Copy(io.MultiWriter(r.Stderr, errTail), errR) })
	return p, nil
}

// follow reads c's output and watches its end, on the goroutine that
// posted onStarted after it: the loop hears of a child's start before any
// line of it or its end, however soon it dies.
func (r *router) follow(c *child, p *process) {
	read := make(chan struct{})
	r.spawn(func() { defer close(read); r.readChild(c, p) })
	r.watch(c, p, read)
}

// command is a new child's command: the agent's, in a process group of its
// own that the keeper ends should the router be killed, or acpbridge's.
func (r *router) command() *exec.Cmd {
	if r.Command != nil {
		cmd := r.Guard.Command(r.Command[0], r.Command[1:])
		cmd.Env = r.Env
		return cmd
	}
	cmd := exec.Command(r.exe, r.args...)
	cmd.Env = r.Env
	r.started++
	if r.detPart > 0 {
		cmd.Env = append(slices.Clip(r.Env), fmt.Sprintf("%s=%d", deterministicVar, r.detPart*1000+r.started))
	}
	cmd.SysProcAttr = proc.ChildAcpbridgeAttr() // ends as at EOF should the router die
	return cmd
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// watch waits for c's process to end, ends its group (what it started
// there, which may hold its pipes), reads what it wrote before its end
// (bounded: a helper outside its group may hold the pipe), and tells the
// loop.
func (r *router) watch(c *child, p *process, read chan struct{}) {
	p.cmd.Wait()
	if r.Command != nil {
		r.Guard.KillGroup(p.cmd.Process.Pid)
	}
	for _, pipe := range []struct {
		done chan struct{}
		f    *os.File
	}{{read, p.stdout}, {p.copied, p.stderr}} {
		for waited := false; !waited; {
			select {
			case <-pipe.done:
				waited = true
			case <-time.After(drainWait):
				if pipe.f == p.stdout && p.out.clientBound() {
					continue // read as fast as the client takes it, not held by a helper
				}
				pipe.f.Close() // its reader returns
				<-pipe.done
				waited = true
			}
		}
		pipe.f.Close()
	}
	p.in.abandon()
	r.post(func() { r.onChildExited(c) })
}

// readChild hands each of c's lines, decoded, to the loop, reading no
// faster than the loop writes them (the budget, which each fragment is
// taken from as it is read). A line over the limit is reported as soon as
// it passes the limit and read on to its end without being kept: an
// endless line costs nothing but the reading.
func (r *router) readChild(c *child, p *process) {
	defer p.out.drop() // a line cut by the child's end, or the router's
	br := bufio.NewReaderSize(p.stdout, 64<<10)
	limit := r.MaxLine + lineSlack
	take := func(n int) bool {
		return p.out.take(n, r.done, func(mine, all int) {
			r.Log.Debug("a child's output waits for the client to read", events.Of(events.ChildOutputHeld), "pid", p.cmd.Process.Pid, "bytes", mine+n, "all", all)
		}, func(mine, all int) {
			r.Log.Debug("a child's line passes the budget, alone", events.Of(events.ChildLinePasses), "pid", p.cmd.Process.Pid, "bytes", mine, "all", all)
		})
	}
	for {
		line, err := readLine(br, limit, take)
		switch {
		case errors.Is(err, errLineTooLong):
			p.out.drop()
			r.post(func() { r.onChildLineTooLong(c) })
			err = skipLine(br)
		case len(bytes.TrimSpace(line)) > 0:
			m := decodeChildLine(line)
			n := p.out.queue()
			r.post(func() { r.onChildMessage(c, m); p.out.give(n) })
		default:
			p.out.drop()
		}
		if err != nil {
			return
		}
	}
}

var (
	errLineTooLong = errors.New("line over the limit")
	errReadEnded   = errors.New("the router ended while a line was read")
)

// readLine reads one line (a copy of its own, without its newline) of at
// most limit bytes, taking each fragment's bytes (take) before keeping it;
// errLineTooLong as soon as it is longer.
func readLine(br *bufio.Reader, limit int, take func(n int) bool) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > limit+1 {
			return nil, errLineTooLong
		}
		if !take(len(frag)) {
			return nil, errReadEnded
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// skipLine reads on to the end of the line.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// heldLine is a line waiting for its child to be ready: in parts, and the
// child's id of the request it carries (0: a notification).
type heldLine struct {
	id    int64
	parts [][]byte
}

// childMessage is a child's line as the router reads it: decoded once here,
// off the loop.
type childMessage struct {
	line    []byte
	ok      bool // a JSON-RPC object
	id      json.RawMessage
	method  string
	params  json.RawMessage
	result  json.RawMessage
	err     json.RawMessage
	session string          // params.sessionId, if any
	reqID   json.RawMessage // params.requestId ($/cancel_request)
}

// decodeChildLine reads a child's line as a client will: by exact keys.
// encoding/json's struct decoding folds case and keeps the last match, so
// a "SESSIONID" after "sessionId" (or a "PARAMS" after "params") would
// pass the trust check naming one thread while every client reads
// another. Members are windows on the line (acp.Window), read once and not
// copied.
func decodeChildLine(line []byte) childMessage {
	var top map[string]acp.Window
	if json.Unmarshal(line, &top) != nil || top == nil {
		return childMessage{line: line}
	}
	var method string
	if raw, ok := top["method"]; ok && json.Unmarshal(raw, &method) != nil {
		return childMessage{line: line} // a method that is not a string
	}
	m := childMessage{line: line, ok: true, id: json.RawMessage(top["id"]), method: method,
		params: json.RawMessage(top["params"]), result: json.RawMessage(top["result"]), err: json.RawMessage(top["error"])}
	if m.method == "" && len(m.id) == 0 {
		return childMessage{line: line}
	}
	var p map[string]acp.Window
	if json.Unmarshal(m.params, &p) == nil {
		json.Unmarshal(p["sessionId"], &m.session)
		m.reqID = json.RawMessage(p["requestId"])
	}
	return m
}

// outbox is a child's stdin: lines queued by the loop, written by a
// goroutine of its own, so that a child that stops reading holds up no one
// but itself.
type outbox struct {
	w    io.WriteCloser
	wake chan struct{}

	mu     sync.Mutex
	lines  [][][]byte // each line in parts (a long prompt's params are not copied)
	bytes  int
	closed bool // no more lines: close its stdin once written
	gone   bool // its process ended, or a write failed: nothing more is written
}

// push queues a line; false when the queue is at its bound (the child does
// not read). A line for a child that is gone is dropped: its requests are
// answered when its end is seen.
func (o *outbox) push(parts [][]byte, maxBytes int) bool {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone || o.closed {
		return true
	}
	if len(o.lines) >= queuedLines || (o.bytes > 0 && o.bytes+n > maxBytes) {
		return false
	}
	o.lines = append(o.lines, parts)
	o.bytes += n
	o.signal()
	return true
}

// waiting is how many lines and bytes wait to be written.
func (o *outbox) waiting() (int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lines), o.bytes
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// close closes the child's stdin once what is queued is written.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.signal()
	o.mu.Unlock()
}

// abandon drops what is queued and closes the pipe, which also ends a
// write blocked on a pipe that something else holds open.
func (o *outbox) abandon() {
	o.mu.Lock()
	o.gone, o.lines, o.bytes = true, nil, 0
	o.signal()
	o.mu.Unlock()
	o.w.Close()
}

// run writes the queued lines until the queue is closed or the child gone.
func (o *outbox) run() {
	for {
		o.mu.Lock()
		for len(o.lines) == 0 && !o.closed && !o.gone {
			o.mu.Unlock()
			<-o.wake
			o.mu.Lock()
		}
		if o.gone || len(o.lines) == 0 {
			o.mu.Unlock()
			o.w.Close()
			return
		}
		parts := o.lines[0]
		o.lines[0] = nil
		o.lines = o.lines[1:]
		o.mu.Unlock()
		n := 0
		for _, p := range parts {
			if _, err := o.w.Write(p); err != nil {
				o.abandon()
				return
			}
			n += len(p)
		}
		o.mu.Lock()
		o.bytes -= n
		o.mu.Unlock()
	}
}

// endChild ends c, once: with session/close first where closeFirst (an
// eviction, for an agent that offers it), then its stdin closed, then
// SIGTERM, then SIGKILL, each step after the last had its time. It counts
// toward --max-children until its process has ended.
func (r *router) endChild(c *child, closeFirst bool) {
	if c.state == childEnding || c.state == childDead {
		if r.ending() && c.endStep == 0 && c.cmd != nil {
			r.endStepNext(c) // the router's end: stdin now, not after a close (one still starting is ended by onStarted)
		}
		return
	}
	r.moveChild(c, childEnding)
	r.spares = slices.DeleteFunc(r.spares, func(s *child) bool { return s == c })
	if r.transient == c {
		r.transient = nil
	}
	if c.cmd == nil {
		return // still starting: ended once it has started (onStarted)
	}
	if closeFirst && c.session != "" && !r.agent.noClose && !r.ending() {
		r.send(c, &request{kind: kindEvict, method: "session/close", thread: c.thread}, fmt.Appendf(nil, `{"sessionId":%q}`, c.session))
		r.after(closeWait, func() { r.endStepAt(c, 0) })
		return
	}
	r.endStepNext(c)
}

// How long each step of ending a child may take before the next: an agent's
// close answer, its exit after its stdin's end (an acpbridge child persists
// its turn first, which takes longer with many ending at once), and after
// SIGTERM.
const (
	closeWait     = 2 * time.Second
	agentEOFWait  = time.Second
	childEOFWait  = 4 * time.Second
	agentTermWait = 500 * time.Millisecond
)

// endStepAt takes the next step of ending c if it is still at step.
func (r *router) endStepAt(c *child, step int) {
	if c.state == childDead || c.endStep != step {
		return
	}
	r.endStepNext(c)
}

// endStepNext takes c's next step: its stdin closed, then SIGTERM, then
// SIGKILL (with its group, for an agent).
func (r *router) endStepNext(c *child) {
	c.endStep++
	switch c.endStep {
	case 1:
		c.in.close()
		if r.Command == nil && r.ending() {
			return // it persists its turn and exits: the router's end waits while children end (run)
		}
		wait := agentEOFWait
		if r.Command == nil {
			wait = childEOFWait
		}
		step := c.endStep
		r.after(wait, func() { r.endStepAt(c, step) })
	case 2:
		if r.Command != nil {
			proc.TermGroup(c.pid)
		} else {
			proc.Interrupt(c.cmd.Process)
		}
		step := c.endStep
		r.after(agentTermWait, func() { r.endStepAt(c, step) })
	default:
		r.kill(c)
	}
}

// kill kills c's process (and, for an agent, its group).
func (r *router) kill(c *child) {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	if r.Command != nil {
		r.Guard.KillGroup(c.pid)
	} else {
		c.cmd.Process.Kill()
	}
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
