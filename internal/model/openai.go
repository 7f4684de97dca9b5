// openai.go holds the OpenAI-compatible model (--model openai:MODEL):
// streaming Chat Completions against OpenAI, Ollama, llama.cpp, vLLM or LM
// Studio, with the tools offered as functions.
//
// The rules:
//   - 429, 5xx and connection errors before the first byte of a stream are
//     retried (backoff with jitter, Retry-After honoured); once output has
//     started nothing is retried, since that would repeat text.
//   - 401, 403, 404 and other 4xx fail at once, with the status, the
//     endpoint (no credentials) and the server's own message.
//   - The key is the caller's (OPENAI_API_KEY, or the stored sign-in),
//     asked for at each request, and never logged or shown.
//   - The stream is flushed to the client whenever the body has nothing
//     buffered, that is when the next read would wait for the network.
//   - Cancelling the turn closes the request at once.

package model

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
)

const (
	openaiRetries       = 3               // further attempts after the first
	openaiIdleTimeout   = 3 * time.Minute // a stream silent this long fails
	openaiModelsTimeout = 1500 * time.Millisecond
)

type OpenAI struct {
	base     string        // the endpoint, without a trailing slash
	shown    string        // the endpoint as errors show it: no credentials, no query
	key      func() string // the provider's key now ("" for none): a sign-out drops it
	client   *http.Client
	log      *slog.Logger
	listed   []string      // --models
	Backoff  time.Duration // the first retry's base delay
	Idle     time.Duration
	maxRetry time.Duration // the longest Retry-After honoured
	model    string        // --model's: what a new session starts on

	mu       sync.Mutex
	known    []string      // the models that can be chosen, as known now
	fetched  chan struct{} // closed once the first GET /models has ended
	fetching bool          // a GET /models is under way
	asked    time.Time     // when the last one began
}

// modelsRefresh is how old the server's model list may grow before the
// next look at it starts one in the background.
const modelsRefresh = 10 * time.Minute

// NewOpenAI is the model name of the OpenAI-compatible endpoint at baseURL,
// sent the key that key returns (nil: none); models, when given, is what
// the model picker offers.
func NewOpenAI(baseURL string, key func() string, models []string, name string, log *slog.Logger) (*OpenAI, error) {
	m, err := endpoint(baseURL, key)
	if err != nil {
		return nil, err
	}
	m.log, m.listed, m.model = log, models, name
	m.Backoff, m.Idle, m.maxRetry = 500*time.Millisecond, openaiIdleTimeout, time.Minute
	m.fetched = make(chan struct{})
	if len(models) > 0 {
		m.known = m.withDefault(models)
		close(m.fetched)
	} else {
		m.known = []string{name}
		m.startFetch()
	}
	return m, nil
}

// endpoint is an OpenAI client of baseURL with its key, no model chosen.
func endpoint(baseURL string, key func() string) (*OpenAI, error) {
	shown, err := ShownEndpoint(baseURL)
	if err != nil {
		return nil, err
	}
	if key == nil {
		key = func() string { return "" }
	}
	return &OpenAI{
		base:   strings.TrimSuffix(baseURL, "/"),
		shown:  shown,
		key:    key,
		client: &http.Client{Transport: newTransport()},
	}, nil
}

// ShownEndpoint is baseURL as errors and logs show it (no credentials, no
// query), or an error when it is not an http or https URL.
func ShownEndpoint(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--base-url %q is not an http or https URL", baseURL)
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// ListModels asks the endpoint at baseURL for its models with key (GET
// /models), as a sign-in checks a key: the ids, sorted; a refusal is an
// *EndpointError with the endpoint's own words.
func ListModels(ctx context.Context, baseURL, key string) ([]string, error) {
	m, err := endpoint(baseURL, func() string { return key })
	if err != nil {
		return nil, err
	}
	return m.fetchModels(ctx)
}

// EndpointError is an endpoint's answer other than 200: its status and
// its own message (the key redacted).
type EndpointError struct {
	URL     string // the endpoint asked, without credentials
	Status  string // as "401 Unauthorized"
	Code    int
	Message string
}

func (e *EndpointError) Error() string {
	return fmt.Sprintf("%s answered %s: %s", e.URL, e.Status, e.Message)
}

// Refused reports whether the endpoint refused the key (401 or 403).
func (e *EndpointError) Refused() bool {
	return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
}

// newTransport is the model client's transport: bounded dialling and TLS,
// and a long wait for the first header (a local server may think long
// before it answers).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
}

