// bridge_test.go drives the real server over in-memory pipes with a raw line
// client (exact bytes, exact order; jrpc2.Client would reorder
// notifications), and runs the golden transcripts in fixtures/*.txtar.
//
// The goldens are scenario files (internal/scenario says the format) run
// in-process through the code of `acpbridge scenario run`, with stable ids
// and clock; `go test -run TestGolden -update` rewrites their < lines.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/acp"
	"acpbridge/internal/channel"
	"acpbridge/internal/clip"
	"acpbridge/internal/events"
	"acpbridge/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite the < lines of fixtures/*.txtar")

// hang is how long a test waits for a message before it declares the agent
// stuck. It guards against deadlocks; it is not a timing assertion: long
// enough that a machine kept busy (two spinning processes per CPU beside
// the race detector) never meets it while the agent works, as it met 20 s
// in a test that streams 32 MiB of tool arguments.
const hang = 2 * time.Minute

// testAgent is a running agent with a raw line client attached.
type testAgent struct {
	t       testing.TB
	stdin   *io.PipeWriter
	lines   chan []byte // the agent's stdout, line by line; closed at EOF
	got     [][]byte    // every line read so far
	exit    chan int
	check   *schemaChecker
	cwd     string
	state   string
	stderr  *syncBuffer
	events  *syncBuffer // the events of its processes (internal/events), JSON lines
	closed  bool
	fixture string          // the replay fixture's path, or ""
	agent   *agent          // the in-process agent, or nil for a process
	trace   *channel.Tracer // its --trace, or nil

	responsesOnly bool // await is waiting for a response
	// keepUsage makes updatesUntil and collect return usage_update updates
	// too; the tests of other updates leave them out (the usage tests
	// check them).
	keepUsage bool
	// reading pauses the reading of stdout: an editor that stops reading.
	reading readGate
}

// readGate pauses a reader between lines.
type readGate struct {
	mu     sync.Mutex
	resume chan struct{} // closed to resume; nil when not paused
}

// pause stops the reader once the line it is reading has been read.
func (g *readGate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resume == nil {
		g.resume = make(chan struct{})
	}
}

// unpause lets the reader go on.
func (g *readGate) unpause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resume != nil {
		close(g.resume)
		g.resume = nil
	}
}

// wait returns when the reader may read.
func (g *readGate) wait() {
	g.mu.Lock()
	resume := g.resume
	g.mu.Unlock()
	if resume != nil {
		<-resume
	}
}

// awaitEvent waits for the event name (internal/events) with these
// attributes, in this order (key, value, ...; the string values as the
// code logs them).
func (ta *testAgent) awaitEvent(name string, kv ...string) {
	ta.t.Helper()
	ta.awaitEvents(1, name, kv...)
}

// awaitEvents waits for n such events.
func (ta *testAgent) awaitEvents(n int, name string, kv ...string) {
	ta.t.Helper()
	knownEvent(ta.t, name)
	ta.events.waitForCount(ta.t, eventText(name, kv...), n)
}

// hasEvent reports whether the event has been seen.
func (ta *testAgent) hasEvent(name string, kv ...string) bool {
	ta.t.Helper()
	knownEvent(ta.t, name)
	return strings.Contains(ta.events.String(), eventText(name, kv...))
}

// knownEvent fails the test at once for a name not in internal/events'
// list, which no process ever writes: waiting for it would only time out.
func knownEvent(t testing.TB, name string) {
	t.Helper()
	if !slices.Contains(events.All(), events.Name(name)) {
		t.Fatalf("event %q is not in internal/events' list (names.go): no process writes it", name)
	}
}

func eventText(name string, kv ...string) string {
	s := `"event":"` + name + `"`
	for i := 0; i+1 < len(kv); i += 2 {
		s += `,"` + kv[i] + `":"` + kv[i+1] + `"`
	}
	return s
}

// syncBuffer collects the agent's stderr and lets a test wait for a line.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced at every write
}

