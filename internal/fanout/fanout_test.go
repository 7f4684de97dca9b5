// fanout_test.go checks the router's own pieces; the router with real
// children is tested on the built binary (the root's fanout_test.go).

package fanout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify that a child gets the router's flags less every spelling of
// --fanout.
func TestWithoutFanout(t *testing.T) {
	got := withoutFanout([]string{"--fanout", "--model", "replay:f", "-fanout", "--fanout=true", "-fanout=true", "--state-dir", "d"})
	assert.Equal(t, []string{"--model", "replay:f", "--state-dir", "d"}, got)
}
