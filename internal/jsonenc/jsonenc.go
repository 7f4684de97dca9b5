// Package jsonenc writes JSON as encoding/json does with HTML escaping off:
// Marshal for everything, and AppendString for the few hand-written writers
// on the per-chunk hot path (internal/acp's chunk and tool call updates),
// which must write the same bytes. It reads no JSON: every message is
// decoded once, by encoding/json.
package jsonenc

import (
	"fmt"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, byte for byte as encoding/json
// writes it with HTML escaping off: invalid UTF-8 becomes U+FFFD, \b and
// \f keep their short escapes, U+2028 and U+2029 are escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = fmt.Appendf(b, `\u%04x`, r)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Marshal encodes v as compact JSON without escaping <, > and &, which
// encoding/json does by default for HTML's sake. It is
// github.com/segmentio/encoding's encoder (already in the binary through
// the MCP SDK): the same bytes as encoding/json, in about half the time.
func Marshal(v any) ([]byte, error) {
	return segjson.Append(nil, v, segjson.SortMapKeys)
}

// AppendTrusted appends v's encoding to b as Marshal does, writing its
// json.RawMessage fields as they are, without checking or compacting them:
// they must be compact JSON (what acpbridge makes itself is).
func AppendTrusted(b []byte, v any) ([]byte, error) {
	return segjson.Append(b, v, segjson.SortMapKeys|segjson.TrustRawMessage)
}

// CharLen is the size of the character at s[i] (its bytes in s) and of
// what AppendString writes for it.
func CharLen(s string, i int) (size, written int) {
	c := s[i]
	if c < utf8.RuneSelf {
		switch {
		case c >= 0x20 && c != '"' && c != '\\':
			return 1, 1
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			return 1, 2
		}
		return 1, 6
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
		return size, 6
	}
	return size, size
}

// StringLen is len(AppendString(nil, s)) without writing it.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		size, w := CharLen(s, i)
		i += size
		n += w
	}
	return n
}