func (m *OpenAI) NeedsHistory() bool { return true }

func (m *OpenAI) DefaultName() string { return m.model }

// Resume: the conversation is all the endpoint needs.
func (m *OpenAI) Resume(json.RawMessage) error { return nil }

// Models lists the models that can be chosen, as known now, and never
// waits: --models, else the server's GET /models, asked in the background
// from the start and again when the answer is old, else the default one.
// (set_mode and set_config_option build their answers at arrival, which
// must not wait on the network.)
func (m *OpenAI) Models() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.listed) == 0 && !m.fetching && time.Since(m.asked) > modelsRefresh {
		m.startFetchLocked()
	}
	return m.known
}

// AwaitModels waits, up to the GET's own timeout, for the first list of
// the server's models: a new session's step (never arrival) calls it, so
// that the first session offers them.
func (m *OpenAI) AwaitModels() { <-m.fetched }

func (m *OpenAI) startFetch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.startFetchLocked()
}

// startFetchLocked asks the server for its models in the background.
func (m *OpenAI) startFetchLocked() {
	m.fetching, m.asked = true, time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), openaiModelsTimeout)
		ids, err := m.fetchModels(ctx)
		cancel()
		if err != nil {
			m.log.Warn("listing the server's models failed; offering the ones known", "endpoint", m.shown+"/models", "err", err)
		}
		m.mu.Lock()
		if len(ids) > 0 {
			m.known = m.withDefault(ids)
		}
		m.fetching = false
		select {
		case <-m.fetched:
		default:
			close(m.fetched)
		}
		m.mu.Unlock()
	}()
}

// withDefault is ids with the default model first when it is missing.
func (m *OpenAI) withDefault(ids []string) []string {
	if !slices.Contains(ids, m.model) {
		return append([]string{m.model}, ids...)
	}
	return ids
}

func (m *OpenAI) fetchModels(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/models", nil)
	if err != nil {
		return nil, err
	}
	m.authorize(req)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, m.redactErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &EndpointError{URL: m.shown + "/models", Status: resp.Status, Code: resp.StatusCode, Message: m.errorMessage(resp)}
	}
	return modelIDs(io.LimitReader(resp.Body, 4<<20))
}

// modelIDs reads the ids of a GET /models answer, sorted.
func modelIDs(r io.Reader) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r).Decode(&list); err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

func (m *OpenAI) authorize(req *http.Request) {
	if key := m.key(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
}

// redact removes the key from a text a user will see.
func (m *OpenAI) redact(s string) string {
	key := m.key()
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[OPENAI_API_KEY]")
}

func (m *OpenAI) redactErr(err error) error { return errors.New(m.redact(err.Error())) }

// seen is text from the server as a user sees it: the key redacted first,
// then clipped to n bytes (clipped first, a key across the cut would show
// but for its last bytes).
func (m *OpenAI) seen(text string, n int) string { return clip.Marked(m.redact(text), n) }

// --- the request ---

type chatRequest struct {
	Model         string        `json:"model"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	Messages      []chatMessage `json:"messages"`
	Tools         []chatTool    `json:"tools,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content,omitempty"` // *string, or []contentPart with images
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// contentPart is a part of a user message that carries images.
type contentPart struct {
	Type     string    `json:"type"` // text or image_url
	Text     *string   `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string          `json:"type"`
	Function chatToolDetails `json:"function"`
}

type chatToolDetails struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// toolGuide tells the model which tool to use for what.
const toolGuide = `Look before you change: use list_directory, find_files and search_text to find your way (they never ask the user), then read_file for what you need, in parts for long files.
Change files with edit_file (one exact occurrence of old_text) rather than rewriting them with write_file; write_file is for new files.
For a task of several steps, record a plan with update_plan and keep it current as you go.
`

// SystemPrompt tells the model where it works and how.
func SystemPrompt(req *Request) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are acpbridge, a coding agent working in %s for a user in their editor.\n", req.Cwd)
	if len(req.Roots) > 1 {
		fmt.Fprintf(&sb, "You may also use these directories: %s.\n", strings.Join(req.Roots[1:], ", "))
	}
	if in := req.Instructions; in != nil && in.Override {
		sb.WriteString(in.Text)
		return sb.String()
	}
	sb.WriteString("Use the tools to read, write and edit files and to run commands; relative paths are relative to the working directory, and nothing outside these directories can be touched.\n")
	sb.WriteString(toolGuide)
	switch req.Mode {
	case acp.ModeAsk:
		sb.WriteString("The user approves every edit and command before it runs; a rejected call means: do not try it again, ask or do something else.\n")
	case acp.ModeAcceptEdits:
		sb.WriteString("Edits run without asking; the user approves every command.\n")
	case acp.ModeReadOnly:
		sb.WriteString("The session is read-only: edits and commands are refused, so only read and explain.\n")
	case acp.ModeBypass:
		sb.WriteString("Edits and commands run without asking.\n")
	}
	sb.WriteString("Answer in Markdown, briefly.")
	if in := req.Instructions; in != nil {
		sb.WriteString("\n\n")
		sb.WriteString(in.Text)
	}
	return sb.String()
}

