// openai_test.go tests the OpenAI-compatible model against an httptest
// server that replays recorded SSE bodies from fixtures/openai and records
// every request, so that both directions are checked.

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"acpbridge/internal/model"
)

const testKey = "sk-test-0123456789abcdef"

// fakeReply is one queued answer of the fake server.
type fakeReply struct {
	status int // -1 drops the connection
	header map[string]string
	file   string // under fixtures/openai
	body   string // the body itself, when no file holds it
	hold   bool   // after the second event, wait for the client to go away
	// contentType replaces text/event-stream; endless, when set, is the
	// body: written over and over until the client goes away (64 MiB at most).
	contentType string
	endless     func(first bool) string
}

type fakeRequest struct {
	path, auth string
	body       map[string]any
}

type fakeOpenAI struct {
	t         *testing.T
	srv       *httptest.Server
	mu        sync.Mutex
	replies   []fakeReply
	requests  []fakeRequest
	cancelled chan struct{} // closed when a held stream's client went away
	// modelsHold, when not nil, holds GET /models until it is closed.
	modelsHold chan struct{}
}

func newFakeOpenAI(t *testing.T, replies ...fakeReply) *fakeOpenAI {
	f := &fakeOpenAI{t: t, replies: replies, cancelled: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		if f.modelsHold != nil {
			select {
			case <-f.modelsHold:
			case <-r.Context().Done():
			}
		}
		b, _ := os.ReadFile("fixtures/openai/models.json")
		w.Write(b)
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		http.Error(w, `{"error":{"message":"the test queued no more replies"}}`, http.StatusTeapot)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	b, err := os.ReadFile(filepath.Join("fixtures/openai", rep.file))
	if rep.file != "" && err != nil {
		f.t.Errorf("fake server: %v", err)
	}
	if rep.body != "" {
		b = []byte(rep.body)
	}
	if rep.status == -1 { // drop the connection without an answer
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		w.WriteHeader(rep.status)
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", cmp.Or(rep.contentType, "text/event-stream"))
	if rep.endless != nil {
		for n := 0; n < 64<<20 && r.Context().Err() == nil; {
			k, err := io.WriteString(w, rep.endless(n == 0))
			if err != nil {
				return
			}
			n += k
		}
		return
	}
	for i, event := range strings.SplitAfter(string(b), "\n\n") {
		w.Write([]byte(event))
		w.(http.Flusher).Flush()
		if rep.hold && i == 1 { // after the first event with text
			<-r.Context().Done()
			close(f.cancelled)
			return
		}
	}
}

func (f *fakeOpenAI) request(i int) fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Greater(f.t, len(f.requests), i, "the server got %d requests", len(f.requests))
	return f.requests[i]
}

func (f *fakeOpenAI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// startOpenAI runs an in-process agent on the fake server.
func startOpenAI(t *testing.T, f *fakeOpenAI, args ...string) *testAgent {
	t.Setenv("OPENAI_API_KEY", testKey)
	ta := startAgent(t, append([]string{"--model", "openai:gpt-test", "--base-url", f.srv.URL + "/v1", "--models", "gpt-test,gpt-other"}, args...)...)
	ta.agent.model.(*model.OpenAI).Backoff = time.Millisecond
	return ta
}

func compactJSON(t testing.TB, s string) string {
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	b, _ := json.Marshal(v)
	return string(b)
}

func assertUpdates(t *testing.T, want []string, got []string) {
	t.Helper()
	for i := range want {
		want[i] = compactJSON(t, want[i])
	}
	for i := range got {
		got[i] = compactJSON(t, got[i])
	}
	assert.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"))
}

// Verify a plain streamed answer, and the request that asked for it: the
// model, streaming with usage, a system prompt, the user's text, the tools,
// and the key.
func TestOpenAI_text(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
	assertUpdates(t, []string{
		`{"sessionUpdate":"agent_message_chunk","messageId":"msg_2","content":{"type":"text","text":"Hello"}}`,
		`{"sessionUpdate":"agent_message_chunk","messageId":"msg_2","content":{"type":"text","text":" there!"}}`,
		`{"sessionUpdate":"session_info_update","title":"hi","updatedAt":"2026-01-02T03:04:07Z"}`,
	}, ups)

	req := f.request(0)
	assert.Equal(t, "/v1/chat/completions", req.path)
	assert.Equal(t, "Bearer "+testKey, req.auth)
	assert.Equal(t, "gpt-test", req.body["model"])
	assert.Equal(t, true, req.body["stream"])
	assert.Equal(t, map[string]any{"include_usage": true}, req.body["stream_options"])
	msgs := req.body["messages"].([]any)
	require.Len(t, msgs, 2)
	assert.Equal(t, "system", msgs[0].(map[string]any)["role"])
	assert.Contains(t, msgs[0].(map[string]any)["content"], ta.cwd)
	assert.Equal(t, map[string]any{"role": "user", "content": "hi"}, msgs[1])
	var tools []string
	for _, tool := range req.body["tools"].([]any) {
		fn := tool.(map[string]any)["function"].(map[string]any)
		tools = append(tools, fn["name"].(string))
		assert.Equal(t, "object", fn["parameters"].(map[string]any)["type"])
	}
	assert.Equal(t, []string{"read_file", "write_file", "edit_file", "run_command", "list_directory", "find_files", "search_text", "update_plan"}, tools)
	ta.close()
	log, err := os.ReadFile(filepath.Join(ta.state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(log), `"usage":{"inputTokens":128,"outputTokens":3}`, "the turn's usage is persisted")
}

// Verify that reasoning deltas become thought chunks: Ollama's "reasoning"
// and DeepSeek's and vLLM's "reasoning_content".
func TestOpenAI_reasoning(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "ollama_reasoning.sse"}, fakeReply{file: "deepseek_reasoning.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assertUpdates(t, []string{
		`{"sessionUpdate":"agent_thought_chunk","messageId":"msg_2","content":{"type":"text","text":"The user"}}`,
		`{"sessionUpdate":"agent_thought_chunk","messageId":"msg_2","content":{"type":"text","text":" says hi."}}`,
		`{"sessionUpdate":"agent_message_chunk","messageId":"msg_3","content":{"type":"text","text":"Hi!"}}`,
		`{"sessionUpdate":"session_info_update","title":"hi","updatedAt":"2026-01-02T03:04:07Z"}`,
	}, ups)
	ups, r = ta.turnUpdates(3, sid, "again")
	require.Nil(t, r.Error)
	assertUpdates(t, []string{
		`{"sessionUpdate":"agent_thought_chunk","messageId":"msg_5","content":{"type":"text","text":"Think."}}`,
		`{"sessionUpdate":"agent_message_chunk","messageId":"msg_6","content":{"type":"text","text":"Done."}}`,
	}, ups)
	// The thought is not sent back; the answer is.
	msgs := f.request(1).body["messages"].([]any)
	assert.Equal(t, map[string]any{"role": "assistant", "content": "Hi!"}, msgs[2])
}

// Verify that tool-call deltas (id and name first, arguments in pieces, a
// second call by its index) become tool calls that run, and that the next
// request carries the assistant's calls and a tool message per call with
// the matching tool_call_id.
func TestOpenAI_toolCalls(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "tool_split.sse"}, fakeReply{file: "after_tool.sse"})
	ta := startOpenAI(t, f)
	require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "notes.txt"), []byte("buy milk\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "todo.txt"), []byte("call mum\n"), 0o644))
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "what do I need?")
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
	var kinds []string
	for _, u := range ups {
		var m struct{ SessionUpdate, Status string }
		json.Unmarshal([]byte(u), &m)
		kinds = append(kinds, strings.TrimSuffix(m.SessionUpdate+" "+m.Status, " "))
	}
	assert.Equal(t, []string{"agent_message_chunk", "tool_call pending", "tool_call_update in_progress", "tool_call_update completed",
		"tool_call pending", "tool_call_update in_progress", "tool_call_update completed", "agent_message_chunk", "session_info_update"}, kinds)
	assert.Contains(t, ups[1], `"rawInput":{"path":"notes.txt"}`)

	msgs := f.request(1).body["messages"].([]any)
	require.Len(t, msgs, 5)
	assert.Equal(t, map[string]any{"role": "assistant", "content": "Let me look.", "tool_calls": []any{
		map[string]any{"id": "call_Qa1", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"notes.txt"}`}},
		map[string]any{"id": "call_Qa2", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"todo.txt"}`}},
	}}, msgs[2])
	assert.Equal(t, map[string]any{"role": "tool", "tool_call_id": "call_Qa1", "content": "buy milk\n"}, msgs[3])
	assert.Equal(t, map[string]any{"role": "tool", "tool_call_id": "call_Qa2", "content": "call mum\n"}, msgs[4])
}

