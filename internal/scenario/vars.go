// vars.go holds the variables of a scenario: binding them while matching
// the agent's lines, putting their values into the client's lines, and
// turning the values of a recorded or updated line back into variables.

package scenario

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"acpbridge/internal/clip"
	"acpbridge/internal/jsonenc"
)

// vars are the bindings of one run, in the order they were made.
type vars struct {
	vals    map[string]any
	order   []string
	pending map[string]any  // bound by the line being matched
	count   map[string]int  // auto-named variables made, by prefix
	literal map[string]bool // ids the client wrote itself (not variables)
}

func newVars() *vars {
	return &vars{vals: map[string]any{}, pending: map[string]any{}, count: map[string]int{}, literal: map[string]bool{}}
}

func (v *vars) get(name string) (any, bool) {
	if x, ok := v.pending[name]; ok {
		return x, true
	}
	x, ok := v.vals[name]
	return x, ok
}

func (v *vars) set(name string, x any) {
	if _, ok := v.vals[name]; !ok {
		v.order = append(v.order, name)
	}
	v.vals[name] = x
}

// commit keeps what the line being matched bound; drop forgets it.
func (v *vars) commit() {
	for _, name := range slices.Sorted(maps.Keys(v.pending)) {
		v.set(name, v.pending[name])
	}
	clear(v.pending)
}

func (v *vars) drop() { clear(v.pending) }

// String lists the bindings, for a failure report.
func (v *vars) String() string {
	var sb strings.Builder
	for _, name := range v.order {
		fmt.Fprintf(&sb, " $%s=%s", name, clip.Marked(string(encode(v.vals[name])), 80))
	}
	if sb.Len() == 0 {
		return " (none)"
	}
	return sb.String()
}

// varName returns NAME when s is exactly "$NAME".
func varName(s string) (string, bool) {
	if len(s) < 2 || s[0] != '$' {
		return "", false
	}
	for i := 1; i < len(s); i++ {
		if !isNameByte(s[i], i == 1) {
			return "", false
		}
	}
	return s[1:], true
}

func isNameByte(c byte, first bool) bool {
	return c >= 'A' && c <= 'Z' || c == '_' || !first && c >= '0' && c <= '9'
}