// reset forgets what was written.
func (s *syncBuffer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = bytes.Buffer{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// waitFor blocks until the output contains sub.
func (s *syncBuffer) waitFor(t testing.TB, sub string) {
	t.Helper()
	s.waitForCount(t, sub, 1)
}

// waitForCount blocks until the output contains sub n times.
func (s *syncBuffer) waitForCount(t testing.TB, sub string, n int) {
	t.Helper()
	deadline := time.After(hang)
	for {
		s.mu.Lock()
		if strings.Count(s.b.String(), sub) >= n {
			s.mu.Unlock()
			return
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("stderr never said %q; it holds:\n%s", sub, s.String())
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// counterIDs makes ids sess_1, msg_1, call_1, ... so transcripts are stable.
func counterIDs() func(string) string {
	var mu sync.Mutex
	n := map[string]int{}
	return func(prefix string) string {
		mu.Lock()
		defer mu.Unlock()
		n[prefix]++
		return fmt.Sprintf("%s_%d", prefix, n[prefix])
	}
}

// stepClock starts at a fixed time and moves one second a call.
func stepClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

// anyModel is a model for tests that open sessions and run no turn: a
// session opens only with a model (or a sign-in).
const anyModel = "replay:fixtures/hello.jsonl"

// startAgent runs the agent in-process with args (plus --state-dir unless
// given) and a fresh cwd.
func startAgent(t testing.TB, args ...string) *testAgent {
	t.Helper()
	return startAgentLike(t, nil, args...)
}

// startAgentLike is startAgent with like's cwd and state directory (a
// process started after like's), or fresh ones when like is nil.
func startAgentLike(t testing.TB, like *testAgent, args ...string) *testAgent {
	t.Helper()
	ta := newTestAgent(t)
	if like != nil {
		ta.cwd, ta.state = like.cwd, like.state
	}
	args = ta.withState(args)
	a, trace, code := setup(args, io.Discard, ta.stderr)
	require.NotNil(t, a, "setup failed with status %d: %s", code, ta.stderr.String())
	a.newID = counterIDs()
	a.now = stepClock()
	// MCP servers of in-process tests run in the test process, which a
	// loaded machine starves past the 15 s start bound (TestMCP_http did,
	// beside two spinning processes per CPU): a deadlock guard instead.
	a.mcpStart = hang
	a.log = slog.New(events.Wrap(a.log.Handler(), ta.events))
	ta.agent = a
	ta.trace = trace
	ta.attachAgent()
	return ta
}

// attachAgent serves ta.agent in-process.
func (ta *testAgent) attachAgent() {
	ta.attach(func(stdin io.Reader, stdout io.WriteCloser) {
		code := serve(context.Background(), ta.agent, stdin, stdout, ta.trace)
		if ta.trace != nil {
			ta.trace.Close()
		}
		stdout.Close()
		ta.exit <- code
	})
}

func newTestAgent(t testing.TB) *testAgent {
	ta := &testAgent{t: t, lines: make(chan []byte, 1024), exit: make(chan int, 1),
		cwd: t.TempDir(), state: t.TempDir(), stderr: &syncBuffer{}, events: &syncBuffer{}}
	ta.cwd, _ = filepath.EvalSymlinks(ta.cwd)
	ta.check = newSchemaChecker(t)
	return ta
}

func (ta *testAgent) withState(args []string) []string {
	if !slices.Contains(args, "--state-dir") {
		args = append(args, "--state-dir", ta.state)
	}
	return args
}

// attach starts run with the client's pipes and reads the agent's stdout.
func (ta *testAgent) attach(run func(stdin io.Reader, stdout io.WriteCloser)) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ta.stdin = inW
	go run(inR, outW)
	// stdout is read at once, whatever the test is doing, as an editor
	// reads it: a test that is still writing a long pipelined batch must
	// not stop the agent's answers (the agent then stops reading stdin,
	// and the test's write never ends).
	read := make(chan []byte)
	go func() {
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			ta.reading.wait()
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				read <- bytes.TrimSuffix(line, []byte("\n"))
			}
			if err != nil {
				close(read)
				return
			}
		}
	}()
	go queueLines(read, ta.lines)
	ta.t.Cleanup(func() { ta.reading.unpause(); ta.close() })
}

// queueLines passes every line from in to out, holding as many as out's
// reader has not taken yet, and closes out after in.
func queueLines(in <-chan []byte, out chan<- []byte) {
	var queue [][]byte
	for in != nil || len(queue) > 0 {
		var send chan<- []byte
		var head []byte
		if len(queue) > 0 {
			send, head = out, queue[0]
		}
		select {
		case line, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			queue = append(queue, line)
		case send <- head:
			queue = queue[1:]
		}
	}
	close(out)
}

// expand replaces the stand-ins in a client line.
func (ta *testAgent) expand(s string) string {
	return strings.NewReplacer("$CWD", ta.cwd, "$STATE", ta.state).Replace(s)
}

// contract replaces the temporary paths in an agent line by the stand-ins.
func (ta *testAgent) contract(s string) string {
	pairs := []string{ta.cwd, "$CWD", ta.state, "$STATE"}
	if ta.fixture != "" {
		pairs = append(pairs, ta.fixture, "$FIXTURE")
	}
	pairs = append(pairs, filepath.Dir(ta.cwd), "$TMP") // last: the others lie under it
	return strings.NewReplacer(pairs...).Replace(s)
}

func (ta *testAgent) send(line string) {
	ta.t.Helper()
	b := []byte(ta.expand(line))
	ta.check.sent(b)
	_, err := ta.stdin.Write(append(b, '\n'))
	require.NoError(ta.t, err, "writing to the agent")
}

// sendTogether sends lines in ONE write, as a busy editor's messages arrive.
func (ta *testAgent) sendTogether(lines ...string) {
	ta.t.Helper()
	var buf []byte
	for _, line := range lines {
		b := []byte(ta.expand(line))
		ta.check.sent(b)
		buf = append(append(buf, b...), '\n')
	}
	_, err := ta.stdin.Write(buf)
	require.NoError(ta.t, err, "writing to the agent")
}

// next returns the agent's next line, validated; nil at EOF.
func (ta *testAgent) next(waitingFor string) []byte {
	ta.t.Helper()
	select {
	case line, ok := <-ta.lines:
		if !ok {
			return nil
		}
		ta.got = append(ta.got, line)
		if msg := ta.check.check(line); msg != "" {
			ta.t.Errorf("agent line %d: %s\n%s", len(ta.got), msg, line)
		}
		return line
	case <-time.After(hang):
		ta.t.Fatalf("the agent wrote nothing for %v while the client waited for %s; last lines:\n%s\nstderr:\n%s", hang, waitingFor, ta.tail(), ta.stderr.String())
		return nil
	}
}

// await reads until a line matches pattern (a JSON subset) and returns it.
// A pattern with an id and no method matches only responses, since the
// agent's own requests to the client number 1, 2, 3... too.
func (ta *testAgent) await(pattern string) []byte {
	ta.t.Helper()
	var want any
	require.NoError(ta.t, json.Unmarshal([]byte(ta.expand(pattern)), &want), "pattern %s", pattern)
	if w, ok := want.(map[string]any); ok {
		if _, hasID := w["id"]; hasID && w["method"] == nil {
			ta.responsesOnly = true
			defer func() { ta.responsesOnly = false }()
		}
	}
	for {
		line := ta.next(pattern)
		if line == nil {
			ta.t.Fatalf("the agent closed stdout before writing a line matching %s; stderr:\n%s", pattern, ta.stderr.String())
		}
		var got any
		if json.Unmarshal(line, &got) == nil && subset(want, got) {
			if m, _ := got.(map[string]any); ta.responsesOnly && m["method"] != nil {
				continue
			}
			return line
		}
	}
}

// call sends a request and returns its response.
func (ta *testAgent) call(line string) []byte {
	ta.t.Helper()
	var req struct{ ID json.RawMessage }
	require.NoError(ta.t, json.Unmarshal([]byte(line), &req))
	ta.send(line)
	return ta.await(fmt.Sprintf(`{"id":%s}`, req.ID))
}

// close closes stdin, reads to EOF and checks the exit status.
func (ta *testAgent) close() {
	ta.t.Helper()
	if ta.closed {
		return
	}
	ta.closed = true
	ta.stdin.Close()
	for ta.next("the end of output") != nil {
	}
	select {
	case code := <-ta.exit:
		assert.Equal(ta.t, 0, code, "exit status")
	case <-time.After(hang):
		ta.t.Fatalf("the agent did not exit after stdin closed; stderr:\n%s", ta.stderr.String())
	}
}

// subset reports whether every member of want is in got, recursively.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if gv, ok := g[k]; !ok || !subset(v, gv) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

func decodeLoose(line []byte) (map[string]any, bool) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	return m, dec.Decode(&m) == nil
}

// --- golden scenarios ---

// TestGolden runs every fixtures/*.txtar scenario against the agent
// in-process, through the same code as `acpbridge scenario run`.
func TestGolden(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("fixtures/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			runGolden(t, path)
		})
	}
}

