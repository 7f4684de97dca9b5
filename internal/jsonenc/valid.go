// valid.go checks that bytes are one JSON value, as json.Valid does, in a
// tight loop rather than encoding/json's byte-at-a-time state machine:
// every line the agent reads is checked before anything else reads it.
package jsonenc

// maxDepth is encoding/json's limit on nesting.
const maxDepth = 10000

// Valid reports whether b is exactly one JSON value (surrounding white space
// allowed), with json.Valid's answer for any input.
func Valid(b []byte) bool {
	v := validator{b: b}
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(b)
}

type validator struct {
	b []byte
	i int
}

func (v *validator) space() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func (v *validator) value(depth int) bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '"':
		return v.str()
	case c == '{':
		return depth < maxDepth && v.object(depth+1)
	case c == '[':
		return depth < maxDepth && v.array(depth+1)
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	}
	return false
}

func (v *validator) object(depth int) bool {
	return v.list('}', func() bool {
		if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
			return false
		}
		v.space()
		if v.i >= len(v.b) || v.b[v.i] != ':' {
			return false
		}
		v.i++
		v.space()
		return v.value(depth)
	})
}

func (v *validator) array(depth int) bool {
	return v.list(']', func() bool { return v.value(depth) })
}

// list checks what follows an object's or an array's opening bracket:
// items read by item, separated by commas, up to close.
func (v *validator) list(close byte, item func() bool) bool {
	v.i++ // the opening bracket
	v.space()
	if v.i < len(v.b) && v.b[v.i] == close {
		v.i++
		return true
	}
	for {
		if !item() {
			return false
		}
		v.space()
		if v.i >= len(v.b) {
			return false
		}
		switch v.b[v.i] {
		case ',':
			v.i++
			v.space()
		case close:
			v.i++
			return true
		default:
			return false
		}
	}
}

// str checks a string: no control characters, only JSON's escapes.
func (v *validator) str() bool {
	for v.i++; v.i < len(v.b); v.i++ {
		switch c := v.b[v.i]; {
		case c == '"':
			v.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			v.i++
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if v.i+4 >= len(v.b) {
					return false
				}
				for _, h := range v.b[v.i+1 : v.i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				v.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func (v *validator) literal(lit string) bool {
	if len(v.b)-v.i < len(lit) || string(v.b[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

// number checks -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number() bool {
	if v.b[v.i] == '-' {
		v.i++
	}
	switch {
	case v.i < len(v.b) && v.b[v.i] == '0':
		v.i++
	case v.digits() == 0:
		return false
	}
	if v.i < len(v.b) && v.b[v.i] == '.' {
		v.i++
		if v.digits() == 0 {
			return false
		}
	}
	if v.i < len(v.b) && (v.b[v.i] == 'e' || v.b[v.i] == 'E') {
		v.i++
		if v.i < len(v.b) && (v.b[v.i] == '+' || v.b[v.i] == '-') {
			v.i++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}

func (v *validator) digits() int {
	start := v.i
	for v.i < len(v.b) && v.b[v.i] >= '0' && v.b[v.i] <= '9' {
		v.i++
	}
	return v.i - start
}

// AppendCompact appends the valid JSON b without the white space outside
// its strings, as json.Compact writes it.
func AppendCompact(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			end := scanString(b, i)
			dst = append(dst, b[i:end]...)
			i = end - 1
		case ' ', '\t', '\n', '\r':
		default:
			dst = append(dst, b[i])
		}
	}
	return dst
}

// IsCompact reports whether the valid JSON b has no white space outside
// its strings: whether json.Compact would leave it as it is.
func IsCompact(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = scanString(b, i) - 1
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}
