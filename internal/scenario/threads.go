// threads.go runs a scenario as several sessions at once on one agent
// process and one connection (scenario run --threads N): each thread runs
// the transcript as a run of its own, on a connection of its own that a
// multiplexer joins into the agent's one. The threads share the workspace
// (as an editor's threads share a project), the served model and the
// agent's state directory.

package scenario

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/report"
	"acpbridge/internal/served"
)

// shared is what the threads of one run share: the run directory, the
// served model and the flags the agent was started with.
type shared struct {
	env   Env
	model *served.Model
	flags []string
	mux   *mux
}

// RunThreads runs sc as n sessions at once on one agent process. Each
// thread's Result has its session's figures; the agent's (CPU, memory,
// processes), its start and the served model's count over the run are in
// the first thread's only, so that a summary counts them once per run. A
// turn's model figures count what every session asked meanwhile.
func RunThreads(sc *Scenario, opt Options, n int) []Result {
	base := &run{sc: sc, opt: opt, v: newVars()}
	sh, dir, err := base.prepareShared()
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if base.model != nil {
		defer base.model.Close()
	}
	if err == nil {
		var agent *Agent
		if agent, err = opt.Start(sh.flags, sh.env); err == nil {
			sh.mux = newMux(agent, n)
		} else {
			err = &Failure{sc.Path, 0, fmt.Sprintf("starting the agent: %v", err)}
		}
	}
	results := make([]Result, n)
	if err != nil {
		for k := range results {
			results[k] = Result{Path: sc.Path, Run: report.Run{Err: err, Initialize: -1, NewSession: -1}}
		}
		return results
	}
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			o := opt
			o.shared = sh
			o.Start = func([]string, Env) (*Agent, error) { return sh.mux.thread(k), nil }
			results[k] = Run(sc, o)
		})
	}
	wg.Wait()
	for k := range n {
		results[k].Session = k + 1
		results[k].EndedByRun = sh.mux.endedByRun()
	}
	for k := 1; k < n; k++ {
		results[k].Model = nil     // the first thread's is every thread's
		results[k].Initialize = -1 // answered by the multiplexer, from the first thread's
		results[k].Stats = report.Stats{PeakRSS: -1, PeakPSS: -1, PeakUSS: -1, PeakAnon: -1, Processes: -1}
	}
	return results
}

// prepareShared makes the threads' run directory, writes the scenario's
// files, serves its model and expands the agent's flags, as a run's
// prepare does for itself.
func (r *run) prepareShared() (*shared, string, error) {
	dir, err := os.MkdirTemp(r.opt.TempDir, "scenario-")
	if err != nil {
		return nil, "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, dir, err
	}
	if err := r.makeEnv(dir); err != nil {
		return nil, dir, err
	}
	if err := r.serveFixture(dir); err != nil {
		return nil, dir, err
	}
	r.expandFlags()
	return &shared{env: r.env, model: r.model, flags: r.flags}, dir, nil
}

// useShared makes a thread's run take the shared directory, model and
// flags instead of its own.
func (r *run) useShared(sh *shared) {
	r.env, r.model, r.flags = sh.env, sh.model, sh.flags
	r.v.set("CWD", r.env.Cwd)
	r.v.set("STATE", r.env.State)
	r.v.set("DIR", r.env.Dir)
	if r.env.ModelURL != "" {
		r.v.set("MODEL_URL", r.env.ModelURL)
	}
}

// mux joins the threads' connections into the agent's one. A thread's
// request goes to the agent under an id of the multiplexer's, and its
// answer back under the thread's own; the agent's messages go to the
// thread whose session they name (held until the session's thread is
// known: an agent may send a session's first update before its
// session/new answer). The threads' initialize is sent once: the others
// get its answer. $/cancel_request's requestId is mapped as the ids are:
// a thread's names the multiplexer's id for its request, the agent's
// names one of its own requests, and goes to the thread it asked. No line
// is sent to a thread under the lock (a thread's kill takes it), and what
// is held for sessions no thread has opened is bounded in bytes.
type mux struct {
	agent   *Agent
	writing sync.Mutex // a line to the agent at a time

	mu       sync.Mutex
	threads  []*muxThread
	nextID   int64
	routes   map[int64]route     // the multiplexer's ids in flight
	sessions map[string]int      // session id → thread
	held     map[string][][]byte // lines for a session whose thread is not known yet
	heldSize int                 // their bytes, at most maxHeldBytes
	dropped  int                 // such lines dropped past maxHeldBytes
	asked    map[string]int      // the agent's requests open at a thread, by id: the thread
	open     int                 // threads whose stdin is open
	failed   bool                // a thread failed: the agent is killed if it outlives the end
	ended    bool                // the multiplexer ended the agent (endAfterGrace)
	initial  []byte              // the agent's answer to initialize (a result or an error), once it came
	waiting  []route             // the threads' initialize requests waiting for it
}

// route is a thread's request: the thread and its own id.
type route struct {
	thread int
	id     json.RawMessage
	method string
}

