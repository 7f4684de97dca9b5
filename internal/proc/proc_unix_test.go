//go:build unix

package proc

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that the keeper kills the groups it was told of, and only those
// still listed, when its input ends: a group's children die with it.
func TestRunKeeper_killsListedGroupsAtEOF(t *testing.T) {
	var g *Guard
	listed := g.Command(Shell("sleep 600 & wait"))
	removed := g.Command(Shell("sleep 600"))
	require.NoError(t, listed.Start())
	require.NoError(t, removed.Start())
	defer g.Kill(removed.Process.Pid)

	RunKeeper(strings.NewReader(fmt.Sprintf("+%d\n+%d\n-%d\nnot a line\n+1\n", listed.Process.Pid, removed.Process.Pid, removed.Process.Pid)))

	waited := make(chan error, 1)
	go func() { waited <- listed.Wait() }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the listed group lives on after the keeper's input ended")
	}
	assert.Equal(t, "killed", ExitSignal(listed.ProcessState))
	assert.NoError(t, syscall.Kill(removed.Process.Pid, 0), "the group taken off the list was killed")
}

// Verify the environment names' comparison of each OS: Windows folds case
// (Path is PATH, openai_api_key the key), Unix does not.
func TestSameEnvName(t *testing.T) {
	assert.True(t, sameEnvName("OPENAI_API_KEY", "openai_api_key", true), "Windows")
	assert.False(t, sameEnvName("OPENAI_API_KEY", "openai_api_key", false), "Unix")
	assert.True(t, sameEnvName("PATH", "PATH", false))
	assert.False(t, sameEnvName("PATH", "PATHS", true))
}

// Verify the command line cmd.exe gets for `cmd /C LINE` on Windows: the
// line as it is, double quotes included, inside the quotes /S strips.
func TestCmdLine(t *testing.T) {
	line, ok := cmdLine("cmd", []string{"/C", `echo "a b" & type "c.txt"`})
	assert.True(t, ok)
	assert.Equal(t, `cmd /S /C "echo "a b" & type "c.txt""`, line)
	_, ok = cmdLine("sh", []string{"-c", "x"})
	assert.False(t, ok, "other commands keep Go's quoting")
}

// Verify that a process table with a cycle in it (Windows keeps a dead
// creator's pid as a process's parent, and another process may have that
// pid since) lists each descendant once and ends.
func TestDescendants_cycle(t *testing.T) {
	table := map[int][]int{1: {2}, 2: {3}, 3: {1, 4}}
	got := descendantsIn(fromTable(table), 1)
	assert.ElementsMatch(t, []int{2, 3, 4}, got)
}
