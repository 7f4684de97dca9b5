// served.go serves a scenario's model fixture as an OpenAI-compatible chat
// completions endpoint on 127.0.0.1, so that every agent a run starts,
// acpbridge or another, gets the same model answers.

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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

// servedModel is one run's endpoint: it answers each chat completion with
// the fixture's next entry, whichever agent or session asks.
type servedModel struct {
	URL string // the base URL, ending in /v1
	srv *http.Server

	mu      sync.Mutex
	entries []model.Entry
	readErr error // what stopped the reading of the fixture, for the calls past its entries
	next    int
}

// serveModel reads the replay fixture at path and serves it on a port of
// its own.
func serveModel(path string) (*servedModel, error) {
	entries, readErr := readEntries(path)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serving the model fixture: %w", err)
	}
	m := &servedModel{URL: "http://" + ln.Addr().String() + "/v1", entries: entries, readErr: readErr}
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

// readEntries reads a replay fixture: its entries, JSON objects one after
// another, with blank lines and lines starting with # between them. What
// cannot be read is the error every call past the entries read gets.
func readEntries(path string) ([]model.Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the model fixture: %w", err)
	}
	var text bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			line = []byte("\n")
		}
		text.Write(line)
	}
	var entries []model.Entry
	dec := json.NewDecoder(&text)
	for {
		var e model.Entry
		if err := dec.Decode(&e); err == io.EOF {
			return entries, nil
		} else if err != nil {
			return entries, fmt.Errorf("the model fixture %s, entry %d: %v", path, len(entries)+1, err)
		}
		entries = append(entries, e)
	}
}

// Close stops the endpoint.
func (m *servedModel) Close() { m.srv.Close() }

// take is the next entry, or an error saying the fixture has no more.
func (m *servedModel) take() (model.Entry, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= len(m.entries) {
		if m.readErr != nil {
			return model.Entry{}, m.next + 1, m.readErr
		}
		return model.Entry{}, m.next + 1, fmt.Errorf("the scenario's model fixture has %d entries and this is call %d: the agent asked the model more often than the recording did", len(m.entries), m.next+1)
	}
	m.next++
	return m.entries[m.next-1], m.next, nil
}

// complete answers one chat completion with the next entry: as an event
// stream when the request asks for one, else as one JSON answer.
func (m *servedModel) complete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxServedRequest)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "the request body is not JSON: "+err.Error())
		return
	}
	e, n, err := m.take()
	switch {
	case err != nil:
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	case e.Error != "":
		httpError(w, http.StatusInternalServerError, e.Error)
		return
	}
	a := answerOf(e, n)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.whole())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	for _, ev := range a.events {
		if ev.delay > 0 {
			if flusher != nil {
				flusher.Flush()
			}
			if !pause(r.Context(), ev.delay) {
				return
			}
			continue
		}
		b, _ := json.Marshal(ev.data)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// pause waits d, or until the agent hangs up; false when it did.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "scenario"}})
}

// answer is one entry as the endpoint sends it.
type answer struct {
	id     string
	events []servedEvent // the stream: chunks, delays, the finish, the usage
	text   strings.Builder
	calls  []map[string]any
	finish string
	usage  map[string]any
}

// servedEvent is one event of the stream, or a pause in it.
type servedEvent struct {
	data  map[string]any
	delay time.Duration
}

// answerOf turns the fixture's entry (call n) into what the endpoint
// sends: text as content, thoughts as reasoning_content, tool calls with
// their arguments, usage, and the finish reason the stop reason means.
func answerOf(e model.Entry, n int) *answer {
	a := &answer{id: fmt.Sprintf("chatcmpl-scenario-%d", n)}
	delta := func(d map[string]any) {
		a.events = append(a.events, servedEvent{data: a.chunk(map[string]any{"index": 0, "delta": d})})
	}
	for _, c := range e.Chunks {
		switch {
		case c.Text != nil:
			a.text.WriteString(*c.Text)
			delta(map[string]any{"role": "assistant", "content": *c.Text})
		case c.Thought != nil:
			delta(map[string]any{"role": "assistant", "reasoning_content": *c.Thought})
		case c.ToolCall != nil:
			args := string(c.ToolCall.Input)
			if args == "" {
				args = "{}"
			}
			call := map[string]any{"index": len(a.calls), "id": c.ToolCall.ID, "type": "function",
				"function": map[string]any{"name": c.ToolCall.Name, "arguments": args}}
			a.calls = append(a.calls, call)
			delta(map[string]any{"role": "assistant", "tool_calls": []any{call}})
		case c.Usage != nil:
			a.usage = map[string]any{"prompt_tokens": c.Usage.InputTokens, "completion_tokens": c.Usage.OutputTokens,
				"total_tokens": c.Usage.InputTokens + c.Usage.OutputTokens}
		case c.DelayMs != nil:
			a.events = append(a.events, servedEvent{delay: time.Duration(*c.DelayMs) * time.Millisecond})
		}
	}
	a.finish = finishReason(e.Stop, len(a.calls) > 0)
	last := a.chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": a.finish})
	if a.usage != nil {
		last["usage"] = a.usage
	}
	a.events = append(a.events, servedEvent{data: last})
	return a
}

// chunk wraps a choice in a chat.completion.chunk.
func (a *answer) chunk(choice map[string]any) map[string]any {
	return map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": 0, "model": servedModelName, "choices": []any{choice}}
}

// whole is the answer as one chat.completion, for a request without
// "stream".
func (a *answer) whole() map[string]any {
	msg := map[string]any{"role": "assistant", "content": a.text.String()}
	if len(a.calls) > 0 {
		msg["tool_calls"] = a.calls
	}
	out := map[string]any{"id": a.id, "object": "chat.completion", "created": 0, "model": servedModelName,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.finish}}}
	if a.usage != nil {
		out["usage"] = a.usage
	}
	return out
}

// finishReason is OpenAI's word for a fixture's stop reason.
func finishReason(stop acp.StopReason, calls bool) string {
	switch {
	case stop == acp.StopMaxTokens:
		return "length"
	case stop == acp.StopRefusal:
		return "content_filter"
	case calls:
		return "tool_calls"
	}
	return "stop"
}

// fixtureOf is the model fixture a run serves: the one the scenario's
// flags (expanded) give acpbridge with --model replay:PATH, else the run
// directory's model.jsonl when the scenario has one; "" when neither.
func fixtureOf(flags []string, dir string) string {
	for i, f := range flags {
		v, ok := strings.CutPrefix(strings.TrimLeft(f, "-"), "model=")
		if !ok && strings.TrimLeft(f, "-") == "model" && i+1 < len(flags) {
			v, ok = flags[i+1], true
		}
		if path, isReplay := strings.CutPrefix(v, "replay:"); ok && isReplay && fileExists(path) {
			return path
		}
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
