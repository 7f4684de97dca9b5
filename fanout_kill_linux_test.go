// fanout_kill_linux_test.go checks, on the binary, that a kill -9 of the
// router ends what its agents started in sessions of their own.

package main

import (
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Verify that kill -9 of the router ends what a thread's agent started in
// a session of its own (as codex-acp and claude-agent-acp run commands):
// the keeper ends it with the agents' groups.
func TestFanoutKill_agentsDaemonsEnded(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, nil)
	p.call(initLine)
	a := p.openSession(10)
	ups, r := p.turnUpdates(20, a, "start a daemon")
	require.Nil(t, r.Error)
	m := regexp.MustCompile(`daemon=(\d+)`).FindStringSubmatch(strings.Join(ups, ""))
	require.NotNil(t, m, "the agent says its daemon's pid")
	daemon, _ := strconv.Atoi(m[1])
	require.NoError(t, syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL))
	p.drainKilled()
	assertGone(t, daemon, "a daemon an agent started in a session of its own")
}
