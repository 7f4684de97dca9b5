// served.go serves a scenario's model fixture as an OpenAI-compatible chat
// completions endpoint on 127.0.0.1, so that every agent a run starts,
// acpbridge or another, gets the same model answers. The fixture is read
// by acpbridge's own replay model: the same format, the same checks of an
// entry's expect, the same errors.
//
// Several conversations may call it at once (an agent's threads run in
// parallel). Each is told apart by its messages so far — a call whose
// messages extend those of an earlier call continues that call's
// conversation — and each follows the fixture from its own position: a
// call gets the first entry after its conversation's last that no other
// conversation has had — or, when that one's expect is not met by the
// call's newest message, the first later one whose expect is (else the
// first, whose check then says how the call diverged). Parallel
// threads with different prompts get the same entries every time,
// whatever order their calls come in.

package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// maxServedRequest bounds a chat completion request the endpoint reads.
const maxServedRequest = 64 << 20

// servedModelName is the model the endpoint says it serves.
const servedModelName = "scenario-model"

// servedModel is one endpoint: each chat completion is answered by the
// entry its conversation is at.
type servedModel struct {
	URL   string // the base URL, ending in /v1
	srv   *http.Server
	path  string   // the fixture
	roots []string // the run's workspace, for paths in an entry's expect

	mu      sync.Mutex // guards the fields below
	expects []string   // each entry's expect, "" for none
	had     []bool     // whether a conversation has had the entry
	convs   []*conversation
	counted servedCount
}

// conversation is one caller's place in the fixture.
type conversation struct {
	seen   []messageKey  // the messages of its last call
	mu     sync.Mutex    // one call at a time moves and reads its reader
	next   int           // the entries before this one are behind it
	replay *model.Replay // its own reader of the fixture
}

// servedCount is what the endpoint has served so far.
type servedCount struct {
	Requests int   `json:"requests"` // chat completions asked for
	Bytes    int64 `json:"bytes"`    // their request bodies
	Tokens   int64 `json:"tokens"`   // the usage the entries reported, prompt and completion
}

// since is what was served after an earlier count.
func (c servedCount) since(before servedCount) servedCount {
	return servedCount{c.Requests - before.Requests, c.Bytes - before.Bytes, c.Tokens - before.Tokens}
}

// count is what m has served so far; nothing for a run without a model.
func (m *servedModel) count() servedCount {
	if m == nil {
		return servedCount{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counted
}

// serveModel serves the replay fixture at path on a port of its own; roots
// are the run's workspace roots.
func serveModel(path string, roots []string) (*servedModel, error) {
	replay, err := model.NewReplay(path)
	if err != nil {
		return nil, err
	}
	expects, err := replay.Expects()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serving the model fixture: %w", err)
	}
	m := &servedModel{URL: "http://" + ln.Addr().String() + "/v1", path: path, roots: roots,
		expects: expects, had: make([]bool, len(expects))}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.complete)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, servedModelName)
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

// Close stops the endpoint.
func (m *servedModel) Close() { m.srv.Close() }

// complete answers one chat completion with its conversation's next entry:
// as an event stream when the request asks for one, else as one JSON
// answer. The request's newest message (not the model's) is what an
// entry's expect is checked against, as in acpbridge.
func (m *servedModel) complete(w http.ResponseWriter, r *http.Request) {
	body := &countingReader{r: http.MaxBytesReader(w, r.Body, maxServedRequest)}
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	err := json.NewDecoder(body).Decode(&req)
	m.mu.Lock()
	m.counted.Requests++
	m.counted.Bytes += body.n
	m.mu.Unlock()
	if err != nil {
		httpError(w, http.StatusBadRequest, "the request body is not JSON: "+err.Error())
		return
	}
	var seen []messageKey
	conv := model.NewConversation(nil)
	for _, msg := range req.Messages {
		text := contentText(msg.Content)
		conv.Add(model.Message{Role: msg.Role, Text: text})
		seen = append(seen, sha256.Sum256([]byte(msg.Role+"\x00"+text)))
	}
	call := &servedCall{w: w, stream: req.Stream}
	mreq := &model.Request{Conv: conv, Roots: m.roots}
	c, entry, err := m.choose(seen, mreq)
	if err != nil {
		call.finish("", err)
		return
	}
	c.mu.Lock() // two calls continuing one conversation at once take turns
	stop, err := c.serve(r.Context(), entry, mreq, call)
	c.mu.Unlock()
	if call.usage != nil {
		m.mu.Lock()
		m.counted.Tokens += call.tokens
		m.mu.Unlock()
	}
	call.finish(stop, err)
}

// choose finds the call's conversation (the one whose last call's messages
// the call's extend the most; a new one when none does) and picks its
// entry (see the file's comment).
func (m *servedModel) choose(seen []messageKey, req *model.Request) (*conversation, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var c *conversation
	for _, k := range m.convs {
		if len(k.seen) < len(seen) && slices.Equal(k.seen, seen[:len(k.seen)]) && (c == nil || len(k.seen) > len(c.seen)) {
			c = k
		}
	}
	if c == nil {
		replay, err := model.NewReplay(m.path)
		if err != nil {
			return nil, 0, err
		}
		c = &conversation{replay: replay}
		m.convs = append(m.convs, c)
	}
	entry := -1 // the first entry no conversation has had
	for i := c.next; i < len(m.expects) && entry < 0; i++ {
		if !m.had[i] {
			entry = i
		}
	}
	if entry < 0 {
		return nil, 0, model.Errorf("replay fixture %s has %d entries, and this model call asked for entry %d (the others went to this conversation or another); record the conversation again (--record) or add an entry",
			m.path, len(m.expects), len(m.expects)+1)
	}
	if m.expects[entry] != "" && !model.Matches(m.expects[entry], req) {
		// Another conversation's, maybe: the first later one whose
		// expect this call meets; else this one, whose check says how
		// the call diverged.
		for i := entry + 1; i < len(m.expects); i++ {
			if !m.had[i] && m.expects[i] != "" && model.Matches(m.expects[i], req) {
				entry = i
				break
			}
		}
	}
	m.had[entry], c.next, c.seen = true, entry+1, seen
	return c, entry, nil
}

