// scan_test.go checks Scan against encoding/json's reading of the same
// objects.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func FuzzScan(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}], "d":"x\"y", "e":null,"f":true,"g":-1.5e3 } `,
		`{"jsonrpc":"2.0","id":3,"result":{"content":"a\nb"}}`, `{"a":1,"a":2}`, `{"k\u0065y":"v"}`, `[1]`, `"s"`, `{"a":{"b":[[]]},"c":"]"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var want map[string]json.RawMessage
		isObject := json.Unmarshal([]byte(s), &want) == nil && strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{") // not null
		ms, ok := Scan([]byte(s))
		require.Equal(t, isObject, ok, "%s", s)
		got := map[string]string{}
		for _, m := range ms {
			got[m.Key] = string(m.Value)
		}
		wantS := map[string]string{}
		for k, v := range want {
			wantS[k] = string(v)
		}
		if ok {
			assert.Equal(t, wantS, got, "%s", s)
		}
	})
}

// Elements reads the elements encoding/json reads, byte for byte.
func FuzzElements(f *testing.F) {
	for _, s := range []string{`[]`, ` [ 1 , "a]" , {"b":[2,3]} , [ ] , null , -2.5e1 ] `, `[[],[[]]]`, `{"a":[1]}`, `"["`, `[{"text":"x"},{"toolCall":{"id":"c","name":"n","input":{}}}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var want []json.RawMessage
		isArray := json.Unmarshal([]byte(s), &want) == nil && strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "[")
		seq, ok := Elements([]byte(s))
		require.Equal(t, isArray, ok, "%s", s)
		if !ok {
			return
		}
		var got []json.RawMessage
		for e := range seq {
			got = append(got, e)
		}
		require.Len(t, got, len(want), "%s", s)
		for i := range want {
			assert.Equal(t, string(want[i]), string(got[i]), "%s: element %d", s, i)
		}
	})
}

// IsCompact says whether json.Compact would change valid JSON, and
// AppendCompact writes what it writes.
func FuzzIsCompact(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a": 1}`, `[1,"x y",{"b":"\" "}]`, ` 1`, "[\n]", `"a\tb"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var buf bytes.Buffer
		require.NoError(t, json.Compact(&buf, []byte(s)))
		assert.Equal(t, buf.String() == s, IsCompact([]byte(s)), "%q", s)
		assert.Equal(t, buf.String(), string(AppendCompact(nil, []byte(s))), "%q", s)
	})
}

func FuzzReadString(f *testing.F) {
	for _, s := range []string{`""`, `"plain"`, `"a\nb\t\"q\"\\ \/"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`, `"\ud83d x"`, `"\udc00"`,
		`"\ud83d\u0041"`, "\"bad \xff\"", `"\b\f\r"`, `"\uD83D\uDE00"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var want string
		if json.Unmarshal([]byte(raw), &want) != nil {
			return
		}
		raw = strings.TrimSpace(raw)
		got, ok := ReadString([]byte(raw))
		require.True(t, ok, "%q", raw)
		assert.Equal(t, want, got, "%q", raw)
	})
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{``, ` `, `{}`, `[]`, `"a"`, `1`, `-0.5e+3`, `01`, `1.`, `.5`, `-`, `tru`, `true `, ` null`,
		`{"a":1,}`, `[1,]`, `{"a" 1}`, `"\u12G4"`, "\"\x01\"", `"\x"`, `{"a":[1,{"b":"}"}]}`, "\"\xff\"", `[[[[[]]]]]`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000), `1 2`, `{"a":"b"}x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		assert.Equal(t, json.Valid([]byte(s)), Valid([]byte(s)), "%q", s)
	})
}

// Valid agrees with json.Valid on many short strings made of JSON's own
// characters (the fuzzer's seeds include long nestings, which slow it).
func TestValid_randomAgainstEncodingJSON(t *testing.T) {
	const alphabet = `{}[]:,"\ 0123456789.eE+-abfnrtu/ltsx` + "\x01\xff"
	r := rand.New(rand.NewPCG(3, 5))
	for range 300000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if json.Valid(b) != Valid(b) {
			t.Fatalf("%q: json.Valid %v, Valid %v", b, json.Valid(b), Valid(b))
		}
	}
}
