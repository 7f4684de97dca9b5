// figures_test.go checks what figures.go computes from its readings.

package scenario

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Verify a turn's CPU between two readings of the tree, by thread: each
// thread's own time since the first, a thread started meanwhile from 0,
// one ended meanwhile not counted (its process's other threads keep
// theirs); none where a reading is missing.
func TestCPUSince(t *testing.T) {
	ms := time.Millisecond
	assert.Equal(t, 7*ms, cpuSince(map[int]time.Duration{1: 5 * ms, 2: 4 * ms}, map[int]time.Duration{1: 2 * ms, 3: 9 * ms}),
		"3 ms of thread 1, 4 of 2 started meanwhile; 3 ended meanwhile is not counted")
	assert.Equal(t, 2*ms, cpuSince(map[int]time.Duration{1: 2 * ms}, map[int]time.Duration{1: 5 * ms}),
		"an id used again by a thread with less time: counted from 0")
	assert.Equal(t, time.Duration(-1), cpuSince(nil, map[int]time.Duration{1: ms}), "not read")
	assert.Equal(t, time.Duration(-1), cpuSince(map[int]time.Duration{1: ms}, nil), "not read")
}

// Verify that measuring a tree takes at most a twentieth of a core: a
// sample waits 5 ms after a quick one, twenty times its own time after a
// slow one (a large tree's smaps_rollup files).
func TestSampleWait(t *testing.T) {
	assert.Equal(t, 5*time.Millisecond, sampleWait(100*time.Microsecond))
	assert.Equal(t, 80*time.Millisecond, sampleWait(4*time.Millisecond))
}