// Verify the finish reasons length and content_filter, and that a refused
// turn is not sent to the model again.
func TestOpenAI_stops(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "length.sse"}, fakeReply{file: "content_filter.sse"}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "write a lot")
	assert.JSONEq(t, `{"stopReason":"max_tokens"}`, string(r.Result))
	_, r = ta.turnUpdates(3, sid, "something bad")
	assert.JSONEq(t, `{"stopReason":"refusal"}`, string(r.Result))
	_, r = ta.turnUpdates(4, sid, "something fine")
	require.Nil(t, r.Error)
	var texts []string
	for _, m := range f.request(2).body["messages"].([]any)[1:] {
		texts = append(texts, m.(map[string]any)["content"].(string))
	}
	assert.Equal(t, []string{"write a lot", "Cut sh", "something fine"}, texts)
}

// Verify that 429 (with Retry-After) and 503 before the stream starts are
// retried, and the third attempt's answer streams.
func TestOpenAI_retry(t *testing.T) {
	f := newFakeOpenAI(t,
		fakeReply{status: 429, header: map[string]string{"Retry-After": "0"}, file: "error_429.json"},
		fakeReply{status: 503},
		fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assert.JSONEq(t, `{"stopReason":"end_turn"}`, string(r.Result))
	assert.Equal(t, 3, f.count())
}

// Verify that a connection dropped before any answer is retried.
func TestOpenAI_retryDroppedConnection(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{status: -1}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.Nil(t, r.Error)
	assert.Equal(t, 2, f.count(), "the dropped request, then its retry")
}

// Verify that a stream that goes silent fails the turn after the idle
// timeout, saying so, and is not retried.
func TestOpenAI_idleStream(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse", hold: true})
	ta := startOpenAI(t, f)
	ta.agent.model.(*model.OpenAI).Idle = 50 * time.Millisecond
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, "nothing arrived for 50ms")
	assert.Equal(t, 1, f.count())
}

