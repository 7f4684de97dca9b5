// model_test.go tests the model fixture served over HTTP: each
// conversation follows it from its own start, streamed or whole.

package served

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	// A side call (a probe of one token, or JSON asked for) takes no entry,
	// and its usage is not the fixture's: the tokens served stay.
	tokens := m.Served().Tokens
	resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"x","max_tokens":1,"tools":`+chatTools+`,"messages":[{"role":"user","content":"quota"}]}`))
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
	assert.Equal(t, tokens, m.Served().Tokens, "side calls add nothing to the tokens served")
	history = nil
	code, text = post(false, `{"role":"user","content":"read a.txt at last"}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":"Hi there."`, "side calls took no entry of a conversation")
}

// Verify that a client offering no tools (a plain client, a chat-only
// agent) is served the recording, not taken for a side call: its first
// call gets the first entry, its next the entry's tool call as recorded.
func TestServedModel_noToolsOffered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"chunks":[{"text":"Hello."}]}
{"expect":"read","chunks":[{"text":"Reading."},{"toolCall":{"id":"c1","name":"read_file","input":{"path":"a.txt"}}}]}
`), 0o644))
	m, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m.Close()
	for _, stream := range []bool{false, true} {
		history := `{"role":"user","content":"hi"}`
		code, text := post(t, m.URL+"/chat/completions", `{"model":"x","stream":`+strconv.FormatBool(stream)+`,"messages":[`+history+`]}`)
		assert.Equal(t, 200, code)
		assert.Contains(t, text, `"content":"Hello."`)
		history += `,{"role":"assistant","content":"Hello."},{"role":"user","content":"read it"}`
		code, text = post(t, m.URL+"/chat/completions", `{"model":"x","stream":`+strconv.FormatBool(stream)+`,"messages":[`+history+`]}`)
		assert.Equal(t, 200, code)
		assert.Contains(t, text, `"content":"Reading."`)
		assert.Contains(t, text, `"name":"read_file"`, "the call as recorded")
	}
	assert.Zero(t, m.Served().SideCalls)
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

// Verify that conversations sharing only a system prompt stay apart: a
// loaded session's first call, which carries its history, takes up its
// own thread of the recording (after the answer its history ends with),
// not the next entry of the conversation that began with the same system
// prompt.
func TestServedModel_sharedSystemPromptApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"alpha","chunks":[{"text":"A1"}]}
{"chunks":[{"text":"A2"}]}
{"expect":"beta","chunks":[{"text":"B1"}]}
{"expect":"more","chunks":[{"text":"B2"}]}
`), 0o644))
	m, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m.Close()
	call := func(msgs string) string {
		code, text := post(t, m.URL+"/chat/completions", `{"model":"x","tools":`+chatTools+`,"messages":[{"role":"system","content":"You are a coding agent."},`+msgs+`]}`)
		require.Equal(t, 200, code, text)
		return text
	}
	assert.Contains(t, call(`{"role":"user","content":"alpha"}`), `"content":"A1"`)
	assert.Contains(t, call(`{"role":"user","content":"beta"},{"role":"assistant","content":"B1"},{"role":"user","content":"more"}`), `"content":"B2"`,
		"B's history, loaded: its own next answer, not A's")
	assert.Contains(t, call(`{"role":"user","content":"alpha"},{"role":"assistant","content":"A1"},{"role":"user","content":"go on"}`), `"content":"A2"`)
}

