// wire_anthropic.go is the served model's Anthropic Messages wire
// (POST /v1/messages, and /v1/messages/count_tokens), the one the Claude
// Agent SDK speaks. An answer is a list of content blocks — thinking,
// text, tool_use — each streamed as content_block_start, its deltas and
// content_block_stop (without which a tool call is dropped), between
// message_start and message_delta (the stop reason and usage) and
// message_stop.

package served

import (
	"encoding/json"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// decodeAnthropic reads a Messages request.
func decodeAnthropic(body []byte) (*request, error) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string     `json:"name"`
			InputSchema jsonSchema `json:"input_schema"`
		} `json:"tools"`
		OutputFormat *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"output_format"`
		// OutputConfig.Format is the newer place of the same ask (Claude
		// Code 2.1's title call).
		OutputConfig struct {
			Format *struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"output_config"`
		Metadata struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
		MaxTokens *int64 `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	r := &request{model: req.Model, stream: req.Stream, key: anthropicSession(req.Metadata.UserID), probe: atMostOne(req.MaxTokens)}
	for _, m := range req.Messages {
		if m.Role == "system" {
			for _, msg := range anthropicMessages("user", m.Content) {
				r.add(msg, true)
			}
			continue
		}
		r.msgs = append(r.msgs, anthropicMessages(m.Role, m.Content)...)
	}
	for _, t := range req.Tools {
		r.tools = append(r.tools, offeredTool{Name: t.Name, Params: t.InputSchema.params()})
	}
	if req.OutputFormat != nil {
		r.schema = orEmptySchema(req.OutputFormat.Schema)
	}
	if f := req.OutputConfig.Format; f != nil && (f.Type == "json_schema" || f.Type == "json_object" || len(f.Schema) > 0) {
		r.schema = orEmptySchema(f.Schema)
	}
	r.noteAnswers()
	return r, nil
}

// anthropicSession is the conversation's key in a Messages request's
// metadata.user_id: the session_id of the JSON object Claude Code puts
// there; "" for any other user_id, which names a user, not a conversation.
func anthropicSession(userID string) string {
	var id struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal([]byte(userID), &id) == nil && id.SessionID != "" {
		return id.SessionID
	}
	return ""
}

// anthropicMessages are a message's blocks as the conversation's messages:
// each tool result as one of its own, then its text (the user's own words,
// injected context left out: claude sends a new prompt in the message that
// carries the last tool results), its tool uses on the assistant's
// message.
func anthropicMessages(role string, content json.RawMessage) []model.Message {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []model.Message{{Role: role, Text: ownWords(s)}}
	}
	var blocks []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
	}
	json.Unmarshal(content, &blocks)
	msg := model.Message{Role: role}
	var results []model.Message
	for _, b := range blocks {
		switch b.Type {
		case "text":
			msg.Text += ownWords(b.Text)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name})
		case "tool_result":
			results = append(results, model.Message{Role: "tool", ToolCallID: b.ToolUseID, Text: contentText(b.Content)})
		}
	}
	if msg.Text == "" && len(msg.ToolCalls) == 0 {
		return results
	}
	if role == "assistant" {
		return append([]model.Message{msg}, results...)
	}
	return append(results, msg) // the user's words after the results they follow
}

// anthropicAnswer is a Messages answer being written.
type anthropicAnswer struct {
	sse
	model  string
	stream bool
	blocks []map[string]any // the blocks done, for a whole answer
	open   map[string]any   // the text or thinking block being streamed, nil when none
	opened string
	used   model.Usage
}

func (a *anthropicAnswer) text(s string) error    { return a.delta("text", s) }
func (a *anthropicAnswer) thought(s string) error { return a.delta("thinking", s) }

// delta adds s to the open block of kind typ, opening one first.
func (a *anthropicAnswer) delta(typ, s string) error {
	if a.open != nil && a.open["type"] != typ {
		a.closeBlock()
	}
	if a.open == nil {
		a.open = map[string]any{"type": typ, typ: ""}
		if typ == "thinking" {
			a.open["signature"] = ""
		}
		a.opened = ""
		a.event("content_block_start", map[string]any{"index": len(a.blocks), "content_block": a.open})
	}
	a.opened += s
	return a.event("content_block_delta", map[string]any{"index": len(a.blocks), "delta": map[string]any{"type": typ + "_delta", typ: s}})
}

// closeBlock ends the open block with its whole text.
func (a *anthropicAnswer) closeBlock() {
	block := map[string]any{"type": a.open["type"]}
	block[a.open["type"].(string)] = a.opened
	if block["type"] == "thinking" {
		a.event("content_block_delta", map[string]any{"index": len(a.blocks), "delta": map[string]any{"type": "signature_delta", "signature": "scenario"}})
		block["signature"] = "scenario"
	}
	a.event("content_block_stop", map[string]any{"index": len(a.blocks)})
	a.blocks = append(a.blocks, block)
	a.open = nil
}

func (a *anthropicAnswer) call(c agentCall) error {
	if a.open != nil {
		a.closeBlock()
	}
	i := len(a.blocks)
	a.event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
	a.event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.argsJSON()}})
	err := a.event("content_block_stop", map[string]any{"index": i})
	a.blocks = append(a.blocks, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Args})
	return err
}

func (a *anthropicAnswer) usage(u model.Usage) { a.used = u }

// event writes a streamed event, message_start first.
func (a *anthropicAnswer) event(typ string, data map[string]any) error {
	if !a.stream {
		return nil
	}
	if !a.started {
		a.data("message_start", map[string]any{"type": "message_start", "message": a.message(nil)})
	}
	data["type"] = typ
	return a.data(typ, data)
}

// message is the message object: message_start's (no blocks yet, no stop)
// or a whole answer's.
func (a *anthropicAnswer) message(stop any) map[string]any {
	return map[string]any{"id": a.id("msg_scenario_"), "type": "message", "role": "assistant", "model": a.model,
		"content": a.blocks, "stop_reason": stop, "stop_sequence": nil,
		"usage": anthropicUsage(a.used)}
}

// anthropicUsage is a call's usage as the Messages API gives it, every
// field present: claude adds the cache fields to the input and output
// tokens for the context it reports, and one left out makes it null.
func anthropicUsage(u model.Usage) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

func (a *anthropicAnswer) finish(stop acp.StopReason, err error) {
	if err != nil {
		msg := errorText(err)
		if !a.stream || !a.started {
			w := a.w
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(statusOf(err))
			json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
			return
		}
		a.data("error", map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
		return
	}
	if a.open != nil {
		a.closeBlock()
	}
	reason := anthropicStop(stop)
	if !a.stream {
		if a.blocks == nil {
			a.blocks = []map[string]any{}
		}
		writeJSON(a.w, a.message(reason))
		return
	}
	a.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason, "stop_sequence": nil},
		"usage": anthropicUsage(a.used)})
	a.event("message_stop", map[string]any{})
}

// anthropicStop is Anthropic's word for a replay's stop reason.
func anthropicStop(stop acp.StopReason) string {
	switch stop {
	case acp.StopMaxTokens:
		return "max_tokens"
	case acp.StopRefusal:
		return "refusal"
	case acp.StopToolUse:
		return "tool_use"
	}
	return "end_turn"
}