// Verify that 401 fails at once (one request), with a code other than
// -32000, the status, the endpoint, the server's message and what to do,
// and no key.
func TestOpenAI_unauthorized(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{status: 401, file: "error_401.json"}, fakeReply{status: 404, file: "error_404_ollama.json"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Equal(t, 1005, r.Error.Code)
	for _, want := range []string{"401 Unauthorized", f.srv.URL + "/v1/chat/completions", "Incorrect API key provided: sk-test***6789", "check OPENAI_API_KEY"} {
		assert.Contains(t, r.Error.Message, want)
	}
	assert.NotContains(t, r.Error.Message, testKey)
	assert.Equal(t, 1, f.count(), "401 is not retried")

	_, r = ta.turnUpdates(3, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, `404 Not Found: model "llama9" not found, try pulling it first; check the model name`)
	assert.NotContains(t, ta.stderr.String(), testKey)
}

// Verify that a failure after output started is not retried, keeps what
// streamed in the session, and says what happened.
func TestOpenAI_failsMidStream(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{body: `data: {"choices":[{"index":0,"delta":{"content":"Partial"},"finish_reason":null}]}` + "\n\n" +
		`data: {"error":{"message":"The server had an error while processing your request."}}` + "\n\n"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ups, r := ta.turnUpdates(2, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, "The server had an error while processing your request")
	assert.Contains(t, r.Error.Message, "what streamed before is kept")
	assert.Contains(t, ups[0], `"text":"Partial"`)
	assert.Equal(t, 1, f.count())
	ta.close()
	log, _ := os.ReadFile(filepath.Join(ta.state, "sessions", sid+".jsonl"))
	assert.Contains(t, string(log), `"text":"Partial"`)
}

// Verify that cancelling the turn closes the HTTP request at once and the
// prompt answers cancelled.
func TestOpenAI_cancel(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse", hold: true})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ta.send(prompt(2, sid, "hi"))
	ta.await(`{"params":{"update":{"content":{"text":"Hello"}}}}`)
	ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	_, r := ta.updatesUntil(2)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(r.Result))
	select {
	case <-f.cancelled:
	case <-time.After(hang):
		t.Fatal("the server never saw the request end")
	}
}

// Verify that a conversation recorded with --record replays with
// --model replay:PATH to the same updates.
func TestOpenAI_recordReplay(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "ollama_reasoning.sse"}, fakeReply{file: "tool_split.sse"}, fakeReply{file: "after_tool.sse"})
	rec := filepath.Join(t.TempDir(), "recorded.jsonl")
	run := func(ta *testAgent) [][]string {
		require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "notes.txt"), []byte("buy milk\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, "todo.txt"), []byte("call mum\n"), 0o644))
		sid := ta.newSession()
		var turns [][]string
		for i, text := range []string{"hi", "what do I need?"} {
			ups, r := ta.turnUpdates(2+i, sid, text)
			require.Nil(t, r.Error)
			for j := range ups {
				ups[j] = ta.contract(ups[j])
			}
			turns = append(turns, ups)
		}
		ta.close()
		return turns
	}
	live := run(startOpenAI(t, f, "--record", rec))
	b, err := os.ReadFile(rec)
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(b), "\n"), "one entry per model call:\n%s", b)
	assert.Contains(t, string(b), `{"expect":"what do I need?","chunks":[{"text":"Let me look."},{"toolCall":{"id":"call_Qa1","name":"read_file","input":{"path":"notes.txt"}}},{"toolCall":{"id":"call_Qa2","name":"read_file","input":{"path":"todo.txt"}}},{"usage":{"inputTokens":300,"outputTokens":40}}],"stop":"tool_use"}`, "the call's usage once, at its end")
	assert.Contains(t, string(b), `{"expect":"call mum\n","chunks":[{"text":"You need milk."}],"stop":"end_turn"}`, "expect is the newest message: the last tool result")
	replayed := run(startAgent(t, "--model", "replay:"+rec))
	assert.Equal(t, live, replayed)
}

