// wires_test.go tests the served model's wires one event sequence at a
// time, and the mapping of recorded tool calls onto an agent's tools. The
// pinned agents themselves are the wires' real test (examples/peers).

package served

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/model"
)

// wireFixture is a thought, text and a write, then a text answer.
const wireFixture = `{"expect":"write it","chunks":[{"thought":"Hm."},{"text":"Writing."},{"toolCall":{"id":"w1","name":"write_file","input":{"path":"a.txt","content":"hi\n"}}},{"usage":{"inputTokens":7,"outputTokens":3}}]}
{"chunks":[{"text":"Done."}]}
`

func serveWireFixture(t *testing.T) *Model {
	path := filepath.Join(t.TempDir(), "model.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(wireFixture), 0o644))
	m, err := Start(path, path, "", []string{"/work"})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

func post(t *testing.T, url, body string) (int, string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Verify the Responses wire as codex reads it: each item's
// output_item.done (a write becomes an apply_patch custom tool call, its
// path absolute), response.completed with the usage; the tool result is
// matched by its call.
func TestServedModel_responses(t *testing.T) {
	m := serveWireFixture(t)
	tools := `[{"type":"function","name":"exec_command","parameters":{"properties":{"cmd":{}}}},{"type":"custom","name":"apply_patch","format":{}}]`
	code, text := post(t, m.URL+"/responses", `{"model":"gpt-x","stream":true,"tools":`+tools+`,"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"write it"}]}]}`)
	assert.Equal(t, 200, code)
	for _, want := range []string{"event: response.created\n", `"type":"response.reasoning_summary_text.delta"`, `"delta":"Writing."`,
		`"item":{"content":[{"annotations":[],"text":"Writing.","type":"output_text"}]`,
		`"call_id":"w1","id":"ctc_1_w1","input":"*** Begin Patch\n*** Add File: /work/a.txt\n+hi\n*** End Patch\n","name":"apply_patch","status":"completed","type":"custom_tool_call"`,
		`"type":"response.completed"`, `"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":3`} {
		assert.Contains(t, text, want)
	}
	code, text = post(t, m.URL+"/responses", `{"model":"gpt-x","tools":`+tools+`,"input":[{"type":"message","role":"user","content":"write it"},{"type":"custom_tool_call","call_id":"w1","name":"apply_patch","input":"..."},{"type":"custom_tool_call_output","call_id":"w1","output":"Success. Updated the following files"}]}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"object":"response"`)
	assert.Contains(t, text, `"text":"Done."`)
	assert.Equal(t, map[string]int{"write_file → apply_patch (patch text)": 1}, m.Served().Mapped)
}

// Verify the Anthropic wire as claude reads it: blocks between
// content_block_start and content_block_stop, the write as Write with an
// absolute file_path, the stop reason and usage in message_delta; HEAD /
// answers; count_tokens counts.
func TestServedModel_anthropic(t *testing.T) {
	m := serveWireFixture(t)
	base := strings.TrimSuffix(m.URL, "/v1")
	resp, err := http.Head(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	tools := `[{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}}}},{"name":"Bash","input_schema":{"properties":{"command":{}}}}]`
	code, text := post(t, m.URL+"/messages?beta=true", `{"model":"claude-x","stream":true,"tools":`+tools+`,"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"write it"}]}]}`)
	assert.Equal(t, 200, code)
	for _, want := range []string{"event: message_start\n", `"content_block":{"signature":"","thinking":"","type":"thinking"}`, `"type":"signature_delta"`,
		`"delta":{"text":"Writing.","type":"text_delta"}`, `"content_block":{"id":"w1","input":{},"name":"Write","type":"tool_use"}`,
		`"partial_json":"{\"content\":\"hi\\n\",\"file_path\":\"/work/a.txt\"}"`, `"delta":{"stop_reason":"tool_use","stop_sequence":null}`,
		`"usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":7,"output_tokens":3}`, "event: message_stop\n"} {
		assert.Contains(t, text, want)
	}
	assert.Equal(t, 3, strings.Count(text, "event: content_block_stop\n"), "each block is stopped, or claude drops it")
	assert.Regexp(t, `data: \{"message":\{[^\n]*"usage":\{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":[1-9][0-9]*,"output_tokens":0\}\},"type":"message_start"\}`, text,
		"message_start says the input's tokens: claude reports the context from it")
	code, text = post(t, m.URL+"/messages", `{"model":"claude-x","tools":`+tools+`,"messages":[{"role":"user","content":"write it"},{"role":"assistant","content":[{"type":"text","text":"Writing."},{"type":"tool_use","id":"w1","name":"Write","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"w1","content":"File created"},{"type":"text","text":"<system-reminder>y</system-reminder>"}]}]}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"content":[{"text":"Done.","type":"text"}]`)
	assert.Contains(t, text, `"stop_reason":"end_turn"`)
	code, text = post(t, m.URL+"/messages/count_tokens", `{"messages":[{"role":"user","content":"abcdefgh"}]}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"input_tokens":`)
}

// Verify the Gemini wire as gemini-cli reads it: streamed parts, the
// finish reason and usage on the last event, the write as write_file with
// an absolute file_path; a side call asking for JSON gets the schema's
// smallest value and takes no entry.
func TestServedModel_gemini(t *testing.T) {
	m := serveWireFixture(t)
	base := strings.TrimSuffix(m.URL, "/v1") + "/v1beta/models/gemini-x"
	tools := `[{"functionDeclarations":[{"name":"write_file","parametersJsonSchema":{"properties":{"file_path":{},"content":{}}}},{"name":"run_shell_command","parametersJsonSchema":{"properties":{"command":{}}}}]}]`
	code, text := post(t, base+":generateContent", `{"contents":[{"role":"user","parts":[{"text":"who speaks next?"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"next_speaker":{"type":"string","enum":["user","model"]},"reasoning":{"type":"string"}},"required":["reasoning","next_speaker"]}}}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"text":"{\"next_speaker\":\"user\",\"reasoning\":\"\"}"`)
	code, text = post(t, base+":streamGenerateContent?alt=sse", `{"tools":`+tools+`,"contents":[{"role":"user","parts":[{"text":"<session_context>c</session_context>"},{"text":"write it"}]}]}`)
	assert.Equal(t, 200, code)
	for _, want := range []string{`"parts":[{"text":"Hm.","thought":true}]`, `"parts":[{"text":"Writing."}]`,
		`"functionCall":{"args":{"content":"hi\n","file_path":"/work/a.txt"},"id":"w1","name":"write_file"}`,
		`"finishReason":"STOP"`, `"usageMetadata":{"candidatesTokenCount":3,"promptTokenCount":7,"totalTokenCount":10}`} {
		assert.Contains(t, text, want)
	}
	code, text = post(t, base+":streamGenerateContent?alt=sse", `{"tools":`+tools+`,"contents":[{"role":"user","parts":[{"text":"write it"}]},{"role":"model","parts":[{"text":"Hm.","thought":true},{"functionCall":{"id":"w1","name":"write_file","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"w1","name":"write_file","response":{"output":"ok"}}}]}]}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"text":"Done."`)
	code, text = post(t, base+":countTokens", `{"contents":[]}`)
	assert.Equal(t, 200, code)
	assert.Contains(t, text, `"totalTokens":`)
	assert.Equal(t, 1, m.Served().SideCalls)
}

// Verify that a plain client, offering no tools, gets the recording's
// entry on every wire, streamed and whole: its text, and its tool call as
// recorded (the fixture's own tool name and input).
func TestServedModel_plainClientEveryWire(t *testing.T) {
	m := serveWireFixture(t)
	gemini := strings.TrimSuffix(m.URL, "/v1") + "/v1beta/models/gemini-x"
	for _, c := range []struct{ url, body string }{
		{m.URL + "/chat/completions", `{"model":"x","messages":[{"role":"user","content":"write it"}]}`},
		{m.URL + "/chat/completions", `{"model":"x","stream":true,"messages":[{"role":"user","content":"write it"}]}`},
		{m.URL + "/responses", `{"model":"x","input":"write it"}`},
		{m.URL + "/responses", `{"model":"x","stream":true,"input":[{"type":"message","role":"user","content":"write it"}]}`},
		{m.URL + "/messages", `{"model":"x","max_tokens":1024,"messages":[{"role":"user","content":"write it"}]}`},
		{m.URL + "/messages", `{"model":"x","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"write it"}]}`},
		{gemini + ":generateContent", `{"contents":[{"role":"user","parts":[{"text":"write it"}]}]}`},
		{gemini + ":streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"write it"}]}]}`},
	} {
		code, text := post(t, c.url, c.body)
		assert.Equal(t, 200, code, c.body)
		assert.Contains(t, text, "Writing.", "%s %s", c.url, c.body)
		assert.Contains(t, text, "write_file", "the call as recorded: %s %s", c.url, c.body)
		assert.NotContains(t, text, `"OK"`, c.body)
	}
	assert.Zero(t, m.Served().SideCalls)
}

// Verify the mapping of each intent onto the tools agents offer.
func TestMapCall(t *testing.T) {
	call := func(name, input string) model.ToolCall {
		return model.ToolCall{ID: "c", Name: name, Input: json.RawMessage(input)}
	}
	acpbridge := []offeredTool{{Name: "write_file", Params: []string{"content", "path"}}, {Name: "run_command", Params: []string{"command", "cwd", "timeout_ms"}}}
	claude := []offeredTool{{Name: "Write", Params: []string{"content", "file_path"}}, {Name: "Edit", Params: []string{"file_path", "new_string", "old_string", "replace_all"}},
		{Name: "Read", Params: []string{"file_path", "limit", "offset"}}, {Name: "Bash", Params: []string{"command", "description"}}}
	codex := []offeredTool{{Name: "exec_command", Params: []string{"cmd", "justification"}}, {Name: "apply_patch", Freeform: true}}
	for _, tc := range []struct {
		offered []offeredTool
		call    model.ToolCall
		name    string
		args    string // JSON, or the freeform text
	}{
		{acpbridge, call("write_file", `{"path":"a.txt","content":"x"}`), "write_file", `{"content":"x","path":"a.txt"}`},
		{claude, call("write_file", `{"path":"a.txt","content":"x"}`), "Write", `{"content":"x","file_path":"/w/a.txt"}`},
		{claude, call("edit_file", `{"path":"/abs/a.txt","old_text":"x","new_text":"y"}`), "Edit", `{"file_path":"/abs/a.txt","new_string":"y","old_string":"x"}`},
		{claude, call("read_file", `{"path":"a.txt","line":3}`), "Read", `{"file_path":"/w/a.txt","offset":3}`},
		{claude, call("list_directory", `{"path":"src"}`), "Bash", `{"command":"ls -Ap -- /w/src"}`},
		{codex, call("run_command", `{"command":"sh greet.sh","timeout_ms":5}`), "exec_command", `{"cmd":"sh greet.sh"}`},
		{codex, call("edit_file", `{"path":"a.txt","old_text":"a\nb","new_text":"c"}`), "apply_patch", "*** Begin Patch\n*** Update File: /w/a.txt\n@@\n-a\n-b\n+c\n*** End Patch\n"},
		{codex, call("read_file", `{"path":"it's.txt"}`), "exec_command", `{"cmd":"cat -- '/w/it'\\''s.txt'"}`},
	} {
		got, err := mapCall(tc.call, tc.offered, "/w")
		require.NoError(t, err, "%s", tc.call.Name)
		assert.Equal(t, tc.name, got.Name, "%s", tc.call.Name)
		if got.Freeform {
			assert.Equal(t, tc.args, got.Input)
		} else {
			assert.JSONEq(t, tc.args, got.argsJSON(), "%s onto %s", tc.call.Name, got.Name)
		}
	}
	_, err := mapCall(call("update_plan", `{"plan":[]}`), claude, "/w")
	assert.EqualError(t, err, "the recording's tool call c (update_plan) has no tool to map onto among the 4 this call offers (Write, Edit, Read, Bash); record the scenario with a tool the agent has, or give the agent a shell tool")
}

// Verify that malformed calls on every wire get a client error saying
// what was wrong, and the endpoint keeps serving.
func TestServedModel_malformedCalls(t *testing.T) {
	m := serveWireFixture(t)
	base := strings.TrimSuffix(m.URL, "/v1")
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"messages":`,
		"/v1/responses":        `{"input":7}`,
		"/v1/messages":         `not json`,
		"/v1beta/models/gemini-x:streamGenerateContent": `{"contents":{}}`,
	} {
		code, text := post(t, base+path, body)
		assert.Equal(t, 400, code, path)
		assert.Contains(t, text, "the request body is not a model call", path)
	}
	code, text := post(t, base+"/v1beta/models/gemini-x:embedContent", `{}`)
	assert.Equal(t, 404, code)
	assert.Contains(t, text, "not :embedContent")
	code, text = post(t, base+"/v1/messages", `{"model":"c","tools":[{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}}}}],"messages":[{"role":"user","content":"write it"}]}`)
	assert.Equal(t, 200, code, "still serving")
	assert.Contains(t, text, `"name":"Write"`)
}

// Verify the prompt's estimate: the bytes of the string values of a
// request's JSON, whatever the wire, not its keys or syntax.
func TestTextBytes(t *testing.T) {
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"},{"role":"tool","content":[{"type":"text","text":"ab"}]}],` +
		`"tools":[{"name":"x","description":"abcd","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}],"n":3}`
	// m, user, hello, tool, text, ab, x, abcd, object, string
	assert.Equal(t, int64(1+4+5+4+4+2+1+4+6+6), textBytes([]byte(body)))
	assert.Equal(t, int64(0), textBytes([]byte(`{"a":{"b":[1,2,{"c":null}]}}`)))
	assert.Equal(t, int64(0), textBytes([]byte(`not json "abc"`)), "nothing for a body that is not JSON")
}

// Verify that no two answers share an id, on any wire: the same call
// answered twice (two conversations, or a thread's turns) gives each
// response, message and output item an id of its own, while the calls'
// own ids (call_id, tool_use id) stay the recording's, which the agent
// sends back with its results.
func TestServedModel_idsUnique(t *testing.T) {
	m := serveWireFixture(t)
	calls := []struct{ path, body string }{
		{"/responses", `{"model":"gpt-x","stream":true,"tools":[{"type":"custom","name":"apply_patch","format":{}}],"input":[{"type":"message","role":"user","content":"write it"}]}`},
		{"/responses", `{"model":"gpt-x","input":[{"type":"message","role":"user","content":"write it"}]}`},
		{"/messages", `{"model":"claude-x","stream":true,"tools":[{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}}}}],"messages":[{"role":"user","content":"write it"}]}`},
		{"/messages", `{"model":"claude-x","messages":[{"role":"user","content":"write it"}]}`},
		{"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"write it"}]}`},
		{"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"write it"}]}`},
	}
	idPattern := regexp.MustCompile(`"id":"((?:resp|msg|chatcmpl|mes|rea|fc|ctc)[^"]*)"`)
	owner := map[string]int{}
	for i, c := range calls {
		code, text := post(t, m.URL+c.path, c.body)
		require.Equal(t, 200, code, "%s: %s", c.path, text)
		ids := map[string]bool{}
		for _, match := range idPattern.FindAllStringSubmatch(text, -1) {
			ids[match[1]] = true
		}
		require.NotEmpty(t, ids, "%s hands out ids", c.path)
		for id := range ids {
			if j, seen := owner[id]; seen {
				t.Errorf("answer %d (%s) has id %s, which answer %d had", i, c.path, id, j)
			}
			owner[id] = i
		}
		if strings.Contains(text, `"call_id"`) {
			assert.Contains(t, text, `"call_id":"w1"`, "the call's own id is the recording's")
		}
	}
}

// Verify that a system message inside the conversation (Claude Code's
// "# Environment ..." with cache_control, on the Messages wire; a system
// message among a chat's turns) is context, not the user's turn: the
// entry's expect is matched against the user's words before it.
func TestServedModel_systemMessageInsideIsContext(t *testing.T) {
	env := `{"role":"system","content":[{"type":"text","text":"# Environment\nYou are in /work","cache_control":{"type":"ephemeral"}}]}`
	m := serveWireFixture(t)
	code, text := post(t, m.URL+"/messages", `{"model":"claude-x","tools":[{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}}}}],"messages":[{"role":"user","content":"write it"},`+env+`]}`)
	require.Equal(t, 200, code, text)
	assert.Contains(t, text, `"name":"Write"`, "the entry expecting the user's words is served")

	m = serveWireFixture(t)
	code, text = post(t, m.URL+"/chat/completions", `{"model":"m","messages":[{"role":"system","content":"rules"},{"role":"user","content":"write it"},{"role":"system","content":"# Environment"}]}`)
	require.Equal(t, 200, code, text)
	assert.Contains(t, text, `"content":"Writing."`)
}

// Verify claude's side calls as Claude Code 2.1 makes them: the title call
// asking for JSON through output_config.format gets a short title from the
// user's first words, and the prompt-suggestion call (the whole
// conversation, the same tools, the user's last message beginning with
// [SUGGESTION MODE: ...] and its rules, or ending with the mark alone) a
// short suggestion; each is counted as a side call and takes no entry:
// the thread's next call still gets its own.
func TestServedModel_claudeSideCalls(t *testing.T) {
	m := serveWireFixture(t)
	tools := `[{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}}}}]`
	code, text := post(t, m.URL+"/messages", `{"model":"claude-haiku","output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false}}},`+
		`"messages":[{"role":"user","content":"write it into a file for me please"}]}`)
	require.Equal(t, 200, code, text)
	assert.Contains(t, text, `"text":"{\"title\":\"write it into a file for\"}"`)
	code, text = post(t, m.URL+"/messages", `{"model":"claude-x","tools":`+tools+`,"messages":[{"role":"user","content":"write it"},{"role":"assistant","content":"Sure."},`+
		`{"role":"user","content":[{"type":"text","text":"[SUGGESTION MODE: Suggest what the user might naturally type next.]"}]}]}`)
	require.Equal(t, 200, code, text)
	assert.Contains(t, text, `"text":"Go on."`)
	code, text = post(t, m.URL+"/messages", `{"model":"claude-x","tools":`+tools+`,"messages":[{"role":"user","content":"write it"},{"role":"assistant","content":"Sure."},`+
		`{"role":"user","content":[{"type":"text","text":"[SUGGESTION MODE: Suggest what the user might naturally type next into Claude Code.]\n\nFIRST: Look at the user's recent messages and original request.\n\nReply with ONLY the suggestion, no quotes or explanation."}]}]}`)
	require.Equal(t, 200, code, text)
	assert.Contains(t, text, `"text":"Go on."`, "Claude Code 2.1.318's suggestion call, its rules after the mark")
	assert.Equal(t, 3, m.Served().SideCalls)
	code, text = post(t, m.URL+"/messages", `{"model":"claude-x","tools":`+tools+`,"messages":[{"role":"user","content":"write it"}]}`)
	require.Equal(t, 200, code, text)
	assert.Contains(t, text, `"name":"Write"`, "the thread's entry is still there")
}
