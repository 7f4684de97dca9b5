// states_test.go holds the state tables to the package doc and checks
// that move refuses what they do not allow.

package fanout

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docBlock is m's table as doc.go writes it: rendered, each line an
// indented comment line.
func docBlock[S ~int](m *machine[S]) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(m.render(), "\n"), "\n") {
		b.WriteString("//\t" + line + "\n")
	}
	return b.String()
}

// Verify that the package doc shows each machine's table as the code
// has it: a state or an edge added, removed or reworded in one is in the
// other.
func TestDocTables(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for name, block := range map[string]string{
		"child": docBlock(&childMachine), "thread": docBlock(&threadMachine), "connection": docBlock(&connMachine), "spares' hold": docBlock(&holdMachine),
	} {
		assert.Contains(t, string(doc), block, "doc.go's %s table; it should read:\n%s", name, block)
	}
	design, err := os.ReadFile("../../docs/design.md")
	require.NoError(t, err)
	assert.Contains(t, string(design), "```\n"+holdMachine.render()+"```\n", "docs/design.md's table of the spares' hold")
}

// Verify that every table is whole: each state named once, in the order
// of its constants, every state reachable from the first, every edge to a
// state of the table and none to itself; only the last state has no edge
// out (dead, closed, ending).
func TestStateTables(t *testing.T) {
	checkMachine(t, &childMachine)
	checkMachine(t, &threadMachine)
	checkMachine(t, &connMachine)
	checkMachine(t, &holdMachine)
}

func checkMachine[S ~int](t *testing.T, m *machine[S]) {
	t.Helper()
	seen := map[S]bool{0: true}
	for grew := true; grew; {
		grew = false
		for from := range m.states {
			if !seen[S(from)] {
				continue
			}
			for _, e := range m.states[from].edges {
				if !seen[e.to] {
					seen[e.to], grew = true, true
				}
			}
		}
	}
	for i, s := range m.states {
		assert.NotEmpty(t, s.name, "%s state %d", m.name, i)
		assert.True(t, seen[S(i)], "%s: %s cannot be reached", m.name, s.name)
		assert.Equal(t, !m.endless && i == len(m.states)-1, len(s.edges) == 0, "%s: only the last state ends the machine (%s)", m.name, s.name)
		for _, e := range s.edges {
			assert.NotEqual(t, S(i), e.to, "%s: %s to itself", m.name, s.name)
			assert.NotEmpty(t, e.on, "%s: %s → %s says what moves it", m.name, s.name, m.states[e.to].name)
		}
	}
}

// strictRouter is a router whose refused moves panic (Options.RefusedMove),
// so that a test fails at the move.
func strictRouter() *router {
	return &router{Options: Options{Log: slog.New(slog.DiscardHandler), RefusedMove: func(what string) { panic(what) }}}
}

// Verify that a move not in the table is refused: the test's hook is told
// (here it panics), and the state stays; a move in it is made. The binary
// sets no hook: it logs and goes on (TestMoveRefused_logged).
func TestMoveRefused(t *testing.T) {
	r := strictRouter()
	c := &child{state: childDead}
	assert.Panics(t, func() { r.moveChild(c, childServing) })
	assert.Equal(t, childDead, c.state)
	th := &thread{state: threadLost}
	assert.True(t, r.moveThread(th, threadReopening))
	assert.Equal(t, threadReopening, th.state)
	assert.Panics(t, func() { r.moveConn(connInitializing); r.moveConn(connInitializing) })
}

// Verify that without the hook, as in the binary, a refused move is logged
// with the event move_refused and the router goes on.
func TestMoveRefused_logged(t *testing.T) {
	var log bytes.Buffer
	r := &router{Options: Options{Log: slog.New(slog.NewTextHandler(&log, nil))}}
	c := &child{state: childDead}
	assert.NotPanics(t, func() { assert.False(t, r.moveChild(c, childServing)) })
	assert.Equal(t, childDead, c.state)
	assert.Contains(t, log.String(), "event=move_refused")
}

// Verify that an initialize answered by a child already ending (the
// router's end came while it started, after the client authenticated)
// leaves it ending: no authenticate is repeated to it, and no move outside
// the table is tried (in a test binary, a panic).
func TestInitAnsweredWhileEnding(t *testing.T) {
	r := strictRouter()
	r.conn.authArgs = json.RawMessage(`{"methodId":"token"}`)
	for _, failed := range []bool{false, true} {
		c := &child{state: childEnding}
		assert.NotPanics(t, func() { r.initAnswered(c, failed) }, "failed: %v", failed)
		assert.Equal(t, childEnding, c.state)
	}
}

// Verify that a child ended while its process still starts (a withdrawn
// request's process of the moment) is not ended a second time when the
// router's end comes before its start: there is no stdin to close yet
// (before, a nil one was closed: the router crashed at the end of a busy
// machine's session), and onStarted ends it once started.
func TestEndChild_stillStartingAtTheRouterEnd(t *testing.T) {
	r := strictRouter()
	c := &child{state: childStarting}
	r.children = map[*child]bool{c: true}
	r.endChild(c, false)
	assert.Equal(t, childEnding, c.state)
	r.conn.state = connEnding
	assert.NotPanics(t, func() { r.endChild(c, false) }, "the router's end, before the child's start")
	assert.Equal(t, 0, c.endStep, "no step taken before it has started")
}
