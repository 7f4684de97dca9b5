// shellword_test.go checks that a quoted word reaches the shell as it was.

package shellword

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, "/w/src", Quote("/w/src"), "a plain word is left as typed")
	assert.Equal(t, "''", Quote(""), "an empty word stays a word")
	words := []string{"a b", "it's", `"$HOME"`, "*.go", "a;rm -rf x", "`id`", "x\ny", "{a,b}", "!1", "~"}
	for _, w := range words {
		assert.NotEqual(t, w, Quote(w), "%q needs quoting", w)
	}
	if runtime.GOOS == "windows" {
		return
	}
	for _, w := range words {
		out, err := exec.Command("sh", "-c", "printf '%s' "+Quote(w)).Output()
		require.NoError(t, err)
		assert.Equal(t, w, string(out), "the shell reads %q back as it was", w)
	}
}
