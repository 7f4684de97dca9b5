// wire_chat.go is the served model's OpenAI Chat Completions wire
// (POST /v1/chat/completions): acpbridge's own, and most agents'.

package served

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// decodeChat reads a chat completion request.
func decodeChat(body []byte) (*request, error) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name       string     `json:"name"`
				Parameters jsonSchema `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ResponseFormat *struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
		PromptCacheKey      string `json:"prompt_cache_key"`
		MaxTokens           *int64 `json:"max_tokens"`
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	r := &request{model: req.Model, stream: req.Stream, key: req.PromptCacheKey, probe: atMostOne(req.MaxTokens, req.MaxCompletionTokens)}
	for _, m := range req.Messages {
		msg := model.Message{Role: m.Role, Text: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name})
		}
		r.add(msg, m.Role == "system" || m.Role == "developer")
	}
	for _, t := range req.Tools {
		r.tools = append(r.tools, offeredTool{Name: t.Function.Name, Params: t.Function.Parameters.params()})
	}
	if f := req.ResponseFormat; f != nil && f.Type != "text" {
		r.schema = orEmptySchema(f.JSONSchema.Schema)
	}
	r.noteAnswers()
	return r, nil
}

// jsonSchema is a tool's parameter schema, read for its parameters' names.
type jsonSchema struct {
	Properties map[string]json.RawMessage `json:"properties"`
}

func (s jsonSchema) params() []string { return sortedKeys(anyMap(s.Properties)) }

func anyMap(m map[string]json.RawMessage) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// orEmptySchema is schema, or the schema any JSON meets.
func orEmptySchema(schema json.RawMessage) json.RawMessage {
	if len(schema) == 0 || string(schema) == "null" {
		return json.RawMessage("{}")
	}
	return schema
}

// contentText is a message's text: its content string, or the text of its
// content parts, each as ownWords has it.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return ownWords(s)
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(ownWords(p.Text))
	}
	return sb.String()
}

// chatAnswer is a chat completion being written: streamed, each piece goes
// out as the chat.completion.chunk that says it; otherwise they are
// gathered into one chat.completion.
type chatAnswer struct {
	sse
	model  string
	stream bool
	whole  strings.Builder // the text, for a whole answer
	calls  []map[string]any
	used   map[string]any
}

func (c *chatAnswer) text(s string) error {
	c.whole.WriteString(s)
	return c.event(map[string]any{"role": "assistant", "content": s})
}

func (c *chatAnswer) thought(s string) error {
	return c.event(map[string]any{"role": "assistant", "reasoning_content": s})
}

func (c *chatAnswer) call(tc agentCall) error {
	call := map[string]any{"index": len(c.calls), "id": tc.ID, "type": "function",
		"function": map[string]any{"name": tc.Name, "arguments": tc.argsJSON()}}
	c.calls = append(c.calls, call)
	return c.event(map[string]any{"role": "assistant", "tool_calls": []any{call}})
}

func (c *chatAnswer) usage(u model.Usage) {
	c.used = map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens,
		"total_tokens": u.InputTokens + u.OutputTokens}
}

// event writes a delta as a chat.completion.chunk, when streaming.
func (c *chatAnswer) event(delta map[string]any) error {
	if !c.stream {
		return nil
	}
	return c.data("", c.chunk(map[string]any{"index": 0, "delta": delta}))
}

// chunk wraps a choice in a chat.completion.chunk.
func (c *chatAnswer) chunk(choice map[string]any) map[string]any {
	return map[string]any{"id": c.id("chatcmpl-scenario-"), "object": "chat.completion.chunk", "created": 0, "model": c.model, "choices": []any{choice}}
}

// finish ends the answer: the finish reason the stop reason means and the
// usage, or the replay's error (its message, as a server's error event
// once the stream has begun).
func (c *chatAnswer) finish(stop acp.StopReason, err error) {
	if err != nil {
		msg := errorText(err)
		if c.started {
			c.data("", map[string]any{"error": map[string]any{"message": msg, "type": "scenario"}})
			return
		}
		httpError(c.w, statusOf(err), msg)
		return
	}
	finish := chatFinish(stop)
	if !c.stream {
		msg := map[string]any{"role": "assistant", "content": c.whole.String()}
		if len(c.calls) > 0 {
			msg["tool_calls"] = c.calls
		}
		writeJSON(c.w, map[string]any{"id": c.id("chatcmpl-scenario-"), "object": "chat.completion", "created": 0, "model": c.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": c.used})
		return
	}
	last := c.chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish})
	last["usage"] = c.used
	c.data("", last)
	fmt.Fprint(c.w, "data: [DONE]\n\n")
}

// chatFinish is OpenAI's word for a replay's stop reason.
func chatFinish(stop acp.StopReason) string {
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

// sse writes an event stream, its status and type set by the first event.
type sse struct {
	w       http.ResponseWriter
	n       int64 // the answer's number in the served model's life (Model.sse)
	started bool
}

// id is an id of this answer's: prefix and its number.
func (s *sse) id(prefix string) string { return fmt.Sprintf("%s%d", prefix, s.n) }

// data writes an event: its name (none when ""), and data as JSON.
func (s *sse) data(event string, data any) error {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "text/event-stream")
	}
	b, _ := json.Marshal(data)
	if event != "" {
		if _, err := fmt.Fprintf(s.w, "event: %s\n", event); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(s.w, "data: %s\n\n", b)
	return err
}

func (s *sse) flush() {
	if f, ok := s.w.(http.Flusher); ok && s.started {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "scenario"}})
}
