// jsonenc_test.go checks AppendString byte for byte against encoding/json.

package jsonenc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" and \\ backslash", "tab\tnew\nline\r", "\x00\x01\x1f\x7f",
		"<html> & 'amp'", "é 日本語 🙂", "\u2028\u2029", "bad \xff\xfe utf-8", "\b\f", "trailing \\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(AppendString(nil, s)), "%q", s)
	})
}

// StringLen is the length AppendString writes, for every kind of character.
func TestStringLen(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c\n\r\t\b\f\x01\x1f", "é—😀", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x80"} {
		if got, want := StringLen(s), len(AppendString(nil, s)); got != want {
			t.Errorf("StringLen(%q) = %d, want %d", s, got, want)
		}
	}
}
