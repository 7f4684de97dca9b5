// files_test.go checks read_file's fast path: a client's answer that is
// within every cap is returned as it is, exactly as reading it would.

package tools

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWhole_agreesWithReadLines(t *testing.T) {
	texts := []string{"", "a", "a\n", "a\nb", "a\nb\n", "\n\n\n", strings.Repeat("x", lineMaxBytes-1) + "\n",
		strings.Repeat("x", lineMaxBytes) + "\n", strings.Repeat("x", lineMaxBytes+1), strings.Repeat("l\n", readMaxLines),
		strings.Repeat("l\n", readMaxLines+1), strings.Repeat(strings.Repeat("y", 199)+"\n", readMaxBytes/200+1)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var sb strings.Builder
		for range r.IntN(40) {
			sb.WriteString(strings.Repeat("z", r.IntN(2100)))
			if r.IntN(5) > 0 {
				sb.WriteByte('\n')
			}
		}
		texts = append(texts, sb.String())
	}
	for _, text := range texts {
		for _, limit := range []int{1, 3, 30, readMaxLines, readMaxLines + 5} {
			w := window{first: 1, limit: limit}
			got, err := readLines(context.Background(), strings.NewReader(text), 1, w)
			require.NoError(t, err)
			if whole(text, min(limit, readMaxLines)) {
				assert.Equal(t, text, got, "whole said the %d bytes come back as they are (limit %d)", len(text), limit)
			}
		}
	}
	assert.True(t, whole("a\nb\n", 2))
	assert.False(t, whole("a\nb\nc", 2), "a third line: the file goes on")
}
