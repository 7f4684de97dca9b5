// backlog_test.go checks the bound on a child's output read and not yet
// written.

package fanout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify that a reader takes one line whatever its length, waits while
// more would pass the bound, and is let go when the loop gives back, or
// when the router ends; and that watch sees a reader held by the client.
func TestBacklog(t *testing.T) {
	b := newBacklog()
	never := make(chan struct{})
	assert.True(t, b.take(3*backlogBytes, never, func(int) { t.Error("a first line waits") }))
	assert.False(t, b.clientBound(), "not waited yet")

	held := make(chan int, 1)
	took := make(chan bool)
	go func() { took <- b.take(10, never, func(out int) { held <- out }) }()
	assert.Equal(t, 3*backlogBytes, <-held, "told what is out when it must wait")
	assert.True(t, b.clientBound(), "waiting on the client")
	assert.True(t, b.clientBound(), "still waiting")
	b.give(3 * backlogBytes)
	assert.True(t, <-took, "let go once the line is written")
	assert.False(t, b.clientBound(), "looked at since it waited, and no longer waiting")

	assert.True(t, b.take(backlogBytes-10, never, func(int) { t.Error("room for it") }))
	done := make(chan struct{})
	go func() { took <- b.take(1, done, func(int) {}) }()
	close(done)
	assert.False(t, <-took, "the router ended")
}
