// clip_test.go checks that Cut never splits a character and Marked marks a cut.

package clip

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestCut(t *testing.T) {
	assert.Equal(t, "abc", Cut("abc", 5))
	assert.Equal(t, "ab", Cut("abc", 2))
	assert.Equal(t, "a", Cut("aé", 2), "é is two bytes: not split")
	assert.Equal(t, "", Cut("é", 1))
	assert.Equal(t, "ab…", Marked("abc", 2))
	assert.Equal(t, "abc", Marked("abc", 3))
	for n := range 12 {
		s := Cut("日本語のテキスト", n)
		assert.True(t, utf8.ValidString(s), "n=%d", n)
		assert.LessOrEqual(t, len(s), n)
	}
}
