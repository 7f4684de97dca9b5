// wire_gemini.go is the served model's Gemini wire (POST
// /v1beta/models/{model}:streamGenerateContent, :generateContent and
// :countTokens), the one gemini-cli speaks. An answer is one candidate
// whose parts are thoughts, text and function calls; streamed, each part
// is a data event of its own and the last carries the finish reason and
// the usage.

package served

import (
	"cmp"
	"encoding/json"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// decodeGemini reads a generateContent request.
func decodeGemini(body []byte, modelName string, stream bool) (*request, error) {
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				Thought      bool   `json:"thought"`
				FunctionCall *struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name                 string     `json:"name"`
				Parameters           jsonSchema `json:"parameters"`
				ParametersJSONSchema jsonSchema `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseMimeType   string          `json:"responseMimeType"`
			ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
			ResponseSchema     json.RawMessage `json:"responseSchema"`
			MaxOutputTokens    *int64          `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	r := &request{model: modelName, stream: stream, probe: atMostOne(req.GenerationConfig.MaxOutputTokens)}
	for _, c := range req.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		msg := model.Message{Role: role}
		var results []model.Message
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name})
			case p.FunctionResponse != nil:
				results = append(results, model.Message{Role: "tool", ToolCallID: cmp.Or(p.FunctionResponse.ID, p.FunctionResponse.Name), Text: string(p.FunctionResponse.Response)})
			case !p.Thought:
				msg.Text += ownWords(p.Text)
			}
		}
		if msg.Text != "" || len(msg.ToolCalls) > 0 {
			r.msgs = append(r.msgs, msg)
		}
		r.msgs = append(r.msgs, results...)
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			params := f.ParametersJSONSchema.params()
			if len(params) == 0 {
				params = f.Parameters.params()
			}
			r.tools = append(r.tools, offeredTool{Name: f.Name, Params: params})
		}
	}
	if g := req.GenerationConfig; g.ResponseMimeType == "application/json" {
		r.schema = orEmptySchema(g.ResponseJSONSchema)
		if len(g.ResponseJSONSchema) == 0 {
			r.schema = orEmptySchema(g.ResponseSchema)
		}
	}
	r.noteAnswers()
	return r, nil
}

// geminiAnswer is a generateContent answer being written.
type geminiAnswer struct {
	sse
	model  string
	stream bool
	parts  []map[string]any // every part, for a whole answer
	used   map[string]any
}

func (a *geminiAnswer) text(s string) error { return a.part(map[string]any{"text": s}) }
func (a *geminiAnswer) thought(s string) error {
	return a.part(map[string]any{"text": s, "thought": true})
}

func (a *geminiAnswer) call(c agentCall) error {
	return a.part(map[string]any{"functionCall": map[string]any{"id": c.ID, "name": c.Name, "args": c.Args}})
}

// part adds a part, streamed as an event of its own.
func (a *geminiAnswer) part(p map[string]any) error {
	a.parts = append(a.parts, p)
	if !a.stream {
		return nil
	}
	return a.data("", a.candidate([]map[string]any{p}, ""))
}

func (a *geminiAnswer) usage(u model.Usage) {
	a.used = map[string]any{"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens,
		"totalTokenCount": u.InputTokens + u.OutputTokens}
}

// candidate is an answer (or a streamed piece of one) with parts, and the
// finish reason and usage when finish is not "".
func (a *geminiAnswer) candidate(parts []map[string]any, finish string) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand}, "modelVersion": a.model}
	if finish != "" {
		cand["finishReason"] = finish
		out["usageMetadata"] = a.used
	}
	return out
}

func (a *geminiAnswer) finish(stop acp.StopReason, err error) {
	if err != nil {
		msg := errorText(err)
		body := map[string]any{"error": map[string]any{"code": statusOf(err), "message": msg, "status": "INTERNAL"}}
		if a.started {
			a.data("", body)
			return
		}
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(statusOf(err))
		json.NewEncoder(a.w).Encode(body)
		return
	}
	finish := "STOP"
	switch stop {
	case acp.StopMaxTokens:
		finish = "MAX_TOKENS"
	case acp.StopRefusal:
		finish = "SAFETY"
	}
	if !a.stream {
		if a.parts == nil {
			a.parts = []map[string]any{}
		}
		writeJSON(a.w, a.candidate(a.parts, finish))
		return
	}
	a.data("", a.candidate([]map[string]any{{"text": ""}}, finish))
}
