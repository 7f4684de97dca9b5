// served.go serves a scenario's model fixture as an OpenAI-compatible chat
// completions endpoint on 127.0.0.1, so that every agent a run starts,
// acpbridge or another, gets the same model answers. The fixture is read
// by acpbridge's own replay model: the same format, the same checks of an
// entry's expect, the same errors.

package scenario

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// maxServedRequest bounds a chat completion request the endpoint reads.
const maxServedRequest = 64 << 20

// servedModelName is the model the endpoint says it serves.
const servedModelName = "scenario-model"

// servedModel is one run's endpoint: each chat completion, whichever agent
// or session asks, is answered by the fixture's next entry.
type servedModel struct {
	URL    string // the base URL, ending in /v1
	srv    *http.Server
	replay *model.Replay // a sequence: it answers one call at a time
	roots  []string      // the run's workspace, for paths in an entry's expect
}

// serveModel serves the replay fixture at path on a port of its own; roots
// are the run's workspace roots.
func serveModel(path string, roots []string) (*servedModel, error) {
	replay, err := model.NewReplay(path)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serving the model fixture: %w", err)
	}
	m := &servedModel{URL: "http://" + ln.Addr().String() + "/v1", replay: replay, roots: roots}
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

// complete answers one chat completion with the fixture's next entry: as an
// event stream when the request asks for one, else as one JSON answer. The
// request's newest message (not the model's) is what an entry's expect is
// checked against, as in acpbridge.
func (m *servedModel) complete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxServedRequest)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "the request body is not JSON: "+err.Error())
		return
	}
	conv := model.NewConversation(m.replay)
	for _, msg := range req.Messages {
		conv.Add(model.Message{Role: msg.Role, Text: contentText(msg.Content)})
	}
	call := &servedCall{w: w, stream: req.Stream}
	stop, err := m.replay.Complete(r.Context(), &model.Request{Conv: conv, Roots: m.roots}, call)
	call.finish(stop, err)
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