func (m *OpenAI) request(req *Request) chatRequest {
	sys := SystemPrompt(req)
	msgs := []chatMessage{{Role: "system", Content: &sys}}
	sent := req.Msgs
	if sent == nil {
		sent = req.Conv.Msgs
	}
	for _, msg := range sent {
		cm := chatMessage{Role: msg.Role}
		if msg.Text != "" || len(msg.ToolCalls) == 0 {
			text := msg.Text
			cm.Content = &text
		}
		if len(msg.Images) > 0 {
			parts := []contentPart{{Type: "text", Text: &msg.Text}}
			for _, im := range msg.Images {
				parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: im.URL()}})
			}
			cm.Content = parts
		}
		for _, tc := range msg.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: tc.ID, Type: "function",
				Function: chatFunction{Name: tc.Name, Arguments: argumentsOf(tc.Input)}})
		}
		cm.ToolCallID = msg.ToolCallID
		msgs = append(msgs, cm)
	}
	tools := make([]chatTool, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = chatTool{Type: "function", Function: chatToolDetails{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
	}
	return chatRequest{Model: req.Model, Stream: true, StreamOptions: streamOptions{IncludeUsage: true}, Messages: msgs, Tools: tools}
}

// argumentsOf gives a tool call's input back as the model wrote it: the
// JSON text, or the text itself when it was not JSON (kept as a string).
func argumentsOf(input json.RawMessage) string {
	var s string
	if len(input) > 0 && input[0] == '"' && json.Unmarshal(input, &s) == nil {
		return s
	}
	return string(input)
}

// --- the call ---

func (m *OpenAI) Complete(ctx context.Context, req *Request, sink Sink) (acp.StopReason, error) {
	out := &watched{Sink: sink}         // a failure of the session's own is said as its own
	if err := out.Pause(); err != nil { // what is buffered shows while the model thinks
		return "", err
	}
	body, err := acp.Marshal(m.request(req))
	if err != nil {
		return "", err
	}
	endpoint := m.shown + "/chat/completions"
	resp, err := m.send(ctx, body, endpoint, hasImages(req), out)
	if err != nil {
		return "", out.failure(err)
	}
	stop, err := m.stream(ctx, resp, out, endpoint)
	return stop, out.failure(err)
}

// hasImages reports whether a request sends an image.
func hasImages(req *Request) bool {
	msgs := req.Msgs
	if msgs == nil {
		msgs = req.Conv.Msgs
	}
	for _, m := range msgs {
		if len(m.Images) > 0 {
			return true
		}
	}
	return false
}

// send posts the request body until the endpoint answers 200, retrying
// what may pass (an unreachable server, 429, a 5xx) a few times. images
// says the request sends one, for what a 400 about it says to do.
func (m *OpenAI) send(ctx context.Context, body []byte, endpoint string, images bool, out Sink) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := m.post(ctx, body)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			if attempt < openaiRetries {
				m.log.Warn("model request failed; retrying", "endpoint", endpoint, "attempt", attempt+1, "err", err)
				out.Retrying(fmt.Sprintf("%s could not be reached (%v)", endpoint, err))
				if err := m.wait(ctx, attempt, ""); err != nil {
					return nil, err
				}
				continue
			}
			return nil, Errorf("could not reach the model at %s after %d attempts: %v; check --base-url and that the server is running", endpoint, attempt+1, err)
		}
		if resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		msg := m.errorMessage(resp)
		resp.Body.Close()
		retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		if retryable && attempt < openaiRetries {
			m.log.Warn("model request failed; retrying", "endpoint", endpoint, "status", resp.Status, "attempt", attempt+1)
			out.Retrying(fmt.Sprintf("%s answered %s", endpoint, resp.Status))
			if err := m.wait(ctx, attempt, resp.Header.Get("Retry-After")); err != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode == http.StatusBadRequest && images && strings.Contains(strings.ToLower(msg), "image") {
			return nil, Errorf("the model rejected the prompt's image (the endpoint %s answered %s: %s); choose a model that reads images (--model openai:NAME, or the model picker), or send the prompt without the image", endpoint, resp.Status, msg)
		}
		return nil, Errorf("the model endpoint %s answered %s: %s%s", endpoint, resp.Status, msg, hint(resp.StatusCode, attempt+1))
	}
}

