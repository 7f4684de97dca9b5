//go:build linux

// signal_test.go tests on the built binary that SIGTERM, SIGINT and SIGHUP
// end the process as stdin's EOF does (status 0, the turn persisted with
// what streamed, as interrupted), and that nothing the process started
// outlives it: a command's process group, a daemon it started with setsid,
// and what an MCP server's wrapper started.

package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"acpbridge/internal/proc"
)

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	state := strings.Fields(string(b[i+1:]))[0]
	return state != "Z" && state != "X"
}

// readPids reads the pids a command wrote to a FIFO, one a line, until it
// closes: reading blocks until the command has written them.
func readPids(t *testing.T, fifo string, n int) []int {
	t.Helper()
	f, err := os.Open(fifo)
	require.NoError(t, err)
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for len(pids) < n && sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		require.NoError(t, err, "the command wrote %q", sc.Text())
		pids = append(pids, pid)
	}
	require.Len(t, pids, n, "pids from the command")
	return pids
}

// endBySignal sends sig, waits for the process to exit (stdin stays open:
// the signal alone must end it), then reads its output and exit status.
func endBySignal(t *testing.T, p *procAgent, sig syscall.Signal) {
	t.Helper()
	pidfd, err := unix.PidfdOpen(p.cmd.Process.Pid, 0)
	require.NoError(t, err)
	defer unix.Close(pidfd)
	require.NoError(t, p.cmd.Process.Signal(sig))
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(hang/time.Millisecond))
	for err == unix.EINTR {
		n, err = unix.Poll(fds, int(hang/time.Millisecond))
	}
	require.NoError(t, err)
	require.Equal(t, 1, n, "the process did not exit after %v with stdin open; stderr:\n%s", sig, p.stderr.String())
	p.stdin.Close() // lets exec's copying goroutine, and so Wait, end
	for p.next("EOF after the signal") != nil {
	}
	p.closed = true
	select {
	case code := <-p.exit:
		assert.Equal(t, 0, code, "exit status after %v; stderr:\n%s", sig, p.stderr.String())
	case <-time.After(hang):
		t.Fatalf("no exit status after %v", sig)
	}
}

// Verify each signal in the middle of a stream, of a command and of a
// permission request, and the moment a session exists: signals are caught
// beside start-up, and a session opens only once they are.
func TestSignal_endsLikeEOF(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String()+"/as soon as a session exists", func(t *testing.T) {
			p := startProcess(t, nil, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"x"}]}`))
			sid := p.newSession()
			endBySignal(t, p, sig)
			assert.FileExists(t, filepath.Join(p.state, "sessions", sid+".jsonl"))
		})
		t.Run(sig.String()+"/stream", func(t *testing.T) {
			fixture := writeFixture(t, `{"chunks":[{"text":"Streamed "},{"text":"before"},{"delayMs":600000},{"text":" never"}]}`)
			p := startProcess(t, nil, "--model", "replay:"+fixture)
			sid := p.newSession()
			p.send(prompt(2, sid, "stream"))
			p.await(`{"params":{"update":{"content":{"text":"before"}}}}`)
			endBySignal(t, p, sig)
			b, err := os.ReadFile(filepath.Join(p.state, "sessions", sid+".jsonl"))
			require.NoError(t, err)
			assert.Contains(t, string(b), `"text":"Streamed before"`, "the streamed text is not in the log")
			end := lastTurnEnd(t, p.state, sid)
			assert.Contains(t, end, `"stopReason":"cancelled"`)
			assert.Contains(t, end, `"interrupted":true`)
		})
		t.Run(sig.String()+"/command", func(t *testing.T) {
			command := `exec 3>pids; sleep 600 3>&- & echo $! >&3; setsid sh -c 'echo $$ >&3; exec sleep 600 3>&-' & exec 3>&-; sleep 600`
			fixture := writeFixture(t, fmt.Sprintf(`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q}}}]}`, command))
			p := startProcess(t, nil, "--model", "replay:"+fixture)
			mkfifo(t, filepath.Join(p.cwd, "pids"))
			sid := p.newSession()
			p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
			p.send(prompt(3, sid, "run"))
			pids := readPids(t, filepath.Join(p.cwd, "pids"), 2)
			endBySignal(t, p, sig)
			assertGone(t, pids[0], "a background job of the command")
			assertGone(t, pids[1], "a setsid daemon the command started")
			assert.Contains(t, lastTurnEnd(t, p.state, sid), `"interrupted":true`)
		})
		t.Run(sig.String()+"/permission", func(t *testing.T) {
			fixture := writeFixture(t, `{"chunks":[{"toolCall":{"id":"c1","name":"write_file","input":{"path":"a.txt","content":"A"}}}]}`)
			p := startProcess(t, nil, "--model", "replay:"+fixture)
			sid := p.newSession()
			p.send(prompt(2, sid, "write"))
			p.await(`{"method":"session/request_permission"}`)
			endBySignal(t, p, sig)
			assert.Contains(t, lastTurnEnd(t, p.state, sid), `"interrupted":true`)
			assert.NoFileExists(t, filepath.Join(p.cwd, "a.txt"))
		})
	}
}

// Verify that a daemon a command started with setsid is ended at a clean
// exit too (stdin EOF), after its turn has long finished.
func TestSignal_daemonEndsAtExit(t *testing.T) {
	t.Parallel()
	// The command returns once the daemon has detached: it prints "up"
	// after setsid, and head waits for that line.
	command := `exec 3>pids; { setsid sh -c 'echo $$ >&3; echo up; exec sleep 600 3>&- >/dev/null 2>&1' & } | head -1; exec 3>&-`
	fixture := writeFixture(t,
		fmt.Sprintf(`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q}}}]}`, command),
		`{"chunks":[{"text":"Started."}]}`)
	p := startProcess(t, nil, "--model", "replay:"+fixture)
	mkfifo(t, filepath.Join(p.cwd, "pids"))
	sid := p.newSession()
	p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	p.send(prompt(3, sid, "start a daemon"))
	pids := readPids(t, filepath.Join(p.cwd, "pids"), 1)
	p.await(`{"id":3}`)
	require.True(t, alive(pids[0]), "the daemon should run while the session does")
	p.close()
	assertGone(t, pids[0], "a setsid daemon")
}

// Verify that an MCP server started through a wrapper that ignores SIGTERM
// leaves nothing behind when acpbridge exits: the wrapper's other child
// (which ignores SIGTERM too) is gone.
func TestSignal_mcpWrapperChildren(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pids")
	mkfifo(t, fifo)
	script := fmt.Sprintf(`trap '' TERM; sleep 600 & echo $! > %s; exec %s`, fifo, self)
	fixture := writeFixture(t, `{"chunks":[{"text":"x"}]}`)
	p := startProcess(t, nil, "--model", "replay:"+fixture)
	p.call(initLine)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[{"name":"wrapped","command":"sh","args":["-c",%q],"env":[{"name":"ACPBRIDGE_TEST_MCP","value":"stdio"}]}]}}`, script))
	pids := readPids(t, fifo, 1)
	p.await(`{"id":1}`)
	require.True(t, alive(pids[0]))
	p.close()
	assertGone(t, pids[0], "the child of an MCP server's wrapper")
}

