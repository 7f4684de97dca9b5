// leak_test.go checks that many sessions and many turns in one process
// return goroutines, open files and memory to where they were.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type usageSnapshot struct {
	goroutines int
	fds        int
	heap       uint64
}

func snapshot(t *testing.T) usageSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return usageSnapshot{goroutines: runtime.NumGoroutine(), fds: len(fds), heap: ms.HeapAlloc}
}

// assertBaseline allows a handful of goroutines still finishing their last
// response and a little heap; a leak per cycle shows as hundreds or more.
func assertBaseline(t *testing.T, before, after usageSnapshot, what string) {
	t.Logf("%s: goroutines %d -> %d, open files %d -> %d, heap %d -> %d KiB",
		what, before.goroutines, after.goroutines, before.fds, after.fds, before.heap>>10, after.heap>>10)
	assert.LessOrEqual(t, after.goroutines, before.goroutines+5, "%s: goroutines", what)
	assert.LessOrEqual(t, after.fds, before.fds, "%s: open files", what)
	assert.LessOrEqual(t, after.heap, before.heap+64<<10, "%s: live heap", what)
}

// Verify 1,000 session/new + session/close cycles in one process.
func TestLeaks_sessionCycles(t *testing.T) {
	ta := startAgent(t, "--model", anyModel, "--log-level", "warn") // the test keeps stderr in memory
	ta.call(initLine)
	id := 1
	cycle := func() {
		r := decodeResponse(t, ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`, id)))
		require.Nil(t, r.Error)
		sid := strings.Split(strings.Split(string(r.Result), `"sessionId":"`)[1], `"`)[0]
		ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":%q}}`, id+1, sid))
		id += 2
		ta.got = ta.got[:0]
		ta.events.reset() // the test's own record of events
	}
	for range 20 {
		cycle()
	}
	before := snapshot(t)
	for range 1000 {
		cycle()
	}
	assertBaseline(t, before, snapshot(t), "1,000 sessions")
}

// Verify 1,000 turns (with a tool call every tenth) in one session.
func TestLeaks_turns(t *testing.T) {
	var entries []string
	for i := range 1100 {
		if i%10 == 0 {
			entries = append(entries, `{"chunks":[{"toolCall":{"id":"r","name":"read_file","input":{"path":"a.txt"}}}]}`)
		}
		entries = append(entries, fmt.Sprintf(`{"chunks":[{"thought":"t"},{"text":"answer %d"},{"usage":{"inputTokens":5,"outputTokens":2}}]}`, i))
	}
	ta := startAgent(t, "--model", "replay:"+writeFixture(t, entries...), "--log-level", "warn")
	require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "a.txt"), []byte("a"), 0o644))
	sid := ta.newSession()
	turn := 0
	run := func() {
		ta.send(prompt(10+turn, sid, "go"))
		_, r := ta.updatesUntil(10 + turn)
		require.Nil(t, r.Error)
		turn++
		ta.got = ta.got[:0]
		ta.events.reset() // the test's own record of events
	}
	for range 50 {
		run()
	}
	before := snapshot(t)
	for range 1000 {
		run()
	}
	assertBaseline(t, before, snapshot(t), "1,000 turns")
}
