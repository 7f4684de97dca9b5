// Command multiagent is a small multi-session ACP agent, the other side of
// the comparison tests: one process holds any number of sessions, each
// prompt streamed from an OpenAI-compatible endpoint (OPENAI_BASE_URL,
// OPENAI_API_KEY) as agent_message_chunk updates. It offers no tools. It
// uses the standard library only, so that `go build ./testdata/multiagent`
// needs nothing more.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   any             `json:"error,omitempty"`
}

type session struct {
	history []map[string]string
	cancel  context.CancelFunc
}

type agent struct {
	mu       sync.Mutex
	out      *json.Encoder
	sessions map[string]*session
	next     int
}

func main() {
	a := &agent{out: json.NewEncoder(os.Stdout), sessions: map[string]*session{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 64<<20)
	var wg sync.WaitGroup
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.handle(m)
		}()
	}
	wg.Wait()
}

func (a *agent) send(m message) {
	m.JSONRPC = "2.0"
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.Encode(m)
}

func (a *agent) handle(m message) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	json.Unmarshal(m.Params, &p)
	reply := func(result any) { a.send(message{ID: m.ID, Result: result}) }
	switch m.Method {
	case "initialize":
		reply(map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{},
			"agentInfo": map[string]any{"name": "multiagent", "version": "0.1.0"}})
	case "session/new":
		a.mu.Lock()
		a.next++
		id := fmt.Sprintf("multi-%d", a.next)
		a.sessions[id] = &session{}
		a.mu.Unlock()
		reply(map[string]any{"sessionId": id})
	case "session/cancel":
		a.mu.Lock()
		if s := a.sessions[p.SessionID]; s != nil && s.cancel != nil {
			s.cancel()
		}
		a.mu.Unlock()
	case "session/prompt":
		var text []string
		for _, b := range p.Prompt {
			text = append(text, b.Text)
		}
		stop, err := a.prompt(p.SessionID, strings.Join(text, "\n"))
		if err != nil {
			a.send(message{ID: m.ID, Error: map[string]any{"code": -32603, "message": err.Error()}})
			return
		}
		reply(map[string]any{"stopReason": stop})
	default:
		if len(m.ID) > 0 && m.Method != "" {
			a.send(message{ID: m.ID, Error: map[string]any{"code": -32601, "message": "method not found: " + m.Method}})
		}
	}
}

// prompt streams one turn of session id from the model.
func (a *agent) prompt(id, text string) (string, error) {
	a.mu.Lock()
	s := a.sessions[id]
	if s == nil {
		a.mu.Unlock()
		return "", fmt.Errorf("no session %s", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.history = append(s.history, map[string]string{"role": "user", "content": text})
	history := append([]map[string]string(nil), s.history...)
	a.mu.Unlock()
	defer cancel()

	body, _ := json.Marshal(map[string]any{"model": "default", "stream": true, "messages": history})
	req, _ := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(os.Getenv("OPENAI_BASE_URL"), "/")+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "cancelled", nil
		}
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the model answered %s", resp.Status)
	}
	var answer strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil || len(ev.Choices) == 0 || ev.Choices[0].Delta.Content == "" {
			continue
		}
		answer.WriteString(ev.Choices[0].Delta.Content)
		a.send(message{Method: "session/update", Params: mustJSON(map[string]any{"sessionId": id,
			"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": ev.Choices[0].Delta.Content}}})})
	}
	if ctx.Err() != nil {
		return "cancelled", nil
	}
	a.mu.Lock()
	s.history = append(s.history, map[string]string{"role": "assistant", "content": answer.String()})
	a.mu.Unlock()
	return "end_turn", sc.Err()
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