// hint says what to do about a failed status.
func hint(status, attempts int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "; check OPENAI_API_KEY, or sign in again with acpbridge setup"
	case status == http.StatusNotFound:
		return "; check the model name (--model openai:NAME) and --base-url"
	case attempts > 1:
		return fmt.Sprintf(" (tried %d times)", attempts)
	}
	return ""
}

func (m *OpenAI) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	m.authorize(req)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, m.redactErr(err)
	}
	return resp, nil
}

// wait sleeps before a retry: Retry-After when the server gave one (up to
// maxRetry), else an exponential backoff with full jitter.
func (m *OpenAI) wait(ctx context.Context, attempt int, retryAfter string) error {
	d := time.Duration(rand.Int64N(int64(m.Backoff<<attempt) + 1))
	if secs, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && secs >= 0 {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(retryAfter); err == nil {
		d = time.Until(t)
	}
	return waitFor(ctx, min(max(d, 0), m.maxRetry))
}

// errorMessage is the server's own message from an error body.
func (m *OpenAI) errorMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && len(e.Error) > 0 {
		var detail struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &detail) == nil && detail.Message != "" {
			msg = detail.Message
		} else if s, ok := stringOf(e.Error); ok {
			msg = s // Ollama: {"error":"model not found"}
		}
	}
	if msg == "" {
		msg = "(no message)"
	}
	return m.seen(msg, 500)
}

