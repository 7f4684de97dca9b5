// wire_responses.go is the served model's OpenAI Responses wire
// (POST /v1/responses), the one codex speaks. An answer is a list of
// output items — a reasoning summary, a message, function and custom tool
// calls — each streamed as output_item.added, its deltas and
// output_item.done (the event codex builds the item from), then
// response.completed with the usage.

package served

import (
	"encoding/json"
	"fmt"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// decodeResponses reads a Responses request.
func decodeResponses(body []byte) (*request, error) {
	var req struct {
		Model  string          `json:"model"`
		Stream bool            `json:"stream"`
		Input  json.RawMessage `json:"input"`
		Tools  []struct {
			Type       string     `json:"type"`
			Name       string     `json:"name"`
			Parameters jsonSchema `json:"parameters"`
		} `json:"tools"`
		Text struct {
			Format struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"text"`
		PromptCacheKey  string `json:"prompt_cache_key"`
		MaxOutputTokens *int64 `json:"max_output_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	r := &request{model: req.Model, stream: req.Stream, key: req.PromptCacheKey, probe: atMostOne(req.MaxOutputTokens)}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Output    json.RawMessage `json:"output"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
	}
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		r.msgs = []model.Message{{Role: "user", Text: text}}
	} else if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, fmt.Errorf("input: %v", err)
	}
	for _, it := range items {
		switch it.Type {
		case "message", "":
			role := it.Role
			if role != "assistant" {
				role = "user" // developer and system messages are context, as the user's are
			}
			if text := contentText(it.Content); text != "" {
				r.add(model.Message{Role: role, Text: text}, it.Role == "developer" || it.Role == "system")
			}
		case "function_call", "custom_tool_call", "local_shell_call":
			r.msgs = append(r.msgs, model.Message{Role: "assistant", ToolCalls: []model.ToolCall{{ID: it.CallID, Name: it.Name}}})
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			r.msgs = append(r.msgs, model.Message{Role: "tool", ToolCallID: it.CallID, Text: contentText(it.Output)})
		}
	}
	for _, t := range req.Tools {
		if t.Name != "" {
			r.tools = append(r.tools, offeredTool{Name: t.Name, Params: t.Parameters.params(), Freeform: t.Type == "custom"})
		}
	}
	if f := req.Text.Format; f.Type == "json_schema" || f.Type == "json_object" {
		r.schema = orEmptySchema(f.Schema)
	}
	r.noteAnswers()
	return r, nil
}

// responsesAnswer is a Responses answer being written.
type responsesAnswer struct {
	sse
	model  string
	stream bool
	output []map[string]any // the items done
	open   map[string]any   // the message or reasoning item being streamed, nil when none
	opened string           // its text so far
	used   map[string]any
}

func (a *responsesAnswer) text(s string) error    { return a.delta("message", s) }
func (a *responsesAnswer) thought(s string) error { return a.delta("reasoning", s) }

// delta adds s to the open item of kind typ, opening one first.
func (a *responsesAnswer) delta(typ, s string) error {
	if a.open != nil && a.open["type"] != typ {
		a.closeItem()
	}
	if a.open == nil {
		a.open = map[string]any{"type": typ, "id": fmt.Sprintf("%s_%d_%d", typ[:3], a.n, len(a.output))}
		if typ == "message" {
			a.open["role"] = "assistant"
			a.open["content"] = []any{}
		} else {
			a.open["summary"] = []any{}
		}
		a.opened = ""
		a.event("response.output_item.added", map[string]any{"output_index": len(a.output), "item": a.open})
	}
	a.opened += s
	event := map[string]any{"item_id": a.open["id"], "output_index": len(a.output), "delta": s}
	if typ == "message" {
		event["content_index"] = 0
		return a.event("response.output_text.delta", event)
	}
	event["summary_index"] = 0
	return a.event("response.reasoning_summary_text.delta", event)
}

// closeItem ends the open item with its whole text.
func (a *responsesAnswer) closeItem() {
	item := a.open
	if item["type"] == "message" {
		item["content"] = []any{map[string]any{"type": "output_text", "text": a.opened, "annotations": []any{}}}
		item["status"] = "completed"
	} else {
		item["summary"] = []any{map[string]any{"type": "summary_text", "text": a.opened}}
	}
	a.done(item)
	a.open = nil
}

func (a *responsesAnswer) call(c agentCall) error {
	if a.open != nil {
		a.closeItem()
	}
	item := map[string]any{"type": "function_call", "id": a.id("fc_") + "_" + c.ID, "call_id": c.ID, "name": c.Name, "arguments": c.argsJSON(), "status": "completed"}
	if c.Freeform {
		item = map[string]any{"type": "custom_tool_call", "id": a.id("ctc_") + "_" + c.ID, "call_id": c.ID, "name": c.Name, "input": c.Input, "status": "completed"}
	}
	a.event("response.output_item.added", map[string]any{"output_index": len(a.output), "item": item})
	return a.done(item)
}

// done writes an item's output_item.done and keeps it for the whole answer.
func (a *responsesAnswer) done(item map[string]any) error {
	err := a.event("response.output_item.done", map[string]any{"output_index": len(a.output), "item": item})
	a.output = append(a.output, item)
	return err
}

func (a *responsesAnswer) usage(u model.Usage) {
	a.used = map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
}

// event writes a streamed event, its type in its data too.
func (a *responsesAnswer) event(typ string, data map[string]any) error {
	if !a.stream {
		return nil
	}
	if !a.started {
		a.data("response.created", map[string]any{"type": "response.created", "response": a.response("in_progress")})
	}
	data["type"] = typ
	return a.data(typ, data)
}

// response is the response object, as response.completed and a whole
// answer carry it.
func (a *responsesAnswer) response(status string) map[string]any {
	return map[string]any{"id": a.id("resp_scenario_"), "object": "response", "created_at": 0, "status": status, "model": a.model,
		"output": a.output, "usage": a.used}
}

func (a *responsesAnswer) finish(stop acp.StopReason, err error) {
	if err != nil {
		msg := errorText(err)
		if !a.stream || !a.started {
			httpError(a.w, statusOf(err), msg)
			return
		}
		resp := a.response("failed")
		resp["error"] = map[string]any{"code": "server_error", "message": msg}
		a.event("response.failed", map[string]any{"response": resp})
		return
	}
	if a.open != nil {
		a.closeItem()
	}
	resp := a.response("completed")
	if stop == acp.StopMaxTokens {
		resp["status"] = "incomplete"
		resp["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	if !a.stream {
		writeJSON(a.w, resp)
		return
	}
	a.event("response.completed", map[string]any{"response": resp})
}
