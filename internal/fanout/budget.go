// budget.go holds the bound on what the router has read of its children
// and not yet written to the client: one budget for all of them, which
// stops reading children whose client reads slowly.

package fanout

import (
	"sync"
	"time"
)

// The budget's bounds: what all children together may have read and not
// yet written, and what one child may (its share: no child takes it all,
// so another always finds room). Past them a child's reader waits, and
// the child's own writes block on its pipe. One line always passes,
// whatever its length: when a child's reader waits in the middle of a line
// with nothing of its own left to write, it may finish that line past the
// bounds, one such child at a time, until the line is written; the others
// share the budget meanwhile as if it held nothing. A slow client costs
// the router at most budgetBytes and one line, however many threads it
// has. A child that stops writing in the middle of such a line for
// stallWait gives way: another child's line passes instead, and the
// stopped line, still counted, waits its turn to go on; so a misbehaving
// agent holds up no other thread, at the cost of its own part of a line.
const (
	budgetBytes = 2 << 20
	shareBytes  = 1 << 20
	stallWait   = 500 * time.Millisecond
)

// budget counts the bytes of the children's lines that their readers have
// read and the loop has not yet written, as the readers read them: a line
// counts from its first fragment, so a line a reader is waiting in the
// middle of counts too. Readers take, the loop gives back once a line's
// event has run (written, or dropped).
type budget struct {
	mu    sync.Mutex
	limit int           // all children's bytes (budgetBytes)
	share int           // one child's (shareBytes)
	stall time.Duration // how long a line past the bounds may stop growing before another passes (stallWait)
	out   int           // all children's bytes read and not yet written
	over  *account      // the child whose line passes the bounds, until that line is written, or nil
	// overruns are the children in the middle of a line past the bounds:
	// over, and any that stopped writing and gave way.
	overruns map[*account]bool
	freed    chan struct{} // closed (and replaced) when bytes are given back
}

// account is one child's part of the budget; its reader is the only one
// to take from it.
type account struct {
	b       *budget
	line    int  // bytes of the line being read
	queued  int  // bytes of whole lines handed to the loop, not yet written
	overrun bool // the line being read passes the bounds (in b.overruns)
	waiting bool // the reader waits for room now
	waited  bool // it has waited since clientBound last looked
}

func newBudget(limit, share int) *budget {
	return &budget{limit: limit, share: share, stall: stallWait, overruns: map[*account]bool{}, freed: make(chan struct{})}
}

// open is a new child's account.
func (b *budget) open() *account { return &account{b: b} }

// take counts n more bytes of the line a's reader is reading, first
// waiting for room (held is called once, with what a and all children
// hold, when it must wait; passes when a's line is let past the bounds);
// false when done closed first.
func (a *account) take(n int, done <-chan struct{}, held, passes func(mine, all int)) bool {
	b := a.b
	told := false
	var watched *account // the line passing that a waits on, its length, and when a passes instead if it stays so
	var seen int
	var deadline time.Time
	for {
		b.mu.Lock()
		mine := a.line + a.queued
		switch {
		case a.overrun && b.over == a:
		case mine+n <= b.share && b.others(a)+n <= b.limit:
		case a.queued == 0 && b.over == nil:
			// Nothing of a's will be written to make room: its line
			// passes, alone.
			b.pass(a)
			passes(mine+n, b.out)
		case a.queued == 0 && b.over.overrun && b.over == watched && b.over.line == seen && !time.Now().Before(deadline):
			// The line passing stopped growing (its agent stopped writing
			// in the middle of it): a's passes instead.
			b.pass(a)
			passes(mine+n, b.out)
		default:
			a.waiting, a.waited = true, true
			all, freed := b.out, b.freed
			var stalled <-chan time.Time
			if holder := b.over; a.queued == 0 && holder.overrun {
				if holder != watched || holder.line != seen {
					watched, seen, deadline = holder, holder.line, time.Now().Add(b.stall)
				}
				stalled = time.After(time.Until(deadline))
			}
			b.mu.Unlock()
			if !told {
				held(mine, all)
				told = true
			}
			select {
			case <-freed:
			case <-stalled:
			case <-done:
				b.mu.Lock()
				a.waiting = false
				b.mu.Unlock()
				return false
			}
			continue
		}
		a.line += n
		b.out += n
		a.waiting = false
		b.mu.Unlock()
		return true
	}
}

// pass lets a's line past the bounds: a's alone, until it is written or
// a stops writing it (then it waits for its turn to go on).
func (b *budget) pass(a *account) {
	b.over = a
	a.overrun = true
	b.overruns[a] = true
}

// others is what the children hold, as a sees it: less what the children
// whose lines pass (or passed) the bounds hold, unless a is one of them;
// a child that stops writing in the middle of such a line holds up no
// other child's lines.
func (b *budget) others(a *account) int {
	out := b.out
	for x := range b.overruns {
		if x != a && x != b.over {
			out -= x.line + x.queued
		}
	}
	if b.over != nil && b.over != a {
		out -= b.over.line + b.over.queued
	}
	return out
}

// queue hands the line read to the loop: its bytes (which it returns)
// count until given back.
func (a *account) queue() int {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	n := a.line
	a.line = 0
	a.queued += n
	a.overrun = false // a line past the bounds stays a's (over) until written
	delete(a.b.overruns, a)
	return n
}

// drop gives back what a line not handed to the loop had taken (one over
// the line limit, a blank one, the last one cut by the child's end).
func (a *account) drop() {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out -= a.line
	a.line = 0
	a.overrun = false
	delete(b.overruns, a)
	b.release(a)
}

// give counts n bytes of a's handed to the loop as written (or dropped),
// and wakes the readers waiting for room.
func (a *account) give(n int) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	a.queued -= n
	b.out -= n
	b.release(a)
}

// release lets another child's line pass the bounds once a's has been
// written, and wakes every reader that waits for room.
func (b *budget) release(a *account) {
	if b.over == a && !a.overrun && a.queued == 0 {
		b.over = nil
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// clientBound reports whether a's reader has waited on the client since it
// was last asked: a child's output still unread after its end is the
// client's to take, not a pipe held open by something else.
func (a *account) clientBound() bool {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	bound := a.waiting || a.waited
	a.waited = false
	return bound
}