// Verify that kill -9 of acpbridge, or of the --fanout router, ends what a
// running command started in its group (a background job the shell waits
// for) and what an MCP server's wrapper started: the keeper (internal/proc)
// ends their groups when acpbridge's end of its pipe closes.
func TestSignal_kill9EndsCommandChildren(t *testing.T) {
	t.Parallel()
	command := `exec 3>pids; sleep 600 3>&- & echo $! >&3; exec 3>&-; wait`
	fixture := fmt.Sprintf(`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q}}}]}`, command)
	for _, fanout := range []bool{false, true} {
		t.Run(fmt.Sprintf("fanout=%v", fanout), func(t *testing.T) {
			t.Parallel()
			args := []string{"--model", "replay:" + writeFixture(t, fixture), "--log-level", "debug"}
			if fanout {
				args = append([]string{"--fanout"}, args...)
			}
			p := startProcess(t, nil, args...)
			mkfifo(t, filepath.Join(p.cwd, "pids"))
			p.call(initLine)
			sid := p.openSession(1)
			p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
			p.send(prompt(3, sid, "run"))
			pids := readPids(t, filepath.Join(p.cwd, "pids"), 1)
			require.True(t, alive(pids[0]))
			// The keeper learns of a command right after its start; that
			// instant is logged (a kill -9 within it is the one window).
			p.awaitEvent("command_started")
			held := holder(t, p.state, sid) // with --fanout, the child serving the session
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
			p.drainKilled()
			assertGone(t, pids[0], "a background job of a command, after kill -9 of acpbridge")
			// The session's process (a child of the router's) persists the
			// turn as it ends: the test's folders are removed after that.
			assertGone(t, held, "the process that held the session")
		})
	}
}

// Verify that a keeper killed is replaced: the next command starts a new
// one, told of the groups still running, and kill -9 of acpbridge then
// still ends that command's background job.
func TestSignal_keeperReplaced(t *testing.T) {
	t.Parallel()
	command := `exec 3>pids; sleep 600 3>&- & echo $! >&3; exec 3>&-; wait`
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"c0","name":"run_command","input":{"command":"true"}}}]}`,
		`{"chunks":[{"text":"Ran."}]}`,
		fmt.Sprintf(`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q}}}]}`, command))
	p := startProcess(t, nil, "--model", "replay:"+fixture, "--log-level", "debug")
	mkfifo(t, filepath.Join(p.cwd, "pids"))
	sid := p.newSession()
	p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	_, r := p.turnUpdates(3, sid, "first")
	require.Nil(t, r.Error)
	keeper := keeperOf(t, p.cmd.Process.Pid)
	require.NoError(t, syscall.Kill(keeper, syscall.SIGKILL))
	assertGone(t, keeper, "the keeper")

	p.send(prompt(4, sid, "second"))
	pids := readPids(t, filepath.Join(p.cwd, "pids"), 1)
	p.awaitEvents(2, "command_started")
	require.NotEqual(t, keeper, keeperOf(t, p.cmd.Process.Pid), "a new keeper")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	p.drainKilled()
	assertGone(t, pids[0], "a background job of a command started after the keeper was killed")
}

// keeperOf is the pid of acpbridge's keeper, a child of pid.
func keeperOf(t *testing.T, pid int) int {
	t.Helper()
	for _, c := range proc.Descendants(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if strings.Contains(string(b), proc.KeeperArg) {
			return c
		}
	}
	t.Fatalf("acpbridge (pid %d) has no keeper", pid)
	return 0
}