// checkVariables reports a $ in a string of v that is neither a variable
// nor $$.
func checkVariables(v any) error {
	switch x := v.(type) {
	case string:
		return checkDollars(x)
	case map[string]any:
		for k, e := range x {
			if k != "$REST" {
				if err := checkVariables(k); err != nil {
					return err
				}
			}
			if err := checkVariables(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkVariables(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDollars checks that every $ in x starts a variable or is $$.
func checkDollars(x string) error {
	for i := 0; i < len(x); i++ {
		if x[i] != '$' {
			continue
		}
		if i+1 < len(x) && x[i+1] == '$' {
			i++
			continue
		}
		if i+1 >= len(x) || !isNameByte(x[i+1], true) {
			return fmt.Errorf("%q: a $ starts a variable ($NAME, capital letters); write $$ for a $ itself", clip.Marked(x, 60))
		}
	}
	return nil
}

// interpolate replaces $NAME in s by the text of its value and $$ by $.
func (v *vars) interpolate(s string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			sb.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			sb.WriteByte('$')
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isNameByte(s[j], j == i+1) {
			j++
		}
		if err := v.writeValue(&sb, s[i+1:j], s); err != nil {
			return "", err
		}
		i = j - 1
	}
	return sb.String(), nil
}

// writeValue writes the value of the variable name, used in s, as text: a
// string as it is, another value as JSON.
func (v *vars) writeValue(sb *strings.Builder, name, s string) error {
	x, ok := v.get(name)
	if !ok || name == "ANY" {
		return fmt.Errorf("the variable $%s is used in %q before any < line bound it", name, clip.Marked(s, 60))
	}
	if str, isStr := x.(string); isStr {
		sb.WriteString(str)
	} else {
		sb.Write(encode(x))
	}
	return nil
}

// encode writes x as compact JSON, <, > and & unescaped.
func encode(x any) []byte {
	b, err := jsonenc.Marshal(x)
	if err != nil {
		return []byte(fmt.Sprintf("%q", fmt.Sprint(x)))
	}
	return b
}

// substitute puts the values of the variables into a client line, leaving
// the rest of its bytes as they are.
func (v *vars) substitute(text string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(text); {
		if text[i] != '"' {
			out.WriteByte(text[i])
			i++
			continue
		}
		j := stringEnd(text, i)
		raw := text[i:j]
		i = j
		if !strings.Contains(raw, "$") {
			out.WriteString(raw)
			continue
		}
		b, err := v.substituteString(raw)
		if err != nil {
			return "", err
		}
		out.Write(b)
	}
	return out.String(), nil
}

// substituteString is the JSON string token raw with its variables put
// in: a string that is one variable becomes its value, whatever kind.
func (v *vars) substituteString(raw string) ([]byte, error) {
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return []byte(raw), nil
	}
	if name, ok := varName(s); ok {
		x, bound := v.get(name)
		if !bound || name == "ANY" || name == "REST" {
			return nil, fmt.Errorf("the variable $%s is sent before any < line bound it", name)
		}
		return encode(x), nil
	}
	t, err := v.interpolate(s)
	if err != nil {
		return nil, err
	}
	return encode(t), nil
}

// stringEnd returns the index just past the JSON string that starts at i.
func stringEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(s)
}

// mismatch says where an agent line differs from the expected one.
type mismatch struct {
	path      string
	want, got string
	err       error // a fault of the scenario, not of the agent
}

// match compares an agent value with a template, binding variables into
// v.pending. It returns nil when they match.
func (v *vars) match(path string, want, got any) *mismatch {
	differ := func() *mismatch { return &mismatch{path: path, want: string(encode(want)), got: string(encode(got))} }
	switch w := want.(type) {
	case string:
		return v.matchString(path, w, got)
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return differ()
		}
		return v.matchObject(path, w, g)
	case []any:
		g, ok := got.([]any)
		if !ok {
			return differ()
		}
		return v.matchArray(path, w, g)
	default:
		if !equal(want, got) {
			return differ()
		}
		return nil
	}
}

// matchString compares an agent value with a template string: $ANY, a
// variable (bound now, or compared with its value), or text in which
// variables are substituted.
func (v *vars) matchString(path, w string, got any) *mismatch {
	if w == "$ANY" {
		return nil
	}
	if name, ok := varName(w); ok {
		if x, bound := v.get(name); bound {
			if !equal(x, got) {
				return &mismatch{path: path, want: fmt.Sprintf("%s (= %s)", w, encode(x)), got: string(encode(got))}
			}
			return nil
		}
		v.pending[name] = got
		return nil
	}
	s, err := v.interpolate(w)
	if err != nil {
		return &mismatch{path: path, err: err}
	}
	if g, ok := got.(string); !ok || g != s {
		return &mismatch{path: path, want: string(encode(s)), got: string(encode(got))}
	}
	return nil
}

// matchArray compares an agent array with an expected one, element by
// element, then their lengths.
func (v *vars) matchArray(path string, w, g []any) *mismatch {
	for i := range min(len(w), len(g)) {
		if m := v.match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); m != nil {
			return m
		}
	}
	if len(w) != len(g) {
		return &mismatch{path: path, want: fmt.Sprintf("%d elements", len(w)), got: fmt.Sprintf("%d elements", len(g))}
	}
	return nil
}

// matchObject compares an agent object with an expected one: every member
// the template names, then (without "$REST") no member it does not.
func (v *vars) matchObject(path string, w, g map[string]any) *mismatch {
	for _, k := range keyOrder(w) {
		if k == "$REST" {
			continue
		}
		gv, ok := g[k]
		if !ok {
			return &mismatch{path: path + "." + k, want: string(encode(w[k])), got: "(missing)"}
		}
		if m := v.match(path+"."+k, w[k], gv); m != nil {
			return m
		}
	}
	if _, rest := w["$REST"]; !rest {
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				return &mismatch{path: path + "." + k, want: "(absent)", got: string(encode(g[k]))}
			}
		}
	}
	return nil
}

// leadKeys are compared first, so that a line of another kind is reported
// as that, not as a difference deep inside it.
var leadKeys = []string{"method", "id", "sessionUpdate", "type", "status"}

// keyOrder lists an object's keys, the lead keys first, then sorted.
func keyOrder(m map[string]any) []string {
	var keys []string
	for _, k := range leadKeys {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(leadKeys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// equal compares two decoded JSON values; numbers compare by value.
func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, e1 := x.Float64()
		fy, e2 := y.Float64()
		return e1 == nil && e2 == nil && fx == fy
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && maps.EqualFunc(x, y, equal)
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, equal)
	default:
		return a == b
	}
}

// bindingsText is v's bindings, one NAME JSON a line, for a recording's
// record/bindings section.
func (v *vars) bindingsText() string {
	var sb strings.Builder
	for _, name := range v.order {
		fmt.Fprintf(&sb, "%s %s\n", name, encode(v.vals[name]))
	}
	return sb.String()
}