func stringOf(raw json.RawMessage) (string, bool) {
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// chatChunk is one streamed event. Unknown fields are ignored: servers add
// their own.
type chatChunk struct {
	Choices []chatChoice `json:"choices"`
	Usage   *struct {
		PromptTokens     number  `json:"prompt_tokens"`
		CompletionTokens number  `json:"completion_tokens"`
		Cost             *number `json:"cost"` // OpenRouter
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// number is a figure of a usage report, as servers write it: a JSON
// number in any form (12, 12.0, 1.2e1) or a string holding one; anything
// else reads as 0 rather than failing the answer it came with.
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		f = 0
	}
	*n = number(f)
	return nil
}

// count is n as a token count, clamped to [0, MaxTokens].
func (n number) count() int64 {
	return int64(min(max(float64(n), 0), MaxTokens))
}

// chatChoice is one choice of a streamed chunk: a delta of the answer.
type chatChoice struct {
	Delta struct {
		Content          *string `json:"content"`
		ReasoningContent *string `json:"reasoning_content"` // DeepSeek, vLLM
		Reasoning        *string `json:"reasoning"`         // Ollama, OpenRouter
		ToolCalls        []struct {
			Index    *int   `json:"index"`
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// pendingCall is a tool call being assembled from deltas.
type pendingCall struct {
	id, name string
	args     strings.Builder
}

var errStalled = errors.New("the model stream sent nothing")

// What one answer may bring, at most: a stream past a cap is ended with an
// error that names it (a server that never stops must not fill memory).
const (
	maxEventLine = 16 << 20 // one line of the event stream
	maxToolArgs  = 16 << 20 // one tool call's arguments
	maxAllArgs   = 32 << 20 // the arguments of all the tool calls of one answer
	maxToolCalls = 256      // the tool calls of one answer
	maxTextBytes = 16 << 20 // the text and thoughts of one answer
)

// answerStream is one answer being read from the event stream.
type answerStream struct {
	m       *OpenAI
	out     Sink
	calls   toolDeltas
	args    int    // bytes of all the tool calls' arguments so far
	finish  string // the last finish_reason
	sawDone bool   // [DONE] arrived
	text    int    // bytes of text and thoughts so far
}

// stream reads a server-sent event stream into out. A server that answers
// with JSON instead (an error, as proxies do, or a whole answer when it
// ignores "stream") is read as that; anything else is an error naming what
// the server sent.
func (m *OpenAI) stream(ctx context.Context, resp *http.Response, out Sink, endpoint string) (acp.StopReason, error) {
	defer resp.Body.Close()
	fail := func(format string, args ...any) (acp.StopReason, error) {
		return "", Errorf("the model stream from %s failed: %s; what streamed before is kept in the session", endpoint, fmt.Sprintf(format, args...))
	}
	as := &answerStream{m: m, out: out, calls: toolDeltas{index: map[int]int{}}}
	switch ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		if err := as.whole(resp.Body); err != nil {
			return fail("%v", err)
		}
		return as.calls.finish(as.finish, out), nil
	case "text/html":
		head, _ := io.ReadAll(io.LimitReader(resp.Body, int64(200+len(as.m.key()))))
		return fail("the server answered with a web page (%s), not an event stream (is --base-url the API's address, ending in /v1, and does it need a login?): %s",
			ct, as.m.seen(strings.TrimSpace(string(head)), 120))
	}
	// A stream that stays silent longer than idle is closed.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(m.Idle, func() { cancel(errStalled); resp.Body.Close() })
	defer timer.Stop()

	br := bufio.NewReaderSize(resp.Body, 32<<10)
	for {
		if br.Buffered() == 0 {
			if err := out.Pause(); err != nil {
				return "", err
			}
		}
		line, readErr := readEventLine(br)
		timer.Reset(m.Idle)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if context.Cause(rctx) == errStalled {
			return fail("nothing arrived for %v", m.Idle)
		}
		if errors.Is(readErr, errLongLine) {
			return fail("an event is longer than %d MiB", maxEventLine>>20)
		}
		if data, isData := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); isData {
			if data = bytes.TrimSpace(data); string(data) == "[DONE]" {
				as.sawDone = true
				break
			}
			if err := as.event(data); err != nil {
				return fail("%v", err)
			}
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			return fail("%v", m.redactErr(readErr))
		}
	}
	if as.finish == "" && !as.sawDone {
		return fail("the stream ended before the answer did")
	}
	return as.calls.finish(as.finish, out), nil
}

var errLongLine = errors.New("event line over the limit")

// readEventLine reads one line of the event stream, up to maxEventLine
// bytes; a longer one is errLongLine. The pieces of a long line are joined
// once, at its end.
func readEventLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	pieces := [][]byte{bytes.Clone(line)}
	n := len(line)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		if n += len(line); n > maxEventLine {
			return nil, errLongLine
		}
		pieces = append(pieces, bytes.Clone(line))
	}
	return bytes.Join(pieces, nil), err
}