// muxThread is one thread's side: the lines for it, queued so that a
// thread that stopped reading never holds up the others (once it has
// failed, its lines are dropped).
type muxThread struct {
	k      int
	m      *mux
	in     *io.PipeReader // the thread's reading end, closed when it fails
	queue  chan []byte
	buf    []byte // a line written in parts, so far
	closed bool
}

func newMux(agent *Agent, n int) *mux {
	m := &mux{agent: agent, routes: map[int64]route{}, sessions: map[string]int{}, held: map[string][][]byte{}, asked: map[string]int{}, open: n}
	for k := range n {
		m.threads = append(m.threads, &muxThread{k: k, m: m, queue: make(chan []byte, 1<<16)})
	}
	go m.readAgent()
	return m
}

// thread is thread k's agent: its connection to the multiplexer, the
// shared process's other parts (its wait, kill, stderr) behind it. The
// multiplexer ends the process once every thread has closed its stdin
// (endAfterGrace); an exit it caused reads as status 0, as a run's own
// ending of an agent that ignores its stdin's end is no failure. Only the
// first thread measures the process.
func (m *mux) thread(k int) *Agent {
	t := m.threads[k]
	pr, pw := io.Pipe()
	t.in = pr
	go func() {
		for line := range t.queue {
			pw.Write(append(line, '\n')) // fails at once once the thread's end is closed
		}
		pw.Close()
	}()
	wait := func() int {
		code := m.agent.Wait()
		if m.endedByRun() {
			return 0
		}
		return code
	}
	a := &Agent{Stdin: t, Stdout: pr, Wait: wait, Kill: t.kill, Stderr: m.agent.Stderr, Settled: m.agent.Settled}
	if k == 0 {
		a.Stats = m.agent.Stats
	}
	return a
}

// endAfterGrace ends the agent if it has not exited eofGrace after its
// stdin closed: SIGTERM then SIGKILL where it can (Agent.End), killed
// where it cannot or when a thread failed.
func (m *mux) endAfterGrace(failed bool) {
	exited := make(chan struct{})
	go func() {
		m.agent.Wait()
		close(exited)
	}()
	select {
	case <-exited:
		return
	case <-time.After(eofGrace):
	}
	m.mu.Lock()
	m.ended = true
	m.mu.Unlock()
	if failed || m.agent.End == nil {
		m.agent.Kill()
		return
	}
	m.agent.End()
}

// endedByRun reports whether the multiplexer ended the agent.
func (m *mux) endedByRun() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ended
}

// Write takes the thread's lines (several in one write, or one in parts).
func (t *muxThread) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.Clone(t.buf[:i])
		t.buf = t.buf[i+1:]
		if err := t.m.fromThread(t.k, line); err != nil {
			return len(p), err
		}
	}
}

// Close is the thread's end: the agent's stdin closes when every thread's
// has, and the agent is ended if it does not exit by itself.
func (t *muxThread) Close() error {
	m := t.m
	m.mu.Lock()
	if t.closed {
		m.mu.Unlock()
		return nil
	}
	t.closed = true
	m.open--
	last, failed := m.open == 0, m.failed
	m.mu.Unlock()
	if !last {
		return nil
	}
	go m.endAfterGrace(failed)
	return m.agent.Stdin.Close()
}

// kill is a failed thread's end: the others go on, and what the agent
// still sends the thread is dropped.
func (t *muxThread) kill() {
	t.m.mu.Lock()
	t.m.failed = true
	t.m.mu.Unlock()
	t.in.Close()
	t.Close()
}

// muxMessage is what the multiplexer reads of a message: its id and
// method, the session it names, the request a $/cancel_request withdraws,
// and the session an answer opens.
type muxMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string          `json:"sessionId"`
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
	Result struct {
		SessionID string `json:"sessionId"`
	} `json:"result"`
}

// fromThread passes a thread's line to the agent: a request under an id of
// the multiplexer's, a second initialize answered from the first.
func (m *mux) fromThread(k int, line []byte) error {
	var msg muxMessage
	err := json.Unmarshal(line, &msg)
	switch {
	case err == nil && msg.Method == "$/cancel_request" && len(msg.ID) == 0:
		return m.withdraw(k, line, msg.Params.RequestID)
	case err == nil && msg.Method == "" && len(msg.ID) > 0:
		m.mu.Lock()
		delete(m.asked, compactID(msg.ID)) // the thread answers the agent's request
		m.mu.Unlock()
		return m.toAgent(line)
	case err != nil || msg.Method == "" || len(msg.ID) == 0:
		return m.toAgent(line) // a notification, or what the agent is to refuse
	}
	m.mu.Lock()
	if msg.Method == "session/load" || msg.Method == "session/resume" {
		m.sessions[msg.Params.SessionID] = k // it names the session it opens
	}
	r := route{thread: k, id: msg.ID, method: msg.Method}
	if msg.Method == "initialize" && k > 0 {
		if m.initial == nil {
			m.waiting = append(m.waiting, r)
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock()
		m.answerInitialize(r)
		return nil
	}
	id := m.nextID
	m.nextID++
	m.routes[id] = r
	m.mu.Unlock()
	return m.toAgent(acp.WithID(line, json.RawMessage(strconv.FormatInt(id, 10))))
}

// withdraw passes thread k's $/cancel_request to the agent with the id the
// agent knows its request by; one for a request that has been answered
// (or never was) is dropped: it changes nothing.
func (m *mux) withdraw(k int, line []byte, reqID json.RawMessage) error {
	want := compactID(reqID)
	m.mu.Lock()
	var ours int64 = -1
	for id, r := range m.routes {
		if r.thread == k && compactID(r.id) == want {
			ours = id
		}
	}
	m.mu.Unlock()
	if ours < 0 {
		return nil
	}
	return m.toAgent(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, ours))
}

