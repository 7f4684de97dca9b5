// scan.go reads JSON that is known to be valid without checking it again:
// the top level of an object in one pass that decodes nothing (its
// members' raw values are handed on and decoded once, by whoever uses
// them), and a string.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"iter"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Members are the top-level members of a JSON object, in order, with their
// values as raw JSON. A key that appears twice counts as its last value, as
// encoding/json has it.
type Members []Member

// Member is one member of an object.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Get returns the value of key.
func (ms Members) Get(key string) (json.RawMessage, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Key == key {
			return ms[i].Value, true
		}
	}
	return nil, false
}

// Scan reads the members of the JSON object line, which must be valid
// JSON; ok is false when it is another kind of value.
func Scan(line []byte) (ms Members, ok bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	ms = make(Members, 0, 6)
	for i = skipSpace(line, i+1); i < len(line) && line[i] == '"'; {
		end := scanString(line, i)
		key := keyString(line[i+1 : end-1])
		if bytes.IndexByte(line[i:end], '\\') >= 0 || !utf8.ValidString(key) {
			json.Unmarshal(line[i:end], &key) // escapes or bad UTF-8 in a key: rare
		}
		i = skipSpace(line, end)
		if i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipSpace(line, i+1)
		vend := scanValue(line, i)
		ms = append(ms, Member{key, line[i:vend]})
		if i = skipSpace(line, vend); i < len(line) && line[i] == ',' {
			i = skipSpace(line, i+1)
		}
	}
	return ms, i < len(line) && line[i] == '}'
}

// Elements are the elements of the JSON array raw, which must be valid
// JSON, in order, as raw JSON; ok is false when raw is another kind of
// value. Each is a slice of raw.
func Elements(raw []byte) (seq iter.Seq[json.RawMessage], ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	return func(yield func(json.RawMessage) bool) {
		for j := skipSpace(raw, i+1); j < len(raw) && raw[j] != ']'; {
			end := scanValue(raw, j)
			if !yield(raw[j:end]) {
				return
			}
			if j = skipSpace(raw, end); j < len(raw) && raw[j] == ',' {
				j = skipSpace(raw, j+1)
			}
		}
	}, true
}

// keyString is the key b as a string, without allocating for the keys
// of the protocol's messages and replay's entries, which every line has.
func keyString(b []byte) string {
	switch string(b) { // compared in place
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "params":
		return "params"
	case "result":
		return "result"
	case "error":
		return "error"
	case "content":
		return "content"
	case "sessionId":
		return "sessionId"
	case "chunks":
		return "chunks"
	case "text":
		return "text"
	case "toolCall":
		return "toolCall"
	case "name":
		return "name"
	case "input":
		return "input"
	case "expect":
		return "expect"
	case "outcome":
		return "outcome"
	}
	return string(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index just past the string that starts at i.
func scanString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// scanValue returns the index just past the value that starts at i.
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = scanString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[i])) {
		i++
	}
	return i
}

// ReadString decodes raw, a JSON string token (quotes included) that is
// known to be valid JSON, as encoding/json does: escapes resolved, invalid
// UTF-8 and lone surrogates as U+FFFD. ok is false when raw is not a
// string.
func ReadString(raw []byte) (s string, ok bool) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), raw[len(raw)-1] == '"'
	}
	b, ok := AppendStringValue(make([]byte, 0, len(raw)), raw)
	return unsafe.String(unsafe.SliceData(b), len(b)), ok // b is ours alone
}

// AppendStringValue appends the text of raw, a valid JSON string token, to
// b: ReadString without the string, for a caller that reuses its buffer.
func AppendStringValue(b, raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return b, false
	}
	body := raw[1 : len(raw)-1]
	for len(body) > 0 {
		// A run up to the next escape is copied whole when it is valid UTF-8.
		run := body
		if j := bytes.IndexByte(body, '\\'); j >= 0 {
			run = body[:j]
		}
		if utf8.Valid(run) {
			b = append(b, run...)
		} else {
			for i := 0; i < len(run); {
				r, size := utf8.DecodeRune(run[i:])
				b = utf8.AppendRune(b, r) // U+FFFD for a bad byte, as encoding/json
				i += size
			}
		}
		body = body[len(run):]
		if len(body) >= 2 {
			var n int
			b, n = unescape(b, body)
			body = body[n:]
		} else {
			body = nil
		}
	}
	return b, true
}

// unescape appends the character of the escape at the start of e and
// returns how many bytes it took.
func unescape(b, e []byte) ([]byte, int) {
	switch e[1] {
	case 'b':
		return append(b, '\b'), 2
	case 'f':
		return append(b, '\f'), 2
	case 'n':
		return append(b, '\n'), 2
	case 'r':
		return append(b, '\r'), 2
	case 't':
		return append(b, '\t'), 2
	case 'u':
		r := hex4(e[2:])
		if utf16.IsSurrogate(r) {
			if len(e) >= 12 && e[6] == '\\' && e[7] == 'u' {
				if pair := utf16.DecodeRune(r, hex4(e[8:])); pair != utf8.RuneError {
					return utf8.AppendRune(b, pair), 12
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(b, r), 6
	}
	return append(b, e[1]), 2 // \" \\ \/
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
