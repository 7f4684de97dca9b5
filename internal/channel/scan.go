// scan.go reads the top level of a message in one pass that decodes
// nothing: the members' raw values are handed on (a response's result to
// the request that waits for it) and decoded once, by whoever uses them.
package channel

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
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
		key := string(line[i+1 : end-1])
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
