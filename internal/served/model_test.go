// served_test.go tests the model fixture served over HTTP: each
// conversation follows it from its own start, streamed or whole.

package served

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

// chatTools offers acpbridge's read_file, as a chat completion request
// does.
const chatTools = `[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]`

func TestServedModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`# a comment line
{"chunks":[{"thought":"Hm."},{"text":"Hi "},{"text":"there."},{"usage":{"inputTokens":3,"outputTokens":2}}]}
{"chunks":[{"toolCall":{"id":"c1","name":"read_file","input":{"path":"a.txt"}}}]}
{"expect":"file text","chunks":[{"text":"Read."}]}
{"expect":"more","chunks":[{"text":"More."}]}
{"error":"model overloaded"}
`), 0o644))
	m, err := Start(path, "given.txtar", "", nil)
	require.NoError(t, err)
	defer m.Close()
	var history []string // one conversation's messages so far
	post := func(stream bool, msgs ...string) (int, string) {
		history = append(history, msgs...)
		body := `{"model":"any-name","stream":` + strconv.FormatBool(stream) + `,"tools":` + chatTools + `,"messages":[` + strings.Join(history, ",") + `]}`
		resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, text := post(true, `{"role":"user","content":"read a.txt"}`)
	assert.Equal(t, 200, code)
	for _, want := range []string{`"reasoning_content":"Hm."`, `"content":"Hi "`, `"content":"there."`, `"finish_reason":"stop"`, `"model":"any-name"`,
		`"usage":{"completion_tokens":2,"prompt_tokens":3,"total_tokens":5}`, "data: [DONE]\n\n"} {
		assert.Contains(t, text, want)
	}
	code, text = post(false, `{"role":"assistant","content":"Hi there."}`, `{"role":"user","content":"go on"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"tool_calls":[{"function":{"arguments":"{\"path\":\"a.txt\"}","name":"read_file"},"id":"c1","index":0,"type":"function"}]`)
	assert.Contains(t, text, `"finish_reason":"tool_calls"`)
	assert.Contains(t, text, `"usage":{`, "an entry without usage is answered with an estimate")
	// An entry's expect is checked against the request's newest message,
	// as acpbridge's replay checks it.
	code, text = post(true, `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"the file text"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"Read."`)
	code, text = post(true, `{"role":"assistant","content":"Read."}`, `{"role":"user","content":"more please"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"More."`)
	code, text = post(true, `{"role":"assistant","content":"More."}`, `{"role":"user","content":"and?"}`)
	assert.Equal(t, 500, code)
	assert.Contains(t, text, "model overloaded")
	code, text = post(true, `{"role":"user","content":"and?"}`)
	assert.Equal(t, 500, code)
	assert.Contains(t, text, "has 5 entries, and a conversation begun at entry 1 asked for one after its entry 5")
	// The recording is not used up: a new conversation follows it from its
	// start. Its tool result is matched by the call it answers, whatever
	// its words; a user message must meet the entry's expect.
	history = nil
	code, text = post(true, `{"role":"user","content":"read a.txt again"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"there."`)
	code, _ = post(true, `{"role":"assistant","content":"Hi there."}`, `{"role":"user","content":"go on"}`)
	assert.Equal(t, 200, code)
	code, text = post(true, `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"worded otherwise"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"Read."`)
	code, text = post(true, `{"role":"assistant","content":"Read."}`, `{"role":"user","content":"something else"}`)
	assert.Equal(t, 500, code)
	assert.Contains(t, text, `expected the newest message to contain \"more\", but it was \"something else\"; the conversation has diverged from the recording`)
	assert.NotContains(t, text, path, "errors name the file the user gave, not the served copy")
	// A side call (no tools offered, or JSON asked for) takes no entry.
	resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","messages":[{"role":"user","content":"a title for this"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(b), `"content":"OK"`)
	resp, err = http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","tools":`+chatTools+`,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"next":{"enum":["user","model"]}},"required":["next"]}}},"messages":[{"role":"user","content":"who speaks?"}]}`))
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(b), `"content":"{\"next\":\"user\"}"`)
	assert.Equal(t, 2, m.Served().SideCalls)
	history = nil
	code, text = post(false, `{"role":"user","content":"read a.txt at last"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"Hi there."`, "side calls took no entry of a conversation")
}

// Verify that a call that begins no conversation of the fixture is refused
// with a client error naming its first words and the file given.
func TestServedModel_noConversation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"alpha","chunks":[{"text":"A"}]}`+"\n"), 0o644))
	m, err := Start(path, "given.txtar", "", nil)
	require.NoError(t, err)
	defer m.Close()
	resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","tools":`+chatTools+`,"messages":[{"role":"user","content":"omega first"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 422, resp.StatusCode)
	assert.Contains(t, string(b), `no conversation of the replay fixture given.txtar begins with this model call, whose newest message is \"omega first\"; its conversations begin with \"alpha\"`)
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
		m, err := Start(path, path, "", nil)
		require.NoError(t, err)
		msgs := map[string]string{
			"a1": `[{"role":"system","content":"s"},{"role":"user","content":"alpha"}]`,
			"b1": `[{"role":"system","content":"s"},{"role":"user","content":"beta"}]`,
			"a2": `[{"role":"system","content":"s"},{"role":"user","content":"alpha"},{"role":"assistant","content":"A1"},{"role":"tool","content":"result a"}]`,
			"b2": `[{"role":"system","content":"s"},{"role":"user","content":"beta"},{"role":"assistant","content":"B1"},{"role":"tool","content":"result b"}]`,
		}
		for _, call := range order {
			resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","tools":`+chatTools+`,"messages":`+msgs[call]+`}`))
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Contains(t, string(b), `"content":"`+strings.ToUpper(call)+`"`, "order %v, call %s", order, call)
		}
		assert.Equal(t, 4, m.Served().Requests)
		m.Close()
	}
}
