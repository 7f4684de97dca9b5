//go:build linux

// fault_test.go tests, on the built binary, a client that goes away at each
// phase of a turn (stdin closed, stdout closed), kill -9 during a long turn
// full of writes, and a state directory that cannot be written.

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that closing stdin at each phase of a turn ends the process with
// status 0 (close asserts it), leaves no command running, and persists the
// turn as cancelled and interrupted.
func TestFault_stdinClosedMidTurn(t *testing.T) {
	t.Parallel()
	phases := []struct {
		name    string
		entries []string
		caps    string
		mode    string
		await   string // the line that marks the phase
	}{
		{"streaming", []string{`{"chunks":[{"text":"Streaming"},{"delayMs":600000}]}`}, `{}`, "ask",
			`{"params":{"update":{"sessionUpdate":"agent_message_chunk"}}}`},
		{"waiting for permission", []string{`{"chunks":[{"toolCall":{"id":"w","name":"write_file","input":{"path":"a.txt","content":"x"}}}]}`}, `{}`, "ask",
			`{"method":"session/request_permission"}`},
		{"waiting for an fs call", []string{`{"chunks":[{"toolCall":{"id":"r","name":"read_file","input":{"path":"a.txt"}}}]}`}, `{"fs":{"readTextFile":true}}`, "ask",
			`{"method":"fs/read_text_file"}`},
		{"waiting for a client terminal", []string{`{"chunks":[{"toolCall":{"id":"c","name":"run_command","input":{"command":"sleep 600"}}}]}`}, `{"terminal":true}`, "bypass",
			`{"method":"terminal/create"}`},
		{"running a local command", []string{`{"chunks":[{"toolCall":{"id":"c","name":"run_command","input":{"command":"echo $$ > pid; exec sleep 600"}}}]}`}, `{}`, "bypass",
			`{"params":{"update":{"sessionUpdate":"tool_call_update","status":"in_progress"}}}`},
	}
	for _, ph := range phases {
		t.Run(strings.ReplaceAll(ph.name, " ", "_"), func(t *testing.T) {
			p := startProcess(t, nil, "--model", "replay:"+writeFixture(t, ph.entries...))
			p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":%s}}`, ph.caps))
			r := decodeResponse(t, p.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
			var res struct{ SessionID string }
			require.NoError(t, json.Unmarshal(r.Result, &res))
			sid := res.SessionID
			p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":%q}}`, sid, ph.mode))
			p.send(prompt(3, sid, "go"))
			p.await(ph.await)
			p.close() // asserts exit status 0
			assert.Regexp(t, `"stopReason":"cancelled".*"interrupted":true|"interrupted":true.*"stopReason":"cancelled"`, lastTurnEnd(t, p.state, sid))
			if ph.name == "running a local command" {
				b, err := os.ReadFile(filepath.Join(p.cwd, "pid"))
				if err == nil { // the command got as far as writing it
					pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
					// Killed, it may still be a zombie for init to reap.
					assertGone(t, pid, "the command")
				}
			}
		})
	}
}

// Verify that a client that stops reading (stdout closed) mid-stream ends
// the process with status 0, the turn persisted as interrupted.
func TestFault_stdoutClosedMidStream(t *testing.T) {
	t.Parallel()
	// The stream goes on writing, so a write follows the close whenever it
	// comes: acpbridge learns stdout broke from a failed write.
	chunks := []string{`{"text":"Streaming"}`}
	for range 4000 {
		chunks = append(chunks, `{"delayMs":5}`, `{"text":"more "}`)
	}
	fixture := writeFixture(t, `{"chunks":[`+strings.Join(chunks, ",")+`]}`)
	b := startStreaming(t, fixture, "Streaming")
	b.stdout.Close() // the client stops reading; stdin stays open
	b.awaitExit(t, "after its stdout closed")
	b.stdin.Close()
	assert.Contains(t, lastTurnEnd(t, b.state, b.sid), `"interrupted":true`)
}

// Verify that kill -9 in the middle of a turn full of tool calls (the log
// written as it goes) loses no completed turn: the next load works and
// replays the first turn whole.
func TestFault_kill9DuringWrites(t *testing.T) {
	t.Parallel()
	var entries []string
	entries = append(entries, `{"chunks":[{"text":"First turn done."}]}`)
	for i := range 300 {
		entries = append(entries, fmt.Sprintf(`{"chunks":[{"text":"Reading %d. %s"},{"toolCall":{"id":"r%d","name":"read_file","input":{"path":"a.txt"}}}]}`, i, strings.Repeat("x", 400), i))
	}
	for _, killAt := range []int{20, 150} {
		t.Run(strconv.Itoa(killAt), func(t *testing.T) {
			p := startProcess(t, nil, "--model", "replay:"+writeFixture(t, entries...), "--max-turn-requests", "1000")
			require.NoError(t, os.WriteFile(filepath.Join(p.cwd, "a.txt"), []byte(strings.Repeat("file ", 200)), 0o644))
			sid := p.newSession()
			p.call(prompt(2, sid, "first"))
			p.send(prompt(3, sid, "second"))
			for range killAt {
				p.await(`{"params":{"update":{"sessionUpdate":"tool_call"}}}`)
			}
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
			p.drainKilled()

			q := startProcess(t, p.testAgent, "--model", anyModel)
			q.call(initLine)
			q.send(load(1, sid))
			replayed, r := q.updatesUntil(1)
			require.Nil(t, r.Error, "load after kill -9")
			require.GreaterOrEqual(t, len(replayed), 3)
			assert.Contains(t, replayed[0], `"text":"first"`)
			assert.Contains(t, replayed[1], `"text":"First turn done."`)
			assert.Contains(t, replayed[2], `"text":"second"`)
		})
	}
}

// Verify that a state directory that cannot be created makes session/new
// fail with code 1006 and a message saying what to check, and that the
// process goes on serving.
func TestFault_unwritableStateDir(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	ta := startAgent(t, "--model", anyModel, "--state-dir", filepath.Join(file, "state"))
	ta.call(initLine)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.NotNil(t, r.Error)
	assert.Equal(t, 1006, r.Error.Code)
	assert.Contains(t, r.Error.Message, "creating the state directory")
	assert.Contains(t, r.Error.Message, "--state-dir")
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`))
	require.NotNil(t, r.Error, "listing an unusable state directory")
	assert.Equal(t, 1006, r.Error.Code)
	assert.Contains(t, r.Error.Message, "--state-dir")
	r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}`))
	assert.Nil(t, r.Error, "still serving")
}

