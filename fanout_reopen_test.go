//go:build linux

// fanout_reopen_test.go checks the router's rules for agents that reopen
// sessions their own way (found with the agents people run): a thread of an
// agent that lists sessions is evicted only once the agent lists it; an
// agent known not to reopen, or found not to, keeps its threads; the
// agent's own reason for a failed reopening reaches the user; a thread's
// process runs in its session's directory.

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that with an agent offering session/list, a thread never prompted
// (which the agent does not list: it keeps nothing to reopen yet) outlives
// --idle-timeout, and one prompted (listed) is evicted and comes back.
func TestFanoutReopen_evictedOnceListed(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "300ms", "--spares", "0", "--log-level", "debug"}, "-list")
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	_, r := p.turnUpdates(20, a, "first")
	require.Nil(t, r.Error)
	p.awaitEvent("evicting", "session", a)
	_, r = p.turnUpdates(21, a, "back")
	require.Nil(t, r.Error, "the evicted thread, reopened")
	// b, idle longer than a, would have been evicted with it.
	assert.False(t, p.hasEvent("evicting", "session", b), "the thread never prompted is kept")
	assert.Contains(t, agentChildren(t, p.cmd.Process.Pid), agentPid(t, b), "its process still runs")
	p.close()
}

// Verify that the threads of an agent known not to reopen a session in a
// new process (gemini-cli through 0.61.0) are never evicted, and the log
// says why; a later version is evicted as any other.
func TestFanoutReopen_knownAgentKept(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "200ms", "--log-level", "debug"}, "-name", "gemini-cli", "-version", "0.61.0")
	p.call(initLine)
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "first")
	require.Nil(t, r.Error)
	p.awaitEvent("eviction_off", "agent", "gemini-cli 0.61.0")
	// Past the idle timeout, the check has seen the thread idle and kept it.
	p.awaitEvent("idle_kept", "session", a)
	assert.False(t, p.hasEvent("evicting"), "a thread of an agent that cannot reopen is never evicted")
	_, r = p.turnUpdates(21, a, "still the same process")
	require.Nil(t, r.Error)
	p.close()

	later := startRoutedWith(t, []string{"--idle-timeout", "200ms", "--log-level", "debug"}, "-name", "gemini-cli", "-version", "0.62.0")
	later.call(initLine)
	a = later.openSession(10)
	later.awaitEvent("evicting", "session", a)
	later.close()
}

// Verify that when the agent refuses to reopen a thread the router had
// open, the user is told the agent's own reason (its error's data too), and
// no thread is evicted after it.
func TestFanoutReopen_refusedTellsWhyAndKeeps(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "200ms", "--log-level", "debug"}, "-load-refuse")
	p.call(initLine)
	a, b := p.openSession(10), p.openSession(11)
	p.awaitEvent("evicting", "session", a)
	p.awaitEvent("evicting", "session", b)
	_, r := p.turnUpdates(20, a, "back?")
	require.NotNil(t, r.Error, "a thread the agent will not reopen")
	assert.Contains(t, r.Error.Message, "oneagent keeps no session "+a+" here (refused on purpose)")
	p.awaitEvent("eviction_stopped")
	c := p.openSession(12)
	_, r = p.turnUpdates(21, c, "a new thread")
	require.Nil(t, r.Error)
	_, r = p.turnUpdates(22, c, "and it stays")
	require.Nil(t, r.Error)
	assert.False(t, p.hasEvent("evicting", "session", c))
	p.close()
}

// Verify where a thread's process runs: in the router's directory, where
// CMD starts (a relative script path in its arguments works for a session
// opened anywhere, and a warm spare serves it); and, for an agent known to
// need it (gemini-cli), in the session's directory.
func TestFanoutReopen_processDir(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte("exec "+oneAgent(t)+` "$@"`+"\n"), 0o755))
	rel, err := filepath.Rel(mustGetwd(t), script)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		script string // in the session's directory a relative path would not be found
		args   []string
		in     func(dir string) string
	}{
		{"any agent", rel, nil, func(string) string { return mustGetwd(t) }},
		{"gemini-cli", script, []string{"-name", "gemini-cli"}, func(dir string) string { return dir }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := startProcessWith(t, nil, func(cmd *exec.Cmd, _ *testAgent) {
				cmd.Env = append(os.Environ(), "ONEAGENT_STATE="+t.TempDir())
			}, append([]string{"--fanout", "--state-dir", t.TempDir(), "--", "sh", c.script}, c.args...)...)
			p.call(initLine)
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":10,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, dir))
			_, rs, _ := p.collect(10)
			require.Nil(t, rs[10].Error, "a relative script path, a session elsewhere")
			var res struct{ SessionID string }
			require.NoError(t, json.Unmarshal(rs[10].Result, &res))
			ups, r := p.turnUpdates(20, res.SessionID, "where")
			require.Nil(t, r.Error)
			assert.Contains(t, strings.Join(ups, ""), "in "+c.in(dir)+", ")
			p.close()
		})
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}

