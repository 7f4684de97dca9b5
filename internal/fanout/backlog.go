// backlog.go holds the bound on what the router has read of a child and
// not yet written to the client, which stops reading a child whose client
// reads slowly.

package fanout

import "sync"

// backlogBytes is how much of a child's output may be read and not yet
// written to the client; past it, the child's reader waits (one line always
// passes, whatever its length), and the child's own writes block on its
// pipe. A slow client costs the router at most this and two lines a child.
const backlogBytes = 1 << 20

// backlog counts the bytes of a child's lines that its reader has handed
// the loop and the loop has not yet written. The reader takes, the loop
// gives back once a line's event has run (written, or dropped).
type backlog struct {
	mu      sync.Mutex
	out     int           // bytes handed to the loop and not yet written
	freed   chan struct{} // closed (and replaced) when out shrinks
	waiting bool          // the reader waits for room now
	waited  bool          // it has waited since clientBound last looked
}

func newBacklog() *backlog { return &backlog{freed: make(chan struct{})} }

// take counts n more bytes out, first waiting for room while others are
// out (held is called once, with what is out, when it must wait); false
// when done closed first.
func (b *backlog) take(n int, done <-chan struct{}, held func(out int)) bool {
	told := false
	for {
		b.mu.Lock()
		if b.out == 0 || b.out+n <= backlogBytes {
			b.out += n
			b.waiting = false
			b.mu.Unlock()
			return true
		}
		b.waiting, b.waited = true, true
		out, freed := b.out, b.freed
		b.mu.Unlock()
		if !told {
			held(out)
			told = true
		}
		select {
		case <-freed:
		case <-done:
			b.mu.Lock()
			b.waiting = false
			b.mu.Unlock()
			return false
		}
	}
}

// give counts n bytes written (or dropped) and wakes the reader.
func (b *backlog) give(n int) {
	b.mu.Lock()
	b.out -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// clientBound reports whether the reader has waited on the client since it
// was last asked: a child's output still unread after its end is the
// client's to take, not a pipe held open by something else.
func (b *backlog) clientBound() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bound := b.waiting || b.waited
	b.waited = false
	return bound
}