// Verify that a turn whose session log cannot be written (the file size
// limit here stands for a full disk) tells the user with the storage code,
// 1006, naming the log and asking for space, and the process lives: at the
// turn's end, and in the middle of the model's stream (the write of what
// streamed, at the replay's pause: once answered 1005 as the model's).
func TestFault_fullDisk(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	for name, entry := range map[string]string{
		"turn end":   fmt.Sprintf(`{"chunks":[{"text":%q}]}`, strings.Repeat("long answer ", 1000)),
		"mid-stream": fmt.Sprintf(`{"chunks":[{"text":%q},{"delayMs":1},{"text":"more"}]}`, strings.Repeat("x", 70<<10)),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fixture := writeFixture(t, entry, `{"chunks":[{"text":"short"}]}`)
			prlimit, err := exec.LookPath("prlimit")
			require.NoError(t, err)
			ta := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
				cmd.Path, cmd.Args = prlimit, []string{prlimit, "--fsize=4096", binary(t)} // the agent's flags follow
			}, "--model", "replay:"+fixture).testAgent
			sid := ta.newSession()
			_, r := ta.turnUpdates(2, sid, "write a lot")
			require.NotNil(t, r.Error, "the turn whose log write failed")
			assert.Equal(t, 1006, r.Error.Code, r.Error.Message)
			assert.Contains(t, r.Error.Message, "file too large")
			assert.Contains(t, r.Error.Message, filepath.Join(ta.state, "sessions", sid+".jsonl"))
			assert.Contains(t, r.Error.Message, "has space")
			r = decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`))
			assert.Nil(t, r.Error, "still serving")
		})
	}
}

// Verify that a client that stops reading stdout (the pipe fills, acpbridge
// blocks in write) and then closes stdin, or sends SIGTERM, does not keep
// the process: it exits with status 0 (a write deadline at shutdown), with
// the prompt and the turn's end persisted; through --fanout too.
func TestFault_stalledReaderStillExits(t *testing.T) {
	t.Parallel()
	chunks := make([]string, 20000)
	for i := range chunks {
		chunks[i] = `{"text":"` + strings.Repeat("y", 200) + `"}`
	}
	fixture := writeFixture(t, `{"chunks":[`+strings.Join(chunks, ",")+`]}`)
	for _, c := range []struct{ name, end string }{{"EOF", "EOF"}, {"SIGTERM", "SIGTERM"}, {"fanout/EOF", "EOF"}, {"fanout/SIGTERM", "SIGTERM"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			end := c.end
			var args []string
			if strings.HasPrefix(c.name, "fanout") {
				args = []string{"--fanout"}
			}
			b := startStreaming(t, fixture, "yyyy", args...) // streaming; from here on nobody reads
			cmd, state, sid := b.cmd, b.state, b.sid
			if end == "EOF" {
				b.stdin.Close()
			} else {
				require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			}
			b.awaitExit(t, "while its client had stopped reading")
			log, err := os.ReadFile(filepath.Join(state, "sessions", sid+".jsonl"))
			require.NoError(t, err)
			assert.Contains(t, string(log), `"text":"stream"`)
			assert.Contains(t, lastTurnEnd(t, state, sid), `"interrupted":true`)
		})
	}
}

// streaming is a built acpbridge whose client has opened a session and
// sent a prompt, and read up to the first streamed line.
type streaming struct {
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	stdout     io.ReadCloser
	state, sid string
}

// startStreaming starts the binary on fixture, opens a session, prompts,
// and reads until a line containing want.
func startStreaming(t *testing.T, fixture, want string, args ...string) streaming {
	b := streaming{state: t.TempDir()}
	b.cmd = exec.Command(binary(t), append([]string{"--model", "replay:" + fixture, "--state-dir", b.state}, args...)...)
	var err error
	b.stdin, err = b.cmd.StdinPipe()
	require.NoError(t, err)
	b.stdout, err = b.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, b.cmd.Start())
	r := bufio.NewReader(b.stdout)
	fmt.Fprintln(b.stdin, initLine)
	r.ReadString('\n')
	fmt.Fprintf(b.stdin, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`+"\n", t.TempDir())
	line, _ := r.ReadString('\n')
	b.sid = strings.Split(strings.Split(line, `"sessionId":"`)[1], `"`)[0]
	fmt.Fprintln(b.stdin, prompt(2, b.sid, "stream"))
	line, _ = r.ReadString('\n')
	require.Contains(t, line, want)
	return b
}

// awaitExit waits (bounded) for the process to exit with status 0.
func (b streaming) awaitExit(t *testing.T, when string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		assert.NoError(t, err, "exit status")
	case <-time.After(hang):
		b.cmd.Process.Kill()
		t.Fatalf("acpbridge did not exit %s", when)
	}
}