// runGolden runs one scenario file; with -update it rewrites its < lines.
func runGolden(t *testing.T, path string) {
	t.Helper()
	sc, err := scenario.Load(path)
	require.NoError(t, err)
	res := scenario.Run(sc, goldenOptions(t))
	require.NoError(t, res.Err)
	if *update {
		require.NoError(t, os.WriteFile(path, res.Updated, 0o644))
	}
}

// goldenOptions run scenarios in-process, every line checked against the
// ACP schema.
var goldenDump = flag.String("golden.dump", "", "append every line of the goldens to this file")

func goldenOptions(t testing.TB) scenario.Options {
	check := newSchemaChecker(t)
	var dump *os.File
	if *goldenDump != "" {
		dump, _ = os.OpenFile(*goldenDump, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		t.Cleanup(func() { dump.Close() })
		fmt.Fprintf(dump, "=== %s\n", t.Name())
	}
	return scenario.Options{
		Start:   scenarioInProcess,
		Timeout: hang,
		Update:  *update,
		TempDir: t.TempDir(),
		Check: func(fromAgent bool, line []byte) string {
			if dump != nil {
				fmt.Fprintf(dump, "%v %s\n", fromAgent, line)
			}
			if !fromAgent {
				check.sent(line)
				return ""
			}
			return check.check(line)
		},
	}
}

// scenarioInProcess starts the agent in this process with stable ids (sess_1,
// msg_1, ...) and a clock that moves a second a call.
func scenarioInProcess(flags []string, env scenario.Env) (*scenario.Agent, error) {
	stderr := &syncBuffer{}
	a, trace, code := setup(flags, io.Discard, stderr)
	if a == nil {
		return nil, fmt.Errorf("setup failed with status %d: %s", code, stderr.String())
	}
	a.newID = counterIDs()
	a.now = stepClock()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	exit := make(chan int, 1)
	go func() {
		code := serve(context.Background(), a, inR, outW, trace)
		if trace != nil {
			trace.Close()
		}
		outW.Close()
		exit <- code
	}()
	var once sync.Once
	status := 0
	wait := func() int {
		once.Do(func() { status = <-exit })
		return status
	}
	kill := func() {
		inW.Close()
		outR.Close()
	}
	return &scenario.Agent{Stdin: inW, Stdout: outR, Wait: wait, Kill: kill, Stderr: stderr.String}, nil
}

// Verify that the schema check rejects what a client would reject, so that
// a transcript passing it means something.
func TestSchemaChecker_rejects(t *testing.T) {
	t.Parallel()
	c := newSchemaChecker(t)
	c.sent([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}`))
	for _, bad := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"made_up","content":{}}}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"done"}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"message":"no code"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/x"}}`,
	} {
		assert.NotEmpty(t, c.check([]byte(bad)), "accepted %s", bad)
	}
	assert.Empty(t, c.check([]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)))
}