// compactID is id as its key: compact JSON, or as it came when it is not
// JSON.
func compactID(id json.RawMessage) string {
	if b := acp.CompactID(id); b != nil {
		return string(b)
	}
	return string(id)
}

// toAgent writes a line to the agent, one thread's at a time.
func (m *mux) toAgent(line []byte) error {
	m.writing.Lock()
	defer m.writing.Unlock()
	_, err := m.agent.Stdin.Write(append(line, '\n'))
	return err
}

// answerInitialize answers a thread's initialize with the agent's answer
// to the first, result or error.
func (m *mux) answerInitialize(r route) {
	m.mu.Lock()
	line := acp.WithID(m.initial, r.id)
	m.mu.Unlock()
	m.threads[r.thread].queue <- line
}

// readAgent routes the agent's lines to the threads until its output
// ends, then ends every thread's.
func (m *mux) readAgent() {
	br := bufio.NewReaderSize(m.agent.Stdout, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			m.route(line)
		}
		if err != nil {
			break
		}
	}
	m.mu.Lock()
	var rest []delivery // sessions no thread opened: the first thread's run says so
	for _, lines := range m.held {
		for _, line := range lines {
			rest = append(rest, delivery{0, line})
		}
	}
	m.held, m.heldSize = nil, 0
	m.mu.Unlock()
	m.send(rest)
	for _, t := range m.threads {
		close(t.queue)
	}
}

// maxHeldBytes bounds what is held, in all, of lines for sessions no
// thread has opened (an agent's first updates before its session/new
// answer); past it they are dropped, and the first thread's run fails
// on those it gets at the end.
const maxHeldBytes = 16 << 20

// delivery is a line for a thread.
type delivery struct {
	thread int
	line   []byte
}

// send queues each line for its thread, outside the lock.
func (m *mux) send(ds []delivery) {
	for _, d := range ds {
		m.threads[d.thread].queue <- d.line
	}
}

// route sends one of the agent's lines to its thread.
func (m *mux) route(line []byte) {
	var msg muxMessage
	if json.Unmarshal(line, &msg) != nil {
		m.send([]delivery{{0, line}}) // not JSON: the first thread's run says so
		return
	}
	m.mu.Lock()
	ds := m.routeLocked(line, &msg)
	m.mu.Unlock()
	m.send(ds)
}

// routeLocked decides where the agent's line goes.
func (m *mux) routeLocked(line []byte, msg *muxMessage) []delivery {
	if msg.Method == "" && len(msg.ID) > 0 {
		return m.answer(line, msg.ID, msg.Result.SessionID)
	}
	if msg.Method == "$/cancel_request" {
		return []delivery{{m.asked[compactID(msg.Params.RequestID)], line}} // the thread it asked
	}
	sid := msg.Params.SessionID
	k, known := m.sessions[sid]
	if !known && sid != "" {
		if m.heldSize+len(line) > maxHeldBytes {
			m.dropped++
			return nil
		}
		m.held[sid] = append(m.held[sid], line)
		m.heldSize += len(line)
		return nil
	}
	if len(msg.ID) > 0 {
		m.asked[compactID(msg.ID)] = k // a request of the agent's: its $/cancel_request goes there too
	}
	return []delivery{{k, line}}
}

// answer routes the agent's answer to the thread that asked, under its
// own id: first the lines held for the session it opens, and for the
// first initialize the threads that wait for it.
func (m *mux) answer(line []byte, id json.RawMessage, session string) []delivery {
	n, err := strconv.ParseInt(string(id), 10, 64)
	r, ok := m.routes[n]
	if err != nil || !ok {
		return []delivery{{0, line}} // an answer to no request: the first thread's run says so
	}
	delete(m.routes, n)
	var ds []delivery
	if session != "" {
		m.sessions[session] = r.thread
		for _, held := range m.held[session] {
			ds = append(ds, delivery{r.thread, held})
			m.heldSize -= len(held)
		}
		delete(m.held, session)
	}
	if r.method == "initialize" && m.initial == nil {
		m.initial = line
		for _, w := range m.waiting {
			ds = append(ds, delivery{w.thread, acp.WithID(line, w.id)})
		}
		m.waiting = nil
	}
	return append(ds, delivery{r.thread, acp.WithID(line, r.id)})
}
