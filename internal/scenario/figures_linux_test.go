// figures_linux_test.go checks what a run reads of a process from /proc.

package scenario

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify a process's own CPU time from its stat file: user and system
// ticks (fields 14 and 15), a command name with spaces and parentheses
// read past; and this test's own time, read as it grows.
func TestOwnCPU(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	stat := "4242 (node (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 9 9 20 0 11 0 100 0 0\n"
	require.NoError(t, os.WriteFile(path, []byte(stat), 0o644))
	assert.Equal(t, 2870*time.Millisecond, ownCPU(path), "287 ticks of 10 ms; the children's 18 not counted")
	assert.Zero(t, ownCPU(filepath.Join(t.TempDir(), "gone")))
	for ownCPU("/proc/self/stat") == 0 { // this process's own time, read as it grows
	}
}

// Verify that a process's USS (its private pages) is read with its PSS,
// and that the tree of this very process has some: a figure that does not
// move with what other processes map.
func TestRollup_ussBesidePSS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "smaps_rollup")
	require.NoError(t, os.WriteFile(path, []byte("00400000-7ffd [rollup]\nRss: 900 kB\nPss: 500 kB\nShared_Clean: 400 kB\nPrivate_Clean: 100 kB\nPrivate_Dirty: 300 kB\nAnonymous: 250 kB\n"), 0o644))
	m := rollup(path)
	assert.Equal(t, int64(500<<10), m.pss)
	assert.Equal(t, int64(400<<10), m.uss)
	assert.Equal(t, int64(250<<10), m.anon)
	procs, ok := treeMemory(os.Getpid())
	require.True(t, ok)
	assert.Positive(t, procs[0].uss, "this process's own private pages")
}

// Verify a tree's CPU read in nanoseconds from its threads' schedstat
// files, by thread: this process's main thread among them, and its time
// as it grows; a file that cannot be read is no reading.
func TestTreeCPU(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedstat")
	require.NoError(t, os.WriteFile(path, []byte("4610970 0 2\n"), 0o644))
	ns, ok := schedCPU(path)
	assert.True(t, ok)
	assert.Equal(t, 4610970*time.Nanosecond, ns)
	_, ok = schedCPU(filepath.Join(t.TempDir(), "gone"))
	assert.False(t, ok)
	before := treeCPU(os.Getpid())
	require.Contains(t, before, os.Getpid(), "the main thread's id is the process's")
	for cpuSince(treeCPU(os.Getpid()), before) <= 0 { // this process's own time, read as it grows
	}
	assert.Nil(t, treeCPU(-1))
}

// Verify the figure that stays put: a process's USS falls when six
// unrelated processes map the same binary (its file pages turn shared),
// and its anonymous memory does not move.
func TestRollup_anonymousStaysPut(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	b, err := os.ReadFile(sleep)
	require.NoError(t, err)
	own := filepath.Join(t.TempDir(), "sleep") // a binary no other process maps
	require.NoError(t, os.WriteFile(own, b, 0o755))
	start := func() int {
		cmd := exec.Command(own, "600")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		awaitSleeping(t, cmd.Process.Pid)
		return cmd.Process.Pid
	}
	first := start()
	before := rollup(fmt.Sprintf("/proc/%d/smaps_rollup", first))
	for range 6 {
		start()
	}
	after := rollup(fmt.Sprintf("/proc/%d/smaps_rollup", first))
	require.Positive(t, before.uss)
	assert.Less(t, after.uss, before.uss, "USS falls: the binary's pages are no longer the process's alone")
	assert.Equal(t, before.anon, after.anon, "anonymous memory does not move")
}

// awaitSleeping waits until pid sleeps: started, its program loaded.
func awaitSleeping(t *testing.T, pid int) {
	deadline := time.Now().Add(2 * time.Minute) // a deadlock guard
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "S" && strings.Contains(string(b), "(sleep)") {
			return
		}
		require.True(t, time.Now().Before(deadline), "process %d never slept", pid)
		runtime.Gosched()
	}
}
