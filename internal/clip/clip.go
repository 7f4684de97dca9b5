// Package clip cuts strings to a size without splitting a character: the
// one truncation helper of acpbridge.
package clip

import "unicode/utf8"

// Cut returns s cut to at most n bytes, on a character boundary, so that
// the result is valid UTF-8 when s is and is a prefix of s.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Marked is Cut with a mark where something was cut, for a message or a
// title.
func Marked(s string, n int) string {
	if c := Cut(s, n); len(c) < len(s) {
		return c + "…"
	}
	return s
}