// Verify that conversations the agent names (prompt_cache_key, as codex
// sends it; the session in Anthropic's metadata, as claude sends it)
// replay their own entries in any order, even with the same words; the
// same words without names take the recorded threads in turn, and are
// refused (422) where nothing tells them apart.
func TestServedModel_namedConversations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"go","chunks":[{"text":"one"}]}
{"expect":"go","chunks":[{"text":"two"}]}
{"expect":"next","chunks":[{"text":"one again"}]}
{"expect":"next","chunks":[{"text":"two again"}]}
`), 0o644))
	first := `{"role":"user","content":"go"}`
	second := func(answer string) string {
		return first + `,{"role":"assistant","content":"` + answer + `"},{"role":"user","content":"next"}`
	}
	for _, order := range [][]string{{"a", "b", "a", "b"}, {"a", "a", "b", "b"}, {"b", "a", "a", "b"}} {
		m, err := Start(path, path, "", nil)
		require.NoError(t, err)
		got := map[string][]string{}
		for _, thread := range order {
			msgs := first
			if len(got[thread]) > 0 {
				msgs = second(got[thread][0])
			}
			code, text := post(t, m.URL+"/chat/completions", `{"model":"x","prompt_cache_key":"`+thread+`","tools":`+chatTools+`,"messages":[`+msgs+`]}`)
			require.Equal(t, 200, code, text)
			var answer struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal([]byte(text), &answer))
			got[thread] = append(got[thread], answer.Choices[0].Message.Content)
		}
		for _, thread := range []string{"a", "b"} {
			assert.Contains(t, [][]string{{"one", "one again"}, {"two", "two again"}}, got[thread], "order %v: thread %s keeps to one recorded thread", order, thread)
		}
		assert.NotEqual(t, got["a"][0], got["b"][0], "order %v: each its own thread", order)
		m.Close()
	}
	m, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m.Close()
	anthropic := func(session, msgs string) (int, string) {
		return post(t, m.URL+"/messages", `{"model":"x","max_tokens":1000,"metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"`+session+`\"}"},"tools":[{"name":"Read","input_schema":{}}],"messages":[`+msgs+`]}`)
	}
	_, a1 := anthropic("s1", first)
	_, b1 := anthropic("s2", first)
	assert.Contains(t, a1, `"text":"one"`)
	assert.Contains(t, b1, `"text":"two"`)
	_, b2 := anthropic("s2", second("two"))
	assert.Contains(t, b2, `"text":"two again"`, "the session names the thread")
	// Unnamed, threads with the same words take the recorded threads in
	// turn, and each goes on by the answer its history carries.
	m2, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m2.Close()
	for _, c := range []struct{ msgs, want string }{{first, "one"}, {first, "two"}, {second("two"), "two again"}, {second("one"), "one again"}} {
		code, text := post(t, m2.URL+"/chat/completions", `{"model":"x","tools":`+chatTools+`,"messages":[`+c.msgs+`]}`)
		require.Equal(t, 200, code)
		assert.Contains(t, text, `"content":"`+c.want+`"`)
	}
	// Alike so far and carrying neither's answer (an agent that reworded
	// it), two unnamed threads at different places cannot be told apart:
	// refused, naming both, never answered with either's entry.
	m3, err := Start(path, "given.txtar", "", nil)
	require.NoError(t, err)
	defer m3.Close()
	for range 2 {
		code, _ := post(t, m3.URL+"/chat/completions", `{"model":"x","tools":`+chatTools+`,"messages":[`+first+`]}`)
		require.Equal(t, 200, code)
	}
	code, text := post(t, m3.URL+"/chat/completions", `{"model":"x","tools":`+chatTools+`,"messages":[`+second("reworded")+`]}`)
	assert.Equal(t, 422, code)
	assert.Contains(t, text, "continues conversations of the replay fixture given.txtar begun at entries 1 and 2 alike")
}

// Verify a turn the agent ended early: codex-acp, its write rejected, ends
// the turn without the model call that would tell the model so; its next
// call carries the tool's output and then the user's new words. The
// recording's next entry (the model's word on the rejection) is skipped
// for the turn those words begin; an agent that makes the call (acpbridge)
// is served it, and then the next turn.
func TestServedModel_turnEndedEarly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"greet.sh","chunks":[{"toolCall":{"id":"w1","name":"write_file","input":{"path":"greet.sh","content":"x"}}}]}
{"chunks":[{"text":"Not written, as you asked."}]}
{"expect":"say two","chunks":[{"text":"Two."}]}
`), 0o644))
	first := `{"role":"user","content":"Write greet.sh."}`
	called := first + `,{"role":"assistant","content":null,"tool_calls":[{"id":"w1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"greet.sh\",\"content\":\"x\"}"}}]},{"role":"tool","tool_call_id":"w1","content":"rejected by the user"}`
	call := func(m *Model, key, msgs string) string {
		tools := `[{"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}}]`
		code, text := post(t, m.URL+"/chat/completions", `{"model":"x","prompt_cache_key":"`+key+`","tools":`+tools+`,"messages":[`+msgs+`]}`)
		require.Equal(t, 200, code, text)
		return text
	}
	m, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m.Close()
	assert.Contains(t, call(m, "codex", first), `"write_file"`)
	assert.Contains(t, call(m, "codex", called+`,{"role":"user","content":"Then just say two."}`), `"content":"Two."`, "the turn the user's new words begin")

	assert.Contains(t, call(m, "acpbridge", first), `"write_file"`)
	assert.Contains(t, call(m, "acpbridge", called), `"content":"Not written, as you asked."`, "the rejection told to the model")
	assert.Contains(t, call(m, "acpbridge", called+`,{"role":"assistant","content":"Not written, as you asked."},{"role":"user","content":"Then just say two."}`), `"content":"Two."`)
}