// Verify that a session reopened in a new process continues the same model
// conversation: the next request carries the earlier turn.
func TestOpenAI_continuesAfterLoad(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{file: "after_tool.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ta.turnUpdates(2, sid, "first")
	ta.close()

	t.Setenv("OPENAI_API_KEY", testKey)
	tb := newTestAgent(t)
	tb.cwd, tb.state = ta.cwd, ta.state
	a, _, _ := setup([]string{"--model", "openai:gpt-test", "--base-url", f.srv.URL + "/v1", "--models", "gpt-test", "--state-dir", tb.state}, io.Discard, tb.stderr)
	a.newID, a.now = counterIDs(), stepClock()
	tb.agent = a
	tb.attachAgent()
	tb.call(initLine)
	r := decodeResponse(t, tb.call(load(1, sid)))
	require.Nil(t, r.Error)
	_, r = tb.turnUpdates(2, sid, "second")
	require.Nil(t, r.Error)
	var got []string
	for _, m := range f.request(1).body["messages"].([]any)[1:] {
		mm := m.(map[string]any)
		got = append(got, mm["role"].(string)+": "+mm["content"].(string))
	}
	assert.Equal(t, []string{"user: first", "assistant: Hello there!", "user: second"}, got)
}

// Verify the model config option: --models lists the choices, choosing one
// changes the model of the next request, and the choice persists.
func TestOpenAI_chooseModel(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	r := decodeResponse(t, ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_config_option","params":{"sessionId":%q,"configId":"model","value":"gpt-other"}}`, sid)))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `"id":"model","name":"Model","category":"model","type":"select","currentValue":"gpt-other"`)
	ta.turnUpdates(3, sid, "hi")
	assert.Equal(t, "gpt-other", f.request(0).body["model"])
	r = decodeResponse(t, ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"session/set_config_option","params":{"sessionId":%q,"configId":"model","value":"gpt-9"}}`, sid)))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32602, r.Error.Code)
	ta.close()
	log, _ := os.ReadFile(filepath.Join(ta.state, "sessions", sid+".jsonl"))
	assert.Contains(t, string(log), `{"type":"config","model":"gpt-other"}`)
}

// Verify that without --models the choices come from the server's
// GET /models.
func TestOpenAI_listsServerModels(t *testing.T) {
	f := newFakeOpenAI(t)
	t.Setenv("OPENAI_API_KEY", testKey)
	ta := startAgent(t, "--model", "openai:gpt-test", "--base-url", f.srv.URL+"/v1")
	ta.call(initLine)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	assert.Contains(t, string(r.Result), `"currentValue":"gpt-test","options":[{"value":"gpt-test","name":"gpt-test"},{"value":"gpt-4.1","name":"gpt-4.1"},{"value":"gpt-4.1-mini","name":"gpt-4.1-mini"}]`)
}

// Verify that arrival never waits on the network: with GET /models held,
// a set_mode written behind a session/new is answered (from the models
// known) while the list is still being fetched, and so is a session/list.
func TestOpenAI_modelsNeverWaitedForAtArrival(t *testing.T) {
	f := newFakeOpenAI(t)
	f.modelsHold = make(chan struct{})
	t.Setenv("OPENAI_API_KEY", testKey)
	ta := startAgent(t, "--model", "openai:gpt-test", "--base-url", f.srv.URL+"/v1")
	ta.call(initLine)
	ta.sendTogether(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"read_only"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	for _, id := range []int{2, 3} {
		r := decodeResponse(t, ta.await(fmt.Sprintf(`{"id":%d}`, id)))
		require.Nil(t, r.Error, "request %d", id)
	}
	close(f.modelsHold) // only now does GET /models end: 2 and 3 were answered before
	r := decodeResponse(t, ta.await(`{"id":1}`))
	require.Nil(t, r.Error)
}

// Verify that tool calls a cancel left unrun are still answered in the
// conversation: the next request must follow an assistant message's
// tool_calls with a tool message for each, or servers reject it.
func TestOpenAI_cancelledToolsAnswered(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "two_writes.sse"}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ta.send(prompt(2, sid, "write two files"))
	ta.await(`{"method":"session/request_permission"}`)
	ta.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	_, r := ta.updatesUntil(2)
	assert.JSONEq(t, `{"stopReason":"cancelled"}`, string(r.Result))
	_, r = ta.turnUpdates(3, sid, "never mind")
	require.Nil(t, r.Error)
	var got []string
	for _, m := range f.request(1).body["messages"].([]any)[1:] {
		mm := m.(map[string]any)
		s := mm["role"].(string)
		calls, _ := mm["tool_calls"].([]any)
		for _, tc := range calls {
			s += " call " + tc.(map[string]any)["id"].(string)
		}
		if id, ok := mm["tool_call_id"]; ok {
			s += " answers " + id.(string)
		}
		got = append(got, s)
	}
	assert.Equal(t, []string{"user", "assistant call call_W1 call call_W2", "tool answers call_W1", "tool answers call_W2", "user"}, got)
}

// Verify that a recording holds no absolute path of the session's roots
// (a tool result naming a file is recorded with {cwd}) and so replays from
// another directory to the same transcript.
func TestOpenAI_recordingTravels(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "two_writes.sse"}, fakeReply{file: "text.sse"})
	rec := filepath.Join(t.TempDir(), "recorded.jsonl")
	run := func(ta *testAgent) []string {
		sid := ta.newSession()
		ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
		ups, r := ta.turnUpdates(3, sid, "write them")
		require.Nil(t, r.Error, "the turn")
		for j := range ups {
			ups[j] = ta.contract(ups[j])
		}
		ta.close()
		return ups
	}
	first := startOpenAI(t, f, "--record", rec)
	live := run(first)
	b, err := os.ReadFile(rec)
	require.NoError(t, err)
	assert.NotContains(t, string(b), first.cwd, "the recording holds the session's cwd")
	assert.Contains(t, string(b), `{cwd}/`)
	second := startAgent(t, "--model", "replay:"+rec)
	require.NotEqual(t, first.cwd, second.cwd)
	assert.Equal(t, live, run(second))
}

// sentBytes is the size of the messages of a request the fake server got,
// the system prompt left out.
func sentBytes(t *testing.T, r fakeRequest) (int, string) {
	msgs, _ := r.body["messages"].([]any)
	b, err := json.Marshal(msgs[1:])
	require.NoError(t, err)
	return len(b), string(b)
}

// Verify the context budget: as a session grows past --max-context-tokens,
// what the model is sent stays within it (the oldest turns left out, the
// current one whole), the user is told once, and the log keeps everything.
func TestOpenAI_contextBudget(t *testing.T) {
	var replies []fakeReply
	for range 6 {
		replies = append(replies, fakeReply{file: "text.sse"})
	}
	f := newFakeOpenAI(t, replies...)
	ta := startOpenAI(t, f, "--max-context-tokens", "2000")
	sid := ta.newSession()
	var notices int
	for i := range 6 {
		text := fmt.Sprintf("prompt %d: %s", i, strings.Repeat("words ", 350)) // about 530 tokens
		ups, r := ta.turnUpdates(2+i, sid, text)
		require.Nil(t, r.Error, "turn %d", i)
		for _, u := range ups {
			if strings.Contains(u, "context budget") {
				notices++
			}
		}
		n, body := sentBytes(t, f.request(i))
		assert.Less(t, n/model.BytesPerToken, 2000, "turn %d sent %d bytes", i, n)
		assert.Contains(t, body, fmt.Sprintf("prompt %d:", i), "the current turn is sent whole")
		if i >= 3 {
			assert.NotContains(t, body, "prompt 0:", "turn %d still sends the oldest turn", i)
		}
	}
	assert.Equal(t, 1, notices, "the user is told once")
	ta.close()
	log, err := os.ReadFile(filepath.Join(ta.state, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	for i := range 6 {
		assert.Contains(t, string(log), fmt.Sprintf("prompt %d:", i), "the log keeps every turn")
	}
}

// Verify that a provider's context-length error makes acpbridge send less
// and call again, once: the turn succeeds.
func TestOpenAI_contextLengthError(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{status: 400, file: "error_context.json"}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "first "+strings.Repeat("x", 4000))
	require.Nil(t, r.Error)
	_, r = ta.turnUpdates(3, sid, "second")
	require.Nil(t, r.Error, "the turn after a context-length error")
	require.Equal(t, 3, f.count())
	before, _ := sentBytes(t, f.request(1))
	after, body := sentBytes(t, f.request(2))
	assert.Less(t, after, before, "the call again sends less")
	assert.Contains(t, body, "second")
}

// Verify that a 200 answer that is not an event stream says what it is:
// a JSON error body (as proxies send) names the server's message, a web
// page names its content type, and a whole JSON completion (a server that
// ignores "stream") is read as the answer.
func TestOpenAI_notAnEventStream(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply fakeReply
		want  string
	}{
		{"JSON error", fakeReply{contentType: "application/json", body: `{"error":{"message":"model overloaded"}}`}, "the server reported: model overloaded"},
		{"HTML", fakeReply{contentType: "text/html; charset=utf-8", body: "<html><body>Please log in</body></html>"}, "a web page (text/html)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta := startOpenAI(t, newFakeOpenAI(t, c.reply))
			_, r := ta.turnUpdates(2, ta.newSession(), "hi")
			require.NotNil(t, r.Error)
			assert.Contains(t, r.Error.Message, c.want)
			assert.NotContains(t, r.Error.Message, "the stream ended before the answer did")
		})
	}
	t.Run("whole completion", func(t *testing.T) {
		ta := startOpenAI(t, newFakeOpenAI(t, fakeReply{contentType: "application/json",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"Whole answer."},"finish_reason":"stop"}]}`}))
		ups, r := ta.turnUpdates(2, ta.newSession(), "hi")
		require.Nil(t, r.Error)
		assert.Equal(t, "end_turn", stopReason(t, r))
		assert.Contains(t, strings.Join(ups, "\n"), `"text":"Whole answer."`)
	})
}

