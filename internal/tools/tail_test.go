// tail_test.go checks the tail a local command's output keeps.

package tools

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify that the ring keeps exactly the last limit bytes, whatever the
// sizes of the writes, and says when it dropped some.
func TestTailBuffer_keepsTheTail(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for range 200 {
		limit := 1 + r.IntN(50)
		b := &tailBuffer{limit: limit}
		var all strings.Builder
		for range r.IntN(30) {
			p := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(2*limit)) + string(rune('A'+r.IntN(26)))
			b.Write([]byte(p))
			all.WriteString(p)
		}
		got, dropped := b.String()
		want := all.String()
		if len(want) > limit {
			want = want[len(want)-limit:]
		}
		assert.Equal(t, want, got)
		assert.Equal(t, all.Len() > limit, dropped)
	}
}