// Verify that a thread reopened just as the spare it takes is killed comes
// back: whether the router saw the death first (the spare leaves the pool)
// or took the dead spare (the reopening is tried once more in a new
// process), the prompt is answered.
func TestFanoutReopen_spareKilledAsTaken(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "200ms", "--spares", "1", "--log-level", "debug"})
	p.call(initLine)
	a := p.openSession(10)
	_, r := p.turnUpdates(20, a, "first")
	require.Nil(t, r.Error)
	p.awaitEvent("evicting", "session", a)
	var spare []int
	require.Eventually(t, func() bool { spare = agentChildren(t, p.cmd.Process.Pid); return len(spare) == 1 }, hang, 10*time.Millisecond)
	require.NoError(t, syscall.Kill(spare[0], syscall.SIGKILL))
	_, r = p.turnUpdates(21, a, "back")
	require.Nil(t, r.Error, "the thread whose spare was killed as it was taken")
	p.close()
}

// Verify that a warm spare serves a thread opened in another directory:
// threads opened one after another, each in a project of its own, each
// take the process started ahead for them instead of waiting for one.
func TestFanoutReopen_spareServesAnyCwd(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--spares", "1"})
	p.call(initLine)
	for i, dir := range []string{t.TempDir(), t.TempDir(), t.TempDir()} {
		var spare []int
		require.Eventually(t, func() bool { spare = agentChildren(t, p.cmd.Process.Pid); return len(spare) == i+1 }, hang, 10*time.Millisecond, "a spare waits")
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, 10+i, dir))
		_, rs, _ := p.collect(10 + i)
		require.Nil(t, rs[10+i].Error)
		var res struct{ SessionID string }
		require.NoError(t, json.Unmarshal(rs[10+i].Result, &res))
		assert.Contains(t, spare, agentPid(t, res.SessionID), "thread %d, opened in a directory of its own, was served by the spare", i+1)
	}
	p.close()
}

// heldBy is the pids the events say held session sid, in order
// (thread_held; the last pid of a line is the child's: the first is the
// writing process's own).
func heldBy(t *testing.T, ta *testAgent, sid string) []int {
	t.Helper()
	var pids []int
	for _, l := range strings.Split(ta.events.String(), "\n") {
		var e struct {
			Event, Session string
			Pid            int
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Event == "thread_held" && e.Session == sid {
			pids = append(pids, e.Pid)
		}
	}
	return pids
}

// Verify thread_held: whenever a thread takes a process (opened, reopened
// after an eviction) the event names the thread and the process, for
// another agent (whose session ids name their process) and for acpbridge's
// own children (the session's lock names its holder).
func TestFanoutReopen_threadHeldNamesTheProcess(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--idle-timeout", "300ms", "--spares", "0"}, "-list")
	p.call(initLine)
	a := p.openSession(10)
	p.awaitEvent("thread_held", "session", a)
	assert.Equal(t, []int{agentPid(t, a)}, heldBy(t, p.testAgent, a), "the process that opened it")
	_, r := p.turnUpdates(20, a, "first")
	require.Nil(t, r.Error)
	p.awaitEvent("evicting", "session", a)
	_, r = p.turnUpdates(21, a, "back")
	require.Nil(t, r.Error)
	held := heldBy(t, p.testAgent, a)
	require.Len(t, held, 2, "opened, then reopened")
	assert.NotEqual(t, held[0], held[1], "a new process")
	assert.Contains(t, agentChildren(t, p.cmd.Process.Pid), held[1], "the router's child serves it now")
	p.close()

	q := startProcess(t, nil, "--fanout", "--model", anyModel)
	sid := q.newSession()
	q.awaitEvent("thread_held", "session", sid)
	assert.Equal(t, []int{holder(t, q.state, sid)}, heldBy(t, q.testAgent, sid), "the child that holds the session's lock")
	q.close()
}
