// budget.go holds the bound on what the router has read of its children
// and not yet written to the client: one budget for all of them, which
// stops reading children whose client reads slowly.

package fanout

import "sync"

// The budget's bounds: what all children together may have read and not
// yet written, and what one child may (its share: no child takes it all,
// so another always finds room). Past them a child's reader waits, and
// the child's own writes block on its pipe. One line always passes,
// whatever its length: when a child's reader waits in the middle of a line
// with nothing of its own left to write, it may finish that line past the
// bounds, one such child at a time, until the line is written; the others
// share the budget meanwhile as if it held nothing (a child that stops in
// the middle of such a line holds up only lines longer than a share). A
// slow client costs the router at most budgetBytes and one line, however
// many threads it has.
const (
	budgetBytes = 2 << 20
	shareBytes  = 1 << 20
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
	out   int           // all children's bytes read and not yet written
	over  *account      // the child finishing a line past the bounds, until that line is written, or nil
	freed chan struct{} // closed (and replaced) when bytes are given back
}

// account is one child's part of the budget; its reader is the only one
// to take from it.
type account struct {
	b       *budget
	line    int  // bytes of the line being read
	queued  int  // bytes of whole lines handed to the loop, not yet written
	overrun bool // the line being read passes the bounds (b.over is this account)
	waiting bool // the reader waits for room now
	waited  bool // it has waited since clientBound last looked
}

func newBudget(limit, share int) *budget {
	return &budget{limit: limit, share: share, freed: make(chan struct{})}
}

// open is a new child's account.
func (b *budget) open() *account { return &account{b: b} }

// held is what all children hold of the router's: bytes read, not written.
func (b *budget) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out
}

// take counts n more bytes of the line a's reader is reading, first
// waiting for room (held is called once, with what a and all children
// hold, when it must wait; passes when a's line is let past the bounds);
// false when done closed first.
func (a *account) take(n int, done <-chan struct{}, held, passes func(mine, all int)) bool {
	b := a.b
	told := false
	for {
		b.mu.Lock()
		mine := a.line + a.queued
		switch {
		case a.overrun:
		case mine+n <= b.share && b.others(a)+n <= b.limit:
		case a.queued == 0 && b.over == nil:
			// Nothing of a's will be written to make room: its line
			// passes, alone.
			a.overrun, b.over = true, a
			passes(mine+n, b.out)
		default:
			a.waiting, a.waited = true, true
			all, freed := b.out, b.freed
			b.mu.Unlock()
			if !told {
				held(mine, all)
				told = true
			}
			select {
			case <-freed:
				continue
			case <-done:
				b.mu.Lock()
				a.waiting = false
				b.mu.Unlock()
				return false
			}
		}
		a.line += n
		b.out += n
		a.waiting = false
		b.mu.Unlock()
		return true
	}
}

// others is what the children hold but the one finishing a line past the
// bounds, unless that is a: a child that stops writing in the middle of
// such a line holds up no other child's lines within their share.
func (b *budget) others(a *account) int {
	if b.over == nil || b.over == a {
		return b.out
	}
	return b.out - b.over.line - b.over.queued
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