// Verify that a turn ended early finds its next turn while a thread begun
// earlier in the recording sits between its own turns with a turn ahead
// that the same words would not begin: B's rejected write is skipped, and
// "then say done" is B's, not left to A (whose next entry is its own
// later turn), as codex-acp's threads in an editor's day have it.
func TestServedModel_turnEndedEarlyBesideAnEarlierThread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"alpha","chunks":[{"text":"A1"}]}
{"expect":"write notes","chunks":[{"toolCall":{"id":"w2","name":"write_file","input":{"path":"notes.txt","content":"x"}}}]}
{"chunks":[{"text":"B: not written."}]}
{"expect":"then say done","chunks":[{"text":"B: done."}]}
{"expect":"wait for it","chunks":[{"text":"A: waiting."}]}
`), 0o644))
	m, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m.Close()
	tools := `[{"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}}]`
	call := func(key, msgs string) string {
		code, text := post(t, m.URL+"/chat/completions", `{"model":"x","prompt_cache_key":"`+key+`","tools":`+tools+`,"messages":[`+msgs+`]}`)
		require.Equal(t, 200, code, text)
		return text
	}
	a := `{"role":"user","content":"Say alpha."}`
	b := `{"role":"user","content":"Now write notes."}`
	assert.Contains(t, call("A", a), `"content":"A1"`)
	assert.Contains(t, call("B", b), `"write_file"`)
	rejected := b + `,{"role":"assistant","content":null,"tool_calls":[{"id":"w2","type":"function","function":{"name":"write_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"w2","content":"rejected by the user"}`
	assert.Contains(t, call("B", rejected+`,{"role":"user","content":"Never mind; then say done."}`), `"content":"B: done."`)
	assert.Contains(t, call("A", a+`,{"role":"assistant","content":"A1"},{"role":"user","content":"Now wait for it."}`), `"content":"A: waiting."`)
}

// Verify that a conversation that begins the recording again (every
// thread it could begin already taken) is counted and marked in the log,
// and that conversations that find their place are not: an editor's day
// checks the log for it.
func TestServedModel_recordingBegunAgainCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"expect":"alpha","chunks":[{"text":"A1"}]}
{"expect":"beta","chunks":[{"text":"B1"}]}
`), 0o644))
	m, err := Start(path, path, "", nil)
	require.NoError(t, err)
	defer m.Close()
	var logged []string
	var mu sync.Mutex
	m.Log = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	call := func(words string) {
		code, text := post(t, m.URL+"/chat/completions", `{"model":"x","tools":`+chatTools+`,"messages":[{"role":"user","content":"`+words+`"}]}`)
		require.Equal(t, 200, code, text)
	}
	call("alpha")
	call("beta")
	assert.Zero(t, m.Served().Restarts, "two threads, each its own")
	call("alpha again")
	assert.Equal(t, 1, m.Served().Restarts, "a third conversation found alpha taken")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, logged, 3)
	assert.NotContains(t, logged[0]+logged[1], "begun again")
	assert.Contains(t, logged[2], "entry 1 (a conversation begun at entry 1, the recording begun again)")
}