// whole reads an answer sent as one JSON body: an error, or a completion
// that was not streamed.
func (as *answerStream) whole(body io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(body, maxEventLine+1))
	if err != nil {
		return as.m.redactErr(err)
	}
	if len(b) > maxEventLine {
		return fmt.Errorf("the answer is longer than %d MiB", maxEventLine>>20)
	}
	var c struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason *string         `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("the server answered with JSON that is not a chat completion: %s", as.m.seen(string(b), 200))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return fmt.Errorf("the server reported: %s", as.m.seen(serverMessage(c.Error), 500))
	}
	if len(c.Choices) == 0 {
		return fmt.Errorf("the server's answer has no choices: %s", as.m.seen(string(b), 200))
	}
	// A whole message reads as one delta of it.
	ev, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"delta": c.Choices[0].Message, "finish_reason": c.Choices[0].FinishReason}}, "usage": c.Usage})
	return as.event(ev)
}

// finish hands the gathered tool calls to out and returns the stop reason
// that the stream's finish_reason (or its calls) means.
func (t *toolDeltas) finish(finish string, out Sink) acp.StopReason {
	for i, c := range t.calls {
		if c.id == "" {
			c.id = fmt.Sprintf("call_%d", i) // some servers send none; the result must name one
		}
		out.ToolCall(ToolCall{ID: c.id, Name: c.name, Input: json.RawMessage(c.args.String())})
	}
	switch finish {
	case "length":
		return acp.StopMaxTokens
	case "content_filter":
		return acp.StopRefusal
	case "tool_calls", "function_call":
		return acp.StopToolUse
	}
	if len(t.calls) > 0 {
		return acp.StopToolUse
	}
	return acp.StopEndTurn
}

// toolDeltas assembles tool calls from their deltas, by the server's index.
type toolDeltas struct {
	calls []*pendingCall
	index map[int]int // server index → position in calls
}

// slot finds the call a delta belongs to, making it if it is new. A server
// that sends no index gets one call per new id.
func (t *toolDeltas) slot(index *int, id string) *pendingCall {
	if index != nil {
		if i, ok := t.index[*index]; ok {
			return t.calls[i]
		}
		t.index[*index] = len(t.calls)
	} else if n := len(t.calls); n > 0 && (id == "" || t.calls[n-1].id == id) {
		return t.calls[n-1]
	}
	t.calls = append(t.calls, &pendingCall{})
	return t.calls[len(t.calls)-1]
}

// event applies one streamed event.
func (as *answerStream) event(data []byte) error {
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("an event is not JSON: %s", as.m.seen(string(data), 200))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return fmt.Errorf("the server reported: %s", as.m.seen(serverMessage(c.Error), 500))
	}
	if u := c.Usage; u != nil {
		usage := Usage{InputTokens: u.PromptTokens.count(), OutputTokens: u.CompletionTokens.count()}
		if u.Cost != nil {
			usage.Cost = new(float64(*u.Cost))
		}
		as.out.AddUsage(usage)
	}
	for _, ch := range c.Choices {
		if err := as.choice(&ch); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			as.finish = *ch.FinishReason
		}
	}
	return nil
}

// serverMessage is what an error member of the stream says: its message,
// the string it is, or its JSON.
func serverMessage(raw json.RawMessage) string {
	var detail struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &detail) == nil && detail.Message != "" {
		return detail.Message
	}
	if s, ok := stringOf(raw); ok {
		return s
	}
	return string(raw)
}

// choice streams a choice's thought and text to out and gathers its tool
// call deltas, within the caps.
func (as *answerStream) choice(ch *chatChoice) error {
	d := &ch.Delta
	for _, r := range []*string{d.ReasoningContent, d.Reasoning, d.Content} {
		if r == nil {
			continue
		}
		if as.text += len(*r); as.text > maxTextBytes {
			return fmt.Errorf("the answer's text passed %d MiB; acpbridge stopped reading it", maxTextBytes>>20)
		}
		var err error
		if r == d.Content {
			err = as.out.TextChunk(*r)
		} else {
			err = as.out.ThoughtChunk(*r)
		}
		if err != nil {
			return err
		}
	}
	for _, tc := range d.ToolCalls {
		p := as.calls.slot(tc.Index, tc.ID)
		if len(as.calls.calls) > maxToolCalls {
			return fmt.Errorf("the answer made more than %d tool calls; acpbridge stopped reading it", maxToolCalls)
		}
		if as.args += len(tc.Function.Arguments); as.args > maxAllArgs {
			return fmt.Errorf("the arguments of the answer's tool calls passed %d MiB in all; acpbridge stopped reading it", maxAllArgs>>20)
		}
		if tc.ID != "" {
			p.id = tc.ID
		}
		if tc.Function.Name != "" {
			p.name = tc.Function.Name
		}
		if p.args.Len()+len(tc.Function.Arguments) > maxToolArgs {
			return fmt.Errorf("the arguments of tool call %s passed %d MiB; acpbridge stopped reading the answer", cmp.Or(p.name, p.id), maxToolArgs>>20)
		}
		p.args.WriteString(tc.Function.Arguments)
	}
	return nil
}
