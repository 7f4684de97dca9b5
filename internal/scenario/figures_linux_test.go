// figures_linux_test.go checks what a run reads of a process from /proc.

package scenario

import (
	"os"
	"path/filepath"
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
	require.NoError(t, os.WriteFile(path, []byte("00400000-7ffd [rollup]\nRss: 900 kB\nPss: 500 kB\nShared_Clean: 400 kB\nPrivate_Clean: 100 kB\nPrivate_Dirty: 300 kB\n"), 0o644))
	pss, uss := rollup(path)
	assert.Equal(t, int64(500<<10), pss)
	assert.Equal(t, int64(400<<10), uss)
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
