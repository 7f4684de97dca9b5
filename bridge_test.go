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
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/channel"
	"acpbridge/internal/clip"
	"acpbridge/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite the < lines of fixtures/*.txtar")

// hang is how long a test waits for a message before it declares the agent
// stuck. It guards against deadlocks; it is not a timing assertion.
const hang = 20 * time.Second

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
	closed  bool
	fixture string          // the replay fixture's path, or ""
	agent   *agent          // the in-process agent, or nil for a process
	trace   *channel.Tracer // its --trace, or nil

	responsesOnly bool // await is waiting for a response
}

// syncBuffer collects the agent's stderr and lets a test wait for a line.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced at every write
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
	deadline := time.After(hang)
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), sub) {
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

// startAgent runs the agent in-process with args (plus --state-dir unless
// given) and a fresh cwd.
func startAgent(t testing.TB, args ...string) *testAgent {
	t.Helper()
	ta := newTestAgent(t)
	args = ta.withState(args)
	a, trace, code := setup(args, io.Discard, ta.stderr)
	require.NotNil(t, a, "setup failed with status %d: %s", code, ta.stderr.String())
	a.newID = counterIDs()
	a.now = stepClock()
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
		cwd: t.TempDir(), state: t.TempDir(), stderr: &syncBuffer{}}
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
	go func() {
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				ta.lines <- bytes.TrimSuffix(line, []byte("\n"))
			}
			if err != nil {
				close(ta.lines)
				return
			}
		}
	}()
	ta.t.Cleanup(func() { ta.close() })
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
	c := newSchemaChecker(t)
	if c.schemas == nil {
		t.Skip("no schema")
	}
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