// Verify that a server that never stops is cut at a cap that the error
// names, for endless text, endless arguments of one tool call, and one
// event line that never ends; the turn ends and the session goes on.
func TestOpenAI_endlessStreamsAreCapped(t *testing.T) {
	chunk := strings.Repeat("x", 32<<10)
	mib := strings.Repeat("y", 1<<20)
	newCall := func(args string) func(bool) string {
		n := 0
		return func(bool) string {
			n++
			return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"c%d","function":{"name":"read_file","arguments":"%s"}}]}}]}`, n, n, args) + "\n\n"
		}
	}
	for _, c := range []struct {
		name    string
		endless func(first bool) string
		want    string
	}{
		{"text", func(bool) string {
			return `data: {"choices":[{"index":0,"delta":{"content":"` + chunk + `"}}]}` + "\n\n"
		}, "the answer's text passed 16 MiB"},
		{"tool arguments", func(first bool) string {
			if first {
				return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read_file","arguments":""}}]}}]}` + "\n\n"
			}
			return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + chunk + `"}}]}}]}` + "\n\n"
		}, "the arguments of tool call read_file passed 16 MiB"},
		{"line", func(first bool) string {
			if first {
				return `data: {"choices":[{"index":0,"delta":{"content":"`
			}
			return chunk
		}, "an event is longer than 16 MiB"},
		{"calls of 1 MiB each", newCall(mib), "the arguments of the answer's tool calls passed 32 MiB in all"},
		{"calls without end", newCall(""), "the answer made more than 256 tool calls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeOpenAI(t, fakeReply{endless: c.endless}, fakeReply{file: "text.sse"})
			ta := startOpenAI(t, f)
			sid := ta.newSession()
			_, r := ta.turnUpdates(2, sid, "hi")
			require.NotNil(t, r.Error)
			assert.Contains(t, r.Error.Message, c.want)
			_, r = ta.turnUpdates(3, sid, "again")
			assert.Nil(t, r.Error, "the session goes on after a capped answer")
		})
	}
}
