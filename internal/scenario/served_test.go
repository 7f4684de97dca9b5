// served_test.go tests the model fixture served as an OpenAI-compatible
// endpoint: each call takes the next entry, streamed or whole.

package scenario

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServedModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`# a comment line
{"chunks":[{"thought":"Hm."},{"text":"Hi "},{"text":"there."},{"usage":{"inputTokens":3,"outputTokens":2}}]}
{"chunks":[{"toolCall":{"id":"c1","name":"read_file","input":{"path":"a.txt"}}}]}
{"expect":"file text","chunks":[{"text":"Read."}]}
{"expect":"file text","chunks":[{"text":"Read."}]}
{"error":"model overloaded"}
`), 0o644))
	m, err := serveModel(path, nil)
	require.NoError(t, err)
	defer m.Close()
	post := func(stream bool, newest ...string) (int, string) {
		messages := `[]`
		if len(newest) > 0 {
			messages = `[{"role":"user","content":"read a.txt"},{"role":"tool","content":` + strconv.Quote(newest[0]) + `}]`
		}
		body := `{"model":"x","messages":` + messages + `}`
		if stream {
			body = `{"model":"x","stream":true,"messages":` + messages + `}`
		}
		resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, text := post(true)
	assert.Equal(t, 200, code)
	for _, want := range []string{`"reasoning_content":"Hm."`, `"content":"Hi "`, `"content":"there."`, `"finish_reason":"stop"`,
		`"usage":{"completion_tokens":2,"prompt_tokens":3,"total_tokens":5}`, "data: [DONE]\n\n"} {
		assert.Contains(t, text, want)
	}
	code, text = post(false)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"tool_calls":[{"function":{"arguments":"{\"path\":\"a.txt\"}","name":"read_file"},"id":"c1","index":0,"type":"function"}]`)
	assert.Contains(t, text, `"finish_reason":"tool_calls"`)
	// An entry's expect is checked against the request's newest message,
	// as acpbridge's replay checks it.
	code, text = post(true, "the file text")
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"Read."`)
	code, text = post(true, "something else")
	assert.Equal(t, 500, code)
	assert.Contains(t, text, `expected the newest message to contain \"file text\", but it was \"something else\"; the conversation has diverged from the recording`)
	code, text = post(true)
	assert.Equal(t, 500, code)
	assert.Contains(t, text, "model overloaded")
	code, text = post(true)
	assert.Equal(t, 500, code)
	assert.Contains(t, text, "has 5 entries, and this model call asked for entry 6")
}

// Verify that conversations calling at once each follow the fixture from
// their own position, told apart by their messages so far: two threads
// recorded interleaved get their own entries in order, whichever calls
// first, and a third conversation's call goes on where its own left off.
func TestServedModel_conversationsApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"alpha","chunks":[{"text":"A1"}]}
{"expect":"beta","chunks":[{"text":"B1"}]}
{"expect":"result a","chunks":[{"text":"A2"}]}
{"expect":"result b","chunks":[{"text":"B2"}]}
`), 0o644))
	for _, order := range [][]string{{"a1", "b1", "a2", "b2"}, {"b1", "b2", "a1", "a2"}, {"b1", "a1", "b2", "a2"}} {
		m, err := serveModel(path, nil)
		require.NoError(t, err)
		msgs := map[string]string{
			"a1": `[{"role":"system","content":"s"},{"role":"user","content":"alpha"}]`,
			"b1": `[{"role":"system","content":"s"},{"role":"user","content":"beta"}]`,
			"a2": `[{"role":"system","content":"s"},{"role":"user","content":"alpha"},{"role":"assistant","content":"A1"},{"role":"tool","content":"result a"}]`,
			"b2": `[{"role":"system","content":"s"},{"role":"user","content":"beta"},{"role":"assistant","content":"B1"},{"role":"tool","content":"result b"}]`,
		}
		for _, call := range order {
			resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","messages":`+msgs[call]+`}`))
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Contains(t, string(b), `"content":"`+strings.ToUpper(call)+`"`, "order %v, call %s", order, call)
		}
		assert.Equal(t, 4, m.count().Requests)
		m.Close()
	}
}
