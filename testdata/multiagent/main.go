// Command multiagent is a small multi-session ACP agent, the other side of
// the comparison tests: one process holds any number of sessions, each
// prompt streamed from an OpenAI-compatible endpoint (OPENAI_BASE_URL,
// OPENAI_API_KEY) as agent_thought_chunk and agent_message_chunk updates.
// Its two tools, write_file and run_command, run through the client (a
// permission request, then fs/write_text_file or terminal/*), as a coding
// agent's would; with MULTIAGENT_TOOLS=none it offers the model no tools,
// a chat-only agent (as the TypeScript SDK's example agent is); with
// MULTIAGENT_FLOOD=N each prompt first writes N updates for sessions no
// client opened. It uses the
// standard library only, so that
// `go build ./testdata/multiagent` needs nothing more.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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

// reply is a client's answer to one of the agent's requests.
type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type session struct {
	cwd     string
	history []map[string]any
	cancel  context.CancelFunc
}

type agent struct {
	mu       sync.Mutex
	out      *json.Encoder
	sessions map[string]*session
	next     int
	calls    int                   // the agent's requests so far
	waiting  map[string]chan reply // by request id
}

func main() {
	a := &agent{out: json.NewEncoder(os.Stdout), sessions: map[string]*session{}, waiting: map[string]chan reply{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 64<<20)
	var wg sync.WaitGroup
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Method == "" && len(m.ID) > 0 { // an answer to the agent's request
			var r reply
			json.Unmarshal(sc.Bytes(), &r)
			a.mu.Lock()
			ch := a.waiting[string(m.ID)]
			delete(a.waiting, string(m.ID))
			a.mu.Unlock()
			if ch != nil {
				ch <- r
			}
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

// call sends a request to the client and waits for its answer.
func (a *agent) call(method string, params any) (json.RawMessage, error) {
	a.mu.Lock()
	a.calls++
	id := fmt.Sprint(a.calls)
	ch := make(chan reply, 1)
	a.waiting[id] = ch
	a.mu.Unlock()
	a.send(message{ID: json.RawMessage(id), Method: method, Params: mustJSON(params)})
	r := <-ch
	if r.Error != nil {
		return nil, fmt.Errorf("%s: %s", method, r.Error.Message)
	}
	return r.Result, nil
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
		var np struct {
			Cwd string `json:"cwd"`
		}
		json.Unmarshal(m.Params, &np)
		a.sessions[id] = &session{cwd: np.Cwd}
		a.mu.Unlock()
		reply(map[string]any{"sessionId": id})
	case "session/cancel":
		a.mu.Lock()
		if s := a.sessions[p.SessionID]; s != nil && s.cancel != nil {
			s.cancel()
		}
		a.mu.Unlock()
	case "session/prompt":
		a.flood()
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

// flood writes, with MULTIAGENT_FLOOD=N, N updates of 4.8 KB for sessions
// no client opened (as an agent with a bug, or one serving other clients,
// might), first touching the file MULTIAGENT_FLOOD_BEGUN names, if any.
func (a *agent) flood() {
	var n int
	if fmt.Sscan(os.Getenv("MULTIAGENT_FLOOD"), &n); n <= 0 {
		return
	}
	if begun := os.Getenv("MULTIAGENT_FLOOD_BEGUN"); begun != "" {
		os.WriteFile(begun, nil, 0o644)
	}
	text := strings.Repeat("x", 4800)
	for i := range n {
		a.send(message{Method: "session/update", Params: mustJSON(map[string]any{"sessionId": fmt.Sprintf("ghost-%d", i%100),
			"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}})})
	}
}

// tools are the tools the model is offered.
var tools = []any{
	map[string]any{"type": "function", "function": map[string]any{"name": "write_file", "description": "Write a file.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "run_command", "description": "Run a shell command line.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
}

// toolCall is a tool call the model streamed.
type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// prompt runs one turn of session id: model calls until the model calls
// no tool.
func (a *agent) prompt(id, text string) (string, error) {
	a.mu.Lock()
	s := a.sessions[id]
	if s == nil {
		a.mu.Unlock()
		return "", fmt.Errorf("no session %s", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.history = append(s.history, map[string]any{"role": "user", "content": text})
	a.mu.Unlock()
	defer cancel()
	for {
		a.mu.Lock()
		history := append([]map[string]any(nil), s.history...)
		a.mu.Unlock()
		answer, calls, err := a.complete(ctx, id, history)
		if ctx.Err() != nil {
			return "cancelled", nil
		}
		if err != nil {
			return "", err
		}
		msg := map[string]any{"role": "assistant", "content": answer}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		results := []map[string]any{msg}
		for _, c := range calls {
			results = append(results, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": a.runTool(id, s.cwd, c)})
		}
		a.mu.Lock()
		s.history = append(s.history, results...)
		a.mu.Unlock()
		if len(calls) == 0 {
			return "end_turn", nil
		}
	}
}

// complete streams one model call into session updates and returns the
// text and the tool calls.
func (a *agent) complete(ctx context.Context, id string, history []map[string]any) (string, []toolCall, error) {
	call := map[string]any{"model": "default", "stream": true, "messages": history}
	if os.Getenv("MULTIAGENT_TOOLS") != "none" {
		call["tools"] = tools
	}
	body, _ := json.Marshal(call)
	req, _ := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(os.Getenv("OPENAI_BASE_URL"), "/")+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("the model answered %s", resp.Status)
	}
	var answer strings.Builder
	var calls []toolCall
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
					Content   string `json:"content"`
					Reasoning string `json:"reasoning_content"`
					ToolCalls []struct {
						Index int `json:"index"`
						toolCall
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil || len(ev.Choices) == 0 {
			continue
		}
		d := ev.Choices[0].Delta
		if d.Reasoning != "" {
			a.update(id, map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": d.Reasoning}})
		}
		if d.Content != "" {
			answer.WriteString(d.Content)
			a.update(id, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": d.Content}})
		}
		for _, tc := range d.ToolCalls {
			for len(calls) <= tc.Index {
				calls = append(calls, toolCall{Type: "function"})
			}
			c := &calls[tc.Index]
			c.ID += tc.ID
			c.Function.Name += tc.Function.Name
			c.Function.Arguments += tc.Function.Arguments
		}
	}
	return answer.String(), calls, sc.Err()
}

func (a *agent) update(id string, u map[string]any) {
	a.send(message{Method: "session/update", Params: mustJSON(map[string]any{"sessionId": id, "update": u})})
}

// runTool runs one tool call through the client, after asking, and
// returns its result for the model.
func (a *agent) runTool(id, cwd string, c toolCall) string {
	var args struct{ Path, Content, Command string }
	json.Unmarshal([]byte(c.Function.Arguments), &args)
	kind, title := "execute", "Run "+args.Command
	if c.Function.Name == "write_file" {
		kind, title = "edit", "Write "+args.Path
	}
	a.update(id, map[string]any{"sessionUpdate": "tool_call", "toolCallId": c.ID, "title": title, "kind": kind, "status": "pending"})
	finish := func(status, text string) string {
		a.update(id, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": c.ID, "status": status,
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": text}}}})
		return text
	}
	res, err := a.call("session/request_permission", map[string]any{"sessionId": id, "toolCall": map[string]any{"toolCallId": c.ID, "title": title},
		"options": []any{map[string]any{"optionId": "yes", "name": "Allow", "kind": "allow_once"}, map[string]any{"optionId": "no", "name": "Reject", "kind": "reject_once"}}})
	var perm struct {
		Outcome struct{ Outcome, OptionID string } `json:"outcome"`
	}
	if err == nil {
		json.Unmarshal(res, &perm)
	}
	if perm.Outcome.OptionID != "yes" {
		return finish("failed", "the user refused")
	}
	switch c.Function.Name {
	case "write_file":
		path := args.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		if _, err := a.call("fs/write_text_file", map[string]any{"sessionId": id, "path": path, "content": args.Content}); err != nil {
			return finish("failed", err.Error())
		}
		return finish("completed", fmt.Sprintf("wrote %s", args.Path))
	case "run_command":
		res, err := a.call("terminal/create", map[string]any{"sessionId": id, "command": "sh", "args": []string{"-c", args.Command}, "cwd": cwd})
		if err != nil {
			return finish("failed", err.Error())
		}
		var term struct {
			TerminalID string `json:"terminalId"`
		}
		json.Unmarshal(res, &term)
		ref := map[string]any{"sessionId": id, "terminalId": term.TerminalID}
		a.call("terminal/wait_for_exit", ref)
		out, err := a.call("terminal/output", ref)
		a.call("terminal/release", ref)
		if err != nil {
			return finish("failed", err.Error())
		}
		var o struct {
			Output string `json:"output"`
		}
		json.Unmarshal(out, &o)
		return finish("completed", o.Output)
	}
	return finish("failed", "no tool "+c.Function.Name)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
