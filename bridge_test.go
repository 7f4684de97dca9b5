// bridge_test.go drives the real server over in-memory pipes with a raw line
// client (exact bytes, exact order; jrpc2.Client would reorder
// notifications), and runs the golden transcripts in fixtures/*.txtar.
//
// A transcript has these sections:
//
//	-- client --      the script the client follows, one step a line:
//	                    call JSON    send a request and wait for its response
//	                    send JSON    send a line and go on; the lines
//	                    + JSON       that follow it starting with + go in
//	                                 the same write (a pipelining client)
//	                    await JSON   wait for an agent line containing JSON (a subset match)
//	                    raw TEXT     send TEXT as it is (malformed input)
//	                    close        close stdin (the script's end does it too)
//	                  $CWD, $STATE and $FIXTURE stand for the session's directory,
//	                  --state-dir and the replay fixture; $TMP for the agent's
//	                  temporary directory (the parent of $CWD).
//	-- agent --       every line the agent wrote, in order, with the same stand-ins
//	-- replay.jsonl -- the replay fixture (--model replay:...)
//	-- args --        more flags
//	-- cwd/NAME --    a file to create in $CWD before the run
//	-- state/NAME --  a file to create in $STATE before the run
//	-- check/NAME --  a file that $CWD must hold after the run
//
// `go test -run TestGolden -update` rewrites the agent sections.
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
)

var update = flag.Bool("update", false, "rewrite the agent sections of fixtures/*.txtar")

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
	fixture string  // the replay fixture's path, or ""
	agent   *agent  // the in-process agent, or nil for a process
	trace   *tracer // its --trace, or nil

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
			ta.trace.close()
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

// --- txtar ---

type archive struct {
	comment string
	files   []archiveFile
}

type archiveFile struct {
	name string
	data string
}

func parseArchive(s string) archive {
	var a archive
	cur := &a.comment
	for _, line := range strings.SplitAfter(s, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "-- "); ok && strings.HasSuffix(name, " --") {
			a.files = append(a.files, archiveFile{name: strings.TrimSuffix(name, " --")})
			cur = &a.files[len(a.files)-1].data
			continue
		}
		*cur += line
	}
	return a
}

func (a archive) format() string {
	var sb strings.Builder
	sb.WriteString(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&sb, "-- %s --\n%s", f.name, f.data)
	}
	return sb.String()
}

func (a archive) get(name string) (string, bool) {
	for _, f := range a.files {
		if f.name == name {
			return f.data, true
		}
	}
	return "", false
}

// TestGolden runs every fixtures/*.txtar transcript.
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

func runGolden(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	ar := parseArchive(string(b))
	seen := map[string]bool{}
	for _, f := range ar.files {
		dir, _, _ := strings.Cut(f.name, "/")
		switch {
		case seen[f.name]:
			t.Fatalf("%s: the section %q appears twice", path, f.name)
		case f.name == "client" || f.name == "agent" || f.name == "replay.jsonl" || f.name == "args":
		case strings.Contains(f.name, "/") && (dir == "cwd" || dir == "state" || dir == "check"):
		default:
			t.Fatalf("%s: unknown section %q (client, agent, replay.jsonl, args, cwd/NAME, state/NAME, check/NAME)", path, f.name)
		}
		seen[f.name] = true
	}
	var args []string
	if s, ok := ar.get("args"); ok {
		args = strings.Fields(s)
	}
	var fixture string
	if s, ok := ar.get("replay.jsonl"); ok {
		fixture = filepath.Join(t.TempDir(), "replay.jsonl")
		require.NoError(t, os.WriteFile(fixture, []byte(s), 0o644))
		args = append(args, "--model", "replay:"+fixture)
	}
	ta := startAgent(t, args...)
	ta.fixture = fixture
	for _, f := range ar.files {
		dir, name, _ := strings.Cut(f.name, "/")
		root := map[string]string{"cwd": ta.cwd, "state": ta.state}[dir]
		if root == "" || name == "" {
			continue
		}
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(ta.expand(f.data)), 0o644))
	}
	script, ok := ar.get("client")
	require.True(t, ok, "%s has no client section", path)
	lines := strings.Split(script, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch verb {
		case "call":
			ta.call(arg)
		case "send":
			batch := []string{arg}
			for i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "+ ") {
				i++
				batch = append(batch, strings.TrimPrefix(strings.TrimSpace(lines[i]), "+ "))
			}
			ta.sendTogether(batch...)
		case "await":
			ta.await(arg)
		case "raw":
			_, err := ta.stdin.Write([]byte(arg + "\n"))
			require.NoError(t, err)
		case "close":
			ta.close()
		default:
			t.Fatalf("%s: client line %d: unknown step %q", path, i+1, verb)
		}
	}
	ta.close()

	var got strings.Builder
	for _, l := range ta.got {
		got.WriteString(ta.contract(string(l)))
		got.WriteByte('\n')
	}
	for _, f := range ar.files {
		if name, ok := strings.CutPrefix(f.name, "check/"); ok {
			b, err := os.ReadFile(filepath.Join(ta.cwd, name))
			assert.NoError(t, err, "the file %s the transcript checks", name)
			assert.Equal(t, f.data, string(b), "the contents of %s after the run", name)
		}
	}
	if *update {
		for i := range ar.files {
			if ar.files[i].name == "agent" {
				ar.files[i].data = got.String()
			}
		}
		if _, ok := ar.get("agent"); !ok {
			ar.files = append(ar.files, archiveFile{name: "agent", data: got.String()})
		}
		require.NoError(t, os.WriteFile(path, []byte(ar.format()), 0o644))
		return
	}
	want, ok := ar.get("agent")
	require.True(t, ok, "%s has no agent section; run go test -run TestGolden -update", path)
	assert.Equal(t, want, got.String(), "the agent's lines (-want +got); stderr:\n%s", ta.stderr.String())
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
		sb.WriteString(clip(string(l), 300))
		sb.WriteByte('\n')
	}
	return sb.String()
}