// tail is the agent's last few lines, for a failure message.
func (ta *testAgent) tail() string {
	var sb strings.Builder
	for _, l := range ta.got[max(0, len(ta.got)-6):] {
		sb.WriteString(clip.Marked(string(l), 300))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// --- shared helpers ---

// The built binary, made once for the tests that run a real process.
var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// lastTurnEnd is the last turn_end record of a session's log.
func lastTurnEnd(t *testing.T, state, sid string) string {
	b, err := os.ReadFile(filepath.Join(state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	var last string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"type":"turn_end"`) {
			last = l
		}
	}
	return last
}

// turnUpdates runs a prompt and returns its updates (compact JSON of
// params.update) and response.
func (ta *testAgent) turnUpdates(id int, sid, text string) ([]string, response) {
	ta.t.Helper()
	ta.send(prompt(id, sid, text))
	return ta.updatesUntil(id)
}

// collect reads the agent's lines until every response in ids has come; it
// returns the updates' params.update objects, the responses by id, and the
// order in which the responses came.
func (ta *testAgent) collect(ids ...int) (updates []map[string]any, rs map[int]response, order []int) {
	ta.t.Helper()
	rs = map[int]response{}
	for len(rs) < len(ids) {
		line := ta.next(fmt.Sprintf("the responses %v", ids))
		require.NotNil(ta.t, line, "EOF before the responses %v", ids)
		var m struct {
			ID     *int
			Method string
			Params struct{ Update map[string]any }
		}
		require.NoError(ta.t, json.Unmarshal(line, &m))
		switch {
		case m.Method == acp.MethodSessionUpdate:
			if m.Params.Update["sessionUpdate"] == "usage_update" && !ta.keepUsage {
				continue
			}
			updates = append(updates, m.Params.Update)
		case m.Method == "" && m.ID != nil:
			rs[*m.ID] = decodeResponse(ta.t, line)
			order = append(order, *m.ID)
		}
	}
	return updates, rs, order
}

func stopReason(t testing.TB, r response) string {
	t.Helper()
	require.Nil(t, r.Error, "the prompt failed")
	var res struct{ StopReason string }
	require.NoError(t, json.Unmarshal(r.Result, &res))
	return res.StopReason
}

// setup builds the agent as run does, for the tests that drive it
// in-process; nil and the exit status when it would not start.
func setup(args []string, stdout, stderr io.Writer) (*agent, *channel.Tracer, int) {
	cfg, log, trace, code := start(args, stdout, stderr)
	if log == nil {
		return nil, nil, code
	}
	a, code := newAgent(cfg, log, stderr)
	return a, trace, code
}

// binary builds acpbridge once for the tests that need a real process.
func binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "acpbridge-bin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "acpbridge")
		cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, ".") // the commit in --version, where there is one
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")                          // as the README builds it
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// procAgent is a testAgent whose agent is a real process.
type procAgent struct {
	*testAgent
	cmd *exec.Cmd
}

// startProcess runs the binary with args, sharing state and cwd with like
// (when given) so that a second process sees the first one's sessions.
func startProcess(t testing.TB, like *testAgent, args ...string) *procAgent {
	t.Helper()
	return startProcessWith(t, like, nil, args...)
}

// startProcessWith is startProcess with prep, when not nil, given the
// command (and the client, whose cwd and state it may change) before it
// starts.
func startProcessWith(t testing.TB, like *testAgent, prep func(*exec.Cmd, *testAgent), args ...string) *procAgent {
	t.Helper()
	ta := newTestAgent(t)
	if like != nil {
		ta.cwd, ta.state = like.cwd, like.state
	}
	cmd := exec.Command(binary(t))
	if prep != nil {
		prep(cmd, ta)
	}
	cmd.Args = append(cmd.Args, ta.withState(args)...)
	cmd.Stderr = ta.stderr
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, events.Var+"="+eventsPipe(t, ta.events))
	p := &procAgent{testAgent: ta, cmd: cmd}
	t.Cleanup(func() { // the router's state tables held (internal/fanout's move)
		assert.NotContains(t, ta.events.String(), `"event":"move_refused"`, "a state moved along an edge not in its table")
	})
	started := make(chan error, 1)
	ta.attach(func(stdin io.Reader, stdout io.WriteCloser) {
		cmd.Stdin, cmd.Stdout = stdin, stdout
		err := cmd.Start()
		started <- err
		if err != nil {
			stdout.Close()
			ta.exit <- -1
			return
		}
		cmd.Wait()
		stdout.Close()
		ta.exit <- cmd.ProcessState.ExitCode()
	})
	require.NoError(t, <-started)
	return p
}

func writeFixture(t testing.TB, lines ...string) string {
	path := filepath.Join(t.TempDir(), "replay.jsonl")
	var b []byte
	for _, l := range lines {
		b = append(b, l+"\n"...)
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// newSession initializes and creates a session; it returns the session id.
func (ta *testAgent) newSession() string {
	ta.t.Helper()
	ta.call(initLine)
	r := decodeResponse(ta.t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(ta.t, r.Error, "session/new")
	var res struct{ SessionID string }
	require.NoError(ta.t, json.Unmarshal(r.Result, &res))
	return res.SessionID
}

// updatesUntil returns the session/update params.update objects the agent
// sends up to the response with id, and that response.
func (ta *testAgent) updatesUntil(id int) ([]string, response) {
	ta.t.Helper()
	var ups []string
	for {
		line := ta.next(fmt.Sprintf("the response %d", id))
		require.NotNil(ta.t, line, "EOF before the response %d", id)
		var m struct {
			ID     *int
			Method string
			Params struct{ Update json.RawMessage }
		}
		require.NoError(ta.t, json.Unmarshal(line, &m))
		if m.Method == acp.MethodSessionUpdate && (ta.keepUsage || !bytes.Contains(m.Params.Update, []byte(`"sessionUpdate":"usage_update"`))) {
			ups = append(ups, string(m.Params.Update))
		}
		if m.ID != nil && *m.ID == id && m.Method == "" {
			return ups, decodeResponse(ta.t, line)
		}
	}
}

func prompt(id int, sid, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, sid, text)
}

// response is a decoded JSON-RPC response.
type response struct {
	ID     json.RawMessage
	Result json.RawMessage
	Error  *struct {
		Code    int
		Message string
		Data    json.RawMessage
	}
}

func decodeResponse(t testing.TB, line []byte) response {
	t.Helper()
	var r response
	require.NoError(t, json.Unmarshal(line, &r), "%s", line)
	return r
}

func TestMain(m *testing.M) {
	switch os.Getenv("ACPBRIDGE_TEST_MCP") {
	case "stdio":
		runTestMCPServer() // the test binary as an MCP server (mcp_test.go)
		return
	case "flood":
		runFloodMCPServer() // a hostile one (mcp_test.go)
		return
	}
	// No test reads or writes the user's own sign-in: the processes the
	// tests start, in-process or not, find theirs in a folder of the run.
	config, err := os.MkdirTemp("", "acpbridge-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", config)
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.RemoveAll(config)
	os.Exit(code)
}

// drainKilled reads what a killed process wrote, to EOF, and its exit. The
// lines are not checked: kill -9 may cut the last one anywhere.
func (p *procAgent) drainKilled() {
	p.t.Helper()
	p.stdin.Close()
	for {
		select {
		case _, ok := <-p.lines:
			if ok {
				continue
			}
		case <-time.After(hang):
			p.t.Fatalf("no EOF from a killed process")
		}
		break
	}
	p.closed = true
	<-p.exit
}

func load(id int, sid string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`, id, sid)
}

// foldChunks joins consecutive chunks of one message (same kind and
// messageId) into one update carrying the whole text.
func foldChunks(t testing.TB, updates []string) []string {
	type chunk struct {
		SessionUpdate string `json:"sessionUpdate"`
		MessageID     string `json:"messageId"`
		Content       struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	var out []string
	var cur *chunk
	flush := func() {
		if cur != nil {
			b, _ := json.Marshal(cur)
			out = append(out, string(b))
			cur = nil
		}
	}
	for _, u := range updates {
		var c chunk
		require.NoError(t, json.Unmarshal([]byte(u), &c))
		if c.SessionUpdate != "agent_message_chunk" && c.SessionUpdate != "agent_thought_chunk" {
			flush()
			out = append(out, u)
			continue
		}
		if cur != nil && cur.SessionUpdate == c.SessionUpdate && cur.MessageID == c.MessageID {
			cur.Content.Text += c.Content.Text
			continue
		}
		flush()
		cur = &c
	}
	flush()
	return out
}

// withoutMessageID drops the messageId of an update of a text prompt, without its messageId.
func withoutMessageID(t testing.TB, update string) string {
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(update), &m))
	delete(m, "messageId")
	b, _ := json.Marshal(m)
	return string(b)
}
