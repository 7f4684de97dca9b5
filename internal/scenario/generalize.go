// generalize.go turns the lines an agent and a client really sent into
// scenario lines: the values that change from run to run (ids, the
// workspace's path, times) become variables, and a line that an old
// scenario already had keeps the variables it had there.

package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// idKeys are the members whose string values are ids the agent makes,
// with the name their variables get.
var idKeys = map[string]string{
	"sessionId":  "SESSION",
	"messageId":  "MSG",
	"toolCallId": "CALL",
	"terminalId": "TERM",
}

// autoName makes the next variable name for a prefix: SESSION, SESSION_2,
// ...; MSG_1, MSG_2, ... for the others.
func (v *vars) autoName(prefix string) string {
	for {
		v.count[prefix]++
		n := v.count[prefix]
		name := fmt.Sprintf("%s_%d", prefix, n)
		if prefix == "SESSION" && n == 1 {
			name = prefix
		}
		if _, taken := v.vals[name]; !taken {
			return name
		}
	}
}

// isAuto reports whether a variable is one generalize makes or one of the
// run's directories: values worth turning back into variables wherever
// they appear.
func isAuto(name string) bool {
	for _, p := range []string{"SESSION", "MSG_", "CALL_", "TERM_", "REQ_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return name == "CWD" || name == "STATE" || name == "DIR"
}

// generalize rewrites one JSON line as scenario text. old is the template
// the old scenario had for it (nil when none); its variables are kept
// where their values still match. Unbound ids get new variables.
// fromAgent says whose line it is: only the agent's requests get new
// $REQ_n ids (the client's ids are its own, written as they are).
func (v *vars) generalize(raw []byte, old any, fromAgent bool) (string, error) {
	top, err := decode(raw)
	if err != nil {
		return "", err
	}
	m, _ := top.(map[string]any)
	_, hasMethod := m["method"]
	_, hasID := m["id"]
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	g := generalizer{v: v, fromAgent: fromAgent, request: fromAgent && hasMethod && hasID, response: !fromAgent && !hasMethod && hasID}
	if err := g.value(dec, &out, old, "", 0); err != nil {
		return "", err
	}
	return out.String(), nil
}

type generalizer struct {
	v                 *vars
	fromAgent         bool // ids only the agent makes get new variables
	request, response bool // the line is a request, or a response
}

func (g *generalizer) value(dec *json.Decoder, out *bytes.Buffer, old any, key string, depth int) error {
	if o, ok := old.(string); ok && isVarText(o) && dec.More() {
		return g.wholeValue(dec, out, o, key, depth)
	}
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '[' {
			return g.array(dec, out, old, key, depth)
		}
		return g.object(dec, out, old, depth)
	default:
		out.Write(g.scalar(t, old, key, depth))
		return nil
	}
}

// wholeValue writes the next value where the old line had the variable o:
// a variable may stand for a whole object or array, and is kept when it
// still matches.
func (g *generalizer) wholeValue(dec *json.Decoder, out *bytes.Buffer, o string, key string, depth int) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	x, err := decode(raw)
	if err != nil {
		return err
	}
	name, _ := varName(o)
	if b, bound := g.v.get(name); o == "$ANY" || bound && equal(b, x) {
		out.Write(encode(o))
		return nil
	}
	sub := json.NewDecoder(bytes.NewReader(raw))
	sub.UseNumber()
	return g.value(sub, out, nil, key, depth)
}

// array writes an array whose '[' has been read, element by element
// against the old line's.
func (g *generalizer) array(dec *json.Decoder, out *bytes.Buffer, old any, key string, depth int) error {
	oldArr, _ := old.([]any)
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		var o any
		if i < len(oldArr) {
			o = oldArr[i]
		}
		if err := g.value(dec, out, o, key, depth+1); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	out.WriteByte(']')
	return err
}