// messageKey is a message of a call as conversations are told apart by it:
// a SHA-256 of its role and text, so that a conversation keeps 32 bytes a
// message however long they are.
type messageKey = [sha256.Size]byte

// serve answers a call with the fixture's entry at index entry.
func (c *conversation) serve(ctx context.Context, entry int, req *model.Request, out model.Sink) (acp.StopReason, error) {
	if err := c.replay.Seek(entry); err != nil {
		return "", model.Errorf("replay fixture: %v", err)
	}
	return c.replay.Complete(ctx, req, out)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// contentText is a chat message's text: its content string, or the text
// of its content parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String()
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "scenario"}})
}

// servedCall is one chat completion being answered: the model.Sink the
// replay serves the entry into. Streamed, each piece goes out as the event
// that says it (a pause flushes them); otherwise they are gathered into one
// chat.completion.
type servedCall struct {
	w       http.ResponseWriter
	stream  bool
	started bool // the stream's status and first event are written
	text    strings.Builder
	calls   []map[string]any
	usage   map[string]any
	tokens  int64 // the usage's prompt and completion tokens
}

func (c *servedCall) TextChunk(s string) error {
	c.text.WriteString(s)
	return c.event(map[string]any{"role": "assistant", "content": s})
}

func (c *servedCall) ThoughtChunk(s string) error {
	return c.event(map[string]any{"role": "assistant", "reasoning_content": s})
}

func (c *servedCall) ToolCall(tc model.ToolCall) {
	call := map[string]any{"index": len(c.calls), "id": tc.ID, "type": "function",
		"function": map[string]any{"name": tc.Name, "arguments": string(tc.Input)}}
	c.calls = append(c.calls, call)
	c.event(map[string]any{"role": "assistant", "tool_calls": []any{call}})
}

func (c *servedCall) AddUsage(u model.Usage) {
	c.usage = map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens,
		"total_tokens": u.InputTokens + u.OutputTokens}
	c.tokens = u.InputTokens + u.OutputTokens
}

func (c *servedCall) Pause() error {
	if f, ok := c.w.(http.Flusher); ok && c.started {
		f.Flush()
	}
	return nil
}

func (c *servedCall) KeepState(json.RawMessage) error { return nil }

// event writes a delta as a chat.completion.chunk, when streaming.
func (c *servedCall) event(delta map[string]any) error {
	if !c.stream {
		return nil
	}
	return c.write(chunk(map[string]any{"index": 0, "delta": delta}))
}

func (c *servedCall) write(data map[string]any) error {
	if !c.started {
		c.started = true
		c.w.Header().Set("Content-Type", "text/event-stream")
	}
	b, _ := json.Marshal(data)
	_, err := fmt.Fprintf(c.w, "data: %s\n\n", b)
	return err
}

// finish ends the answer: the finish reason the stop reason means and the
// usage, or the replay's error (its message, as a server's error event
// once the stream has begun).
func (c *servedCall) finish(stop acp.StopReason, err error) {
	if err != nil {
		msg := acp.AsError(err).Message
		if c.started {
			c.write(map[string]any{"error": map[string]any{"message": msg, "type": "scenario"}})
			return
		}
		httpError(c.w, http.StatusInternalServerError, msg)
		return
	}
	finish := finishReason(stop)
	if !c.stream {
		msg := map[string]any{"role": "assistant", "content": c.text.String()}
		if len(c.calls) > 0 {
			msg["tool_calls"] = c.calls
		}
		whole := map[string]any{"id": servedID, "object": "chat.completion", "created": 0, "model": servedModelName,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}}
		if c.usage != nil {
			whole["usage"] = c.usage
		}
		c.w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(c.w).Encode(whole)
		return
	}
	last := chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish})
	if c.usage != nil {
		last["usage"] = c.usage
	}
	c.write(last)
	fmt.Fprint(c.w, "data: [DONE]\n\n")
}

// servedID is the id of every answer (the answers are not told apart by it).
const servedID = "chatcmpl-scenario"

// chunk wraps a choice in a chat.completion.chunk.
func chunk(choice map[string]any) map[string]any {
	return map[string]any{"id": servedID, "object": "chat.completion.chunk", "created": 0, "model": servedModelName, "choices": []any{choice}}
}

// finishReason is OpenAI's word for a replay's stop reason.
func finishReason(stop acp.StopReason) string {
	switch stop {
	case acp.StopMaxTokens:
		return "length"
	case acp.StopRefusal:
		return "content_filter"
	case acp.StopToolUse:
		return "tool_calls"
	}
	return "stop"
}

// fixtureOf is the model fixture a run serves: the one the scenario's
// flags (expanded) give acpbridge with --model replay:PATH, else the run
// directory's model.jsonl when the scenario has one; "" when neither.
func fixtureOf(flags []string, dir string) string {
	if _, realModel, fixture := splitModelFlags(flags); realModel == "" && fileExists(fixture) {
		return fixture
	}
	if path := filepath.Join(dir, "model.jsonl"); fileExists(path) {
		return path
	}
	return ""
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
