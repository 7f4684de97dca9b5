// budget_test.go checks the one bound on what the router has read of its
// children and not yet written.

package fanout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// held is what all children hold of the router's: bytes read, not written.
func (b *budget) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out
}

// took runs a take beside the test: its outcome, and what it was told when
// it had to wait.
func took(a *account, n int, done <-chan struct{}) (chan bool, chan [2]int) {
	ok, held := make(chan bool, 1), make(chan [2]int, 1)
	go func() { ok <- a.take(n, done, func(mine, all int) { held <- [2]int{mine, all} }, func(int, int) {}) }()
	return ok, held
}

// Verify that a child takes within its share, waits past it while lines of
// its own are still to be written, and is let go once they are; that a
// line longer than the share passes whole when nothing of its child's is
// left to write; that watch sees a reader held by the client; and that the
// router's end lets a waiting reader go.
func TestBudget_oneChild(t *testing.T) {
	b := newBudget(2000, 1000)
	a := b.open()
	never := make(chan struct{})
	noWait := func(int, int) { t.Error("waited with room") }
	passes := func(int, int) {}
	assert.True(t, a.take(600, never, noWait, passes))
	assert.Equal(t, 600, a.queue())

	ok, held := took(a, 600, never)
	assert.Equal(t, [2]int{600, 600}, <-held, "past its share with a line of its own to write: it waits")
	assert.True(t, a.clientBound(), "waiting on the client")
	a.give(600)
	assert.True(t, <-ok, "let go once its line is written")
	assert.False(t, a.clientBound(), "looked at since it waited, and no longer waiting")

	for range 5 { // the same line on: 3000 bytes, past both bounds, with nothing queued
		assert.True(t, a.take(600, never, noWait, passes), "one line always passes")
	}
	assert.Equal(t, 3600, b.held())
	n := a.queue()
	assert.Equal(t, 3600, n)
	ok, _ = took(a, 1, never)
	a.give(n)
	assert.True(t, <-ok, "the next line once the long one is written")
	assert.Equal(t, 1, b.held())
	a.drop()
	assert.Equal(t, 0, b.held(), "a line not kept is given back")

	assert.True(t, a.take(1000, never, noWait, passes))
	a.queue()
	done := make(chan struct{})
	ok, _ = took(a, 1, done)
	close(done)
	assert.False(t, <-ok, "the router ended")
}

// Verify that the children share one budget: a child with a line of its
// own still to write waits once all of them hold the limit, even within
// its share; that when readers wait in the middle of a line with nothing
// of theirs to write, one of them (and only one) finishes its line past
// the bounds; and that the next may pass only once that line is written.
func TestBudget_children(t *testing.T) {
	b := newBudget(2000, 1000)
	never := make(chan struct{})
	noWait := func(int, int) { t.Error("waited with room") }
	passes := func(int, int) {}
	a, c, d := b.open(), b.open(), b.open()
	assert.True(t, a.take(1000, never, noWait, passes))
	assert.True(t, c.take(990, never, noWait, passes))
	nc := c.queue()
	assert.True(t, d.take(10, never, noWait, passes))
	nd := d.queue()

	ok, held := took(d, 10, never)
	assert.Equal(t, [2]int{10, 2000}, <-held, "all children together at the limit: d waits, within its share")
	c.give(nc)
	assert.True(t, <-ok, "room once another child's line is written")
	d.give(nd)

	// a and d are each in the middle of a line, nothing queued: one passes.
	assert.True(t, a.take(500, never, noWait, passes), "a's line passes the bounds")
	ok, held = took(d, 995, never)
	assert.Equal(t, [2]int{10, 1510}, <-held, "d waits: a's line passes")
	assert.True(t, a.take(500, never, noWait, passes), "and goes on while it is a's line")
	na := a.queue()
	assert.Equal(t, 2000, na)
	select {
	case <-ok:
		t.Fatal("a second line passed the bounds before the first was written")
	default:
	}
	assert.LessOrEqual(t, b.held(), 2000+2000, "the limit and one line")
	a.give(na)
	assert.True(t, <-ok, "the next passes once it is written")
	assert.Equal(t, 1005, b.held())

	// d is past the bounds now; a's line within its share still passes
	// while d's stays unfinished (an agent stopped in the middle of it).
	e := b.open()
	assert.True(t, e.take(900, never, noWait, passes), "room beside the line past the bounds")
	assert.Equal(t, 1005+900, b.held())
	assert.True(t, e.take(100, never, noWait, passes), "within its share, and the budget but for d's line")
	ne := e.queue()
	ok, held = took(e, 1, never)
	assert.Equal(t, [2]int{1000, 2005}, <-held, "past its share with a line of its own to write: it waits")
	d.drop() // d's line cut by its child's end
	select {
	case <-ok:
		t.Fatal("e passed its share with a line of its own to write")
	default:
	}
	e.give(ne)
	assert.True(t, <-ok, "once its line is written")
	assert.Equal(t, 1, b.held())
}

// Verify that a line passing the bounds whose child stops writing in the
// middle of it gives way: after the stall, another child's long line
// passes instead, the stopped line still counted; the others' lines
// within their share pass beside both; and the stopped line goes on once
// the other is written.
func TestBudget_stalledLineGivesWay(t *testing.T) {
	b := newBudget(2000, 1000)
	b.stall = 10 * time.Millisecond
	never := make(chan struct{})
	noWait := func(int, int) { t.Error("waited with room") }
	passes := func(int, int) {}
	a, d, e := b.open(), b.open(), b.open()
	assert.True(t, a.take(1000, never, noWait, passes))
	assert.True(t, a.take(1000, never, noWait, passes), "a's line passes the bounds")

	ok, held := took(d, 1500, never)
	assert.Equal(t, [2]int{0, 2000}, <-held, "d waits for a's line")
	assert.True(t, <-ok, "a's line stopped growing: d's passes instead")
	assert.Equal(t, 3500, b.held(), "a's stopped line still counted")
	assert.True(t, e.take(900, never, noWait, passes), "within its share, beside both")

	ok, _ = took(a, 10, never)
	nd := d.queue()
	d.give(nd)
	assert.True(t, <-ok, "a's line goes on once d's is written")
	assert.Equal(t, 2010+900, b.held())
}