// object writes an object's members, each generalised against the old
// line's member of that name; where the old object had "$REST", a member it
// did not name is left to it.
func (g *generalizer) object(dec *json.Decoder, out *bytes.Buffer, old any, depth int) error {
	oldMap, _ := old.(map[string]any)
	rest, hasRest := oldMap["$REST"]
	out.WriteByte('{')
	n := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := kt.(string)
		if _, named := oldMap[k]; hasRest && !named {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		out.Write(encode(strings.ReplaceAll(k, "$", "$$")))
		out.WriteByte(':')
		if err := g.value(dec, out, oldMap[k], k, depth+1); err != nil {
			return err
		}
	}
	if hasRest {
		if n > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`"$REST":`)
		out.Write(encode(rest))
	}
	_, err := dec.Token()
	out.WriteByte('}')
	return err
}

func isVarText(s string) bool {
	_, ok := varName(s)
	return ok
}

// scalar writes a string, number, bool or null.
func (g *generalizer) scalar(x any, old any, key string, depth int) []byte {
	v := g.v
	if o, ok := old.(string); ok && g.stillMatches(o, x) {
		return encode(o)
	}
	if key == "id" && depth == 1 && (g.request || g.response) {
		return g.messageID(x)
	}
	s, isStr := x.(string)
	if !isStr {
		return encode(x)
	}
	if strings.HasSuffix(key, "At") {
		if _, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return encode("$ANY")
		}
	}
	if prefix, isID := idKeys[key]; isID && s != "" {
		if name := v.boundTo(s, ""); name != "" {
			return encode("$" + name)
		}
		if !g.fromAgent {
			v.literal[s] = true // the client's own: it stays as it is
		}
		if g.fromAgent && !v.literal[s] {
			name := v.autoName(prefix)
			v.set(name, s)
			return encode("$" + name)
		}
	}
	if name := v.boundTo(s, ""); name != "" {
		return encode("$" + name)
	}
	return encode(v.contract(s))
}

// stillMatches reports whether the old line's template o ($ANY, a bound
// variable, text with variables) still matches x, and so stays.
func (g *generalizer) stillMatches(o string, x any) bool {
	if o == "$ANY" {
		return true
	}
	if name, isVar := varName(o); isVar {
		b, bound := g.v.get(name)
		return bound && equal(b, x)
	}
	s, err := g.v.interpolate(o)
	return err == nil && x == any(s)
}

// messageID writes a request's or a response's id: the variable bound to
// it, or a new $REQ_n for a request's.
func (g *generalizer) messageID(x any) []byte {
	if name := g.v.boundTo(x, "REQ_"); name != "" {
		return encode("$" + name)
	}
	if g.request {
		name := g.v.autoName("REQ")
		g.v.set(name, x)
		return encode("$" + name)
	}
	return encode(x)
}

// boundTo returns the variable (whose name starts with prefix) bound to x.
func (v *vars) boundTo(x any, prefix string) string {
	for _, name := range v.order {
		if strings.HasPrefix(name, prefix) && (prefix != "" || isAuto(name)) && equal(v.vals[name], x) {
			return name
		}
	}
	return ""
}

// contract escapes the $ of a literal string and writes the values of the
// run's directories and of generated ids in it as variables.
func (v *vars) contract(s string) string {
	s = strings.ReplaceAll(s, "$", "$$")
	type pair struct{ value, name string }
	var pairs []pair
	for _, name := range v.order {
		if str, ok := v.vals[name].(string); ok && isAuto(name) && len(str) >= 4 {
			pairs = append(pairs, pair{str, name})
		}
	}
	// Longest first: $CWD lies under $DIR.
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.value) - len(a.value) })
	for _, p := range pairs {
		s = replaceWord(s, p.value, "$"+p.name)
	}
	return s
}

// replaceWord replaces old by new in s where old is not followed by a
// letter, digit or _ (so that msg_1 is not found in msg_10), and where the
// next byte could not continue new's name.
func replaceWord(s, old, new string) string {
	if !strings.Contains(s, old) {
		return s
	}
	var sb strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			sb.WriteString(s)
			return sb.String()
		}
		end := i + len(old)
		if end < len(s) && (isNameByte(s[end], false) || s[end] >= 'a' && s[end] <= 'z') {
			sb.WriteString(s[:end])
			s = s[end:]
			continue
		}
		sb.WriteString(s[:i])
		sb.WriteString(new)
		s = s[end:]
	}
}
