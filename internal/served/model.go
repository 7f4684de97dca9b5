// Package served is a fake model provider: it answers any agent's model
// calls from a replay fixture, on that agent's own wire, mapping the
// fixture's recorded tool calls onto the agent's own tools by intent
// (intent.go). A scenario run serves its fixture this way, so that every
// agent it starts, acpbridge or another, gets the same model answers; and
// `acpbridge scenario model` serves one to any client.
//
// model.go holds the endpoint (Model, Start) and how a call finds its
// place in the fixture. It serves over HTTP on 127.0.0.1, each agent on the
// wire it speaks: OpenAI Chat Completions and
// Responses, Anthropic Messages and Gemini, on one port (wires.go and the
// wire_*.go files). The fixture is read by acpbridge's own replay model:
// the same format, the same checks of an entry's expect, the same errors.
//
// A recording is not used up: each conversation follows the fixture from
// its own start. Conversations are told apart by their messages so far: a
// call continues the conversation of an earlier, shorter call whose
// messages begin as the call's do (the most of them; an agent may merge or
// reword older messages, so a call need not repeat them exactly). A new conversation starts at the first entry whose
// expect its first call meets, else at the fixture's first entry when that
// one has no expect; a call that meets none is refused (HTTP 422) with its
// first words. A continuing call gets its conversation's next entry when the
// call's newest message meets its expect (an entry without one is met by
// any), else the first later one whose expect it meets, leaving out
// entries that a conversation begun elsewhere has had (they are another
// thread's, of threads recorded together); when none is met and the
// newest message answers tool calls, the next entry is its own: a tool
// result is matched by the call it answers, not by the agent's wording. Side calls (no tools offered, or JSON asked
// for: titles, routing, summaries) are answered without an entry, and
// counted apart.

package served

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
	"acpbridge/internal/model"
)

// maxServedRequest bounds a model request the endpoint reads.
const maxServedRequest = 256 << 20

// ModelName is the model the endpoint lists; it answers any name.
const ModelName = "scenario-model"

// Model is one endpoint: each model call is answered by the entry
// its conversation is at.
type Model struct {
	URL   string // the base URL, ending in /v1
	srv   *http.Server
	path  string   // the fixture
	name  string   // the file the user gave, as errors name it
	roots []string // the run's workspace, for paths in an entry's expect and tool calls
	// Log, when set, is told of each call: its wire path, the entry it got
	// (or that it was a side call) and how it ended.
	Log func(format string, args ...any)

	mu      sync.Mutex // guards the fields below
	expects []string   // each entry's expect, "" for none
	calls   [][]string // each entry's tool call ids
	owner   []int      // the start of the first conversation that had each entry, -1 for none
	convs   []*conversation
	counted Count
}

// conversation is one caller's place in the fixture.
type conversation struct {
	seen  []messageKey // the messages of its last call
	start int          // the entry it began at
	next  int          // the entries before this one are behind it
}

// Count is what the endpoint has served so far.
type Count struct {
	Requests  int   `json:"requests"`   // model calls asked for, side calls included
	SideCalls int   `json:"side_calls"` // side calls, answered without an entry
	Bytes     int64 `json:"bytes"`      // the request bodies
	Tokens    int64 `json:"tokens"`     // the usage the answers reported, input and output
	// PromptTokens and CompletionTokens are estimated the same way for
	// every agent and wire: a token per four bytes of the request's text
	// (textBytes), and of the answer's text, thoughts and tool inputs.
	PromptTokens     int64          `json:"prompt_tokens_estimated"`
	CompletionTokens int64          `json:"completion_tokens_estimated"`
	Mapped           map[string]int `json:"tool_calls,omitempty"` // the recorded tool calls served, by mapping ("write_file → Write {content, file_path}")
}

// Since is what was served after an earlier count.
func (c Count) Since(before Count) Count {
	d := Count{Requests: c.Requests - before.Requests, SideCalls: c.SideCalls - before.SideCalls,
		Bytes: c.Bytes - before.Bytes, Tokens: c.Tokens - before.Tokens,
		PromptTokens: c.PromptTokens - before.PromptTokens, CompletionTokens: c.CompletionTokens - before.CompletionTokens}
	for k, n := range c.Mapped {
		if n -= before.Mapped[k]; n > 0 {
			if d.Mapped == nil {
				d.Mapped = map[string]int{}
			}
			d.Mapped[k] = n
		}
	}
	return d
}

// count is what m has served so far; nothing for a run without a model.
func (m *Model) Served() Count {
	if m == nil {
		return Count{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counted
	c.Mapped = maps.Clone(c.Mapped)
	return c
}

// serveModel serves the replay fixture at path (name is the file the user
// gave, which errors name) on addr, 127.0.0.1:0 when ""; roots are the
// run's workspace roots.
func Start(path, name, addr string, roots []string) (*Model, error) {
	replay, err := model.NewReplay(path)
	if err != nil {
		return nil, err
	}
	entries, err := replay.Entries()
	if err != nil {
		return nil, err
	}
	expects := make([]string, len(entries))
	calls := make([][]string, len(entries))
	for i, e := range entries {
		expects[i], calls[i] = e.Expect, e.Calls
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the model fixture: %w", err)
	}
	m := &Model{URL: "http://" + ln.Addr().String() + "/v1", path: path, name: name, roots: roots,
		expects: expects, calls: calls, owner: make([]int, len(expects))}
	for i := range m.owner {
		m.owner[i] = -1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.handler(decodeChatHTTP, func(w http.ResponseWriter, r *request) wireAnswer {
		return &chatAnswer{sse: sse{w: w}, model: r.model, stream: r.stream}
	}))
	mux.HandleFunc("POST /v1/responses", m.handler(decodeResponsesHTTP, func(w http.ResponseWriter, r *request) wireAnswer {
		return &responsesAnswer{sse: sse{w: w}, model: r.model, stream: r.stream}
	}))
	mux.HandleFunc("POST /v1/messages", m.handler(decodeAnthropicHTTP, func(w http.ResponseWriter, r *request) wireAnswer {
		return &anthropicAnswer{sse: sse{w: w}, model: r.model, stream: r.stream}
	}))
	mux.HandleFunc("POST /v1/messages/count_tokens", countTokens("input_tokens"))
	mux.HandleFunc("POST /v1beta/models/{call}", m.gemini)
	mux.HandleFunc("HEAD /{$}", func(http.ResponseWriter, *http.Request) {}) // claude checks the server is there
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": ModelName, "object": "model"}}})
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

// Close stops the endpoint.
func (m *Model) Close() { m.srv.Close() }

func decodeChatHTTP(_ *http.Request, body []byte) (*request, error) { return decodeChat(body) }
func decodeResponsesHTTP(_ *http.Request, body []byte) (*request, error) {
	return decodeResponses(body)
}
func decodeAnthropicHTTP(_ *http.Request, body []byte) (*request, error) {
	return decodeAnthropic(body)
}

// gemini routes a Gemini call by its method, the path's end after the
// model name: models/{model}:{method}.
func (m *Model) gemini(w http.ResponseWriter, r *http.Request) {
	name, method, _ := strings.Cut(r.PathValue("call"), ":")
	answer := func(w http.ResponseWriter, r *request) wireAnswer {
		return &geminiAnswer{sse: sse{w: w}, model: r.model, stream: r.stream}
	}
	switch method {
	case "streamGenerateContent", "generateContent":
		stream := method == "streamGenerateContent"
		m.handler(func(_ *http.Request, body []byte) (*request, error) { return decodeGemini(body, name, stream) }, answer)(w, r)
	case "countTokens":
		countTokens("totalTokens")(w, r)
	default:
		httpError(w, http.StatusNotFound, fmt.Sprintf("the served model answers :streamGenerateContent, :generateContent and :countTokens, not :%s", method))
	}
}

// countTokens answers a count of a request's tokens (a token per four
// bytes), under key.
func countTokens(key string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxServedRequest))
		writeJSON(w, map[string]any{key: n / 4})
	}
}

// handler answers one wire's model calls: decode reads a call, answer
// makes the answer it is written into.
func (m *Model) handler(decode func(*http.Request, []byte) (*request, error), answer func(http.ResponseWriter, *request) wireAnswer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxServedRequest))
		prompt := textBytes(body) / model.BytesPerToken
		m.mu.Lock()
		m.counted.Requests++
		m.counted.Bytes += int64(len(body))
		m.counted.PromptTokens += prompt
		m.mu.Unlock()
		var req *request
		if err == nil {
			req, err = decode(r, body)
		}
		if err != nil {
			httpError(w, http.StatusBadRequest, "the request body is not a model call: "+err.Error())
			return
		}
		what, err := m.complete(r.Context(), req, int64(len(body)), answer(w, req))
		if m.Log != nil {
			m.Log("%s %s: %s%s", r.Method, r.URL.Path, what, errSuffix(err))
		}
	}
}

// complete answers a model call with its conversation's entry, or a side
// call without one. The entry's expect is checked against the call's
// newest message that is not the model's, as in acpbridge.
func (m *Model) complete(ctx context.Context, req *request, size int64, wire wireAnswer) (string, error) {
	ans := &sink{wire: wire, req: req, cwd: m.cwd()}
	if req.side() {
		m.mu.Lock()
		m.counted.SideCalls++
		m.mu.Unlock()
		ans.TextChunk(sideAnswer(req))
		m.counts(ans, ans.finish(acp.StopEndTurn, nil, size))
		return "a side call, answered without an entry", nil
	}
	conv := model.NewConversation(nil)
	for _, msg := range req.msgs {
		conv.Add(msg)
	}
	mreq := &model.Request{Conv: conv, Roots: m.roots}
	c, entry, err := m.choose(req, mreq)
	if err != nil {
		ans.finish("", err, size)
		return "no entry", err
	}
	stop, err := m.serve(ctx, entry, mreq, ans)
	if err != nil && m.path != m.name {
		err = model.Errorf("%s", strings.ReplaceAll(errorText(err), m.path, m.name))
	}
	m.counts(ans, ans.finish(stop, err, size))
	if err == nil {
		err = ans.err
	}
	return fmt.Sprintf("entry %d (a conversation begun at entry %d) for %q%s", entry+1, c.start+1, clip.Marked(mreq.Conv.Newest(), 80), mapped(ans.mappings)), err
}

// mapped lists a call's tool call mappings, for the log.
func mapped(mappings []string) string {
	if len(mappings) == 0 {
		return ""
	}
	return "; " + strings.Join(mappings, "; ")
}

// errSuffix is err for the log, "" for none.
func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; failed: " + clip.Marked(errorText(err), 300)
}

// counts adds an answer's usage and tool calls to the count.
func (m *Model) counts(ans *sink, u model.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counted.Tokens += u.InputTokens + u.OutputTokens
	m.counted.CompletionTokens += int64(ans.outBytes / model.BytesPerToken)
	for _, k := range ans.mappings {
		if m.counted.Mapped == nil {
			m.counted.Mapped = map[string]int{}
		}
		m.counted.Mapped[k]++
	}
}

// cwd is the workspace's directory, against which a mapped tool call's
// paths are made absolute.
func (m *Model) cwd() string {
	if len(m.roots) == 0 {
		return ""
	}
	return m.roots[0]
}

// choose finds the call's conversation (of those whose last call had fewer
// messages, the one that shares the longest start with it; a new one when
// none shares any) and picks its
// entry (see the file's comment); mreq is told when the entry was matched
// by call.
func (m *Model) choose(req *request, mreq *model.Request) (*conversation, int, error) {
	keys := req.keys()
	m.mu.Lock()
	defer m.mu.Unlock()
	var c *conversation
	best := 0
	for _, k := range m.convs {
		if n := commonPrefix(k.seen, keys); n > best && len(keys) > len(k.seen) {
			c, best = k, n
		}
	}
	if c == nil {
		start := m.startOf(req, mreq)
		if start < 0 {
			return nil, 0, &callRefused{fmt.Sprintf(
				"no conversation of the replay fixture %s begins with this model call, whose newest message is %q; its conversations begin with %s",
				m.name, clip.Marked(mreq.Conv.Newest(), 120), clip.Marked(quoteAll(m.expects), 300))}
		}
		c = &conversation{start: start, next: start}
		m.convs = append(m.convs, c)
	}
	entry := m.entryFor(c, req.answers, mreq)
	if entry >= len(m.expects) {
		return nil, 0, model.Errorf("replay fixture %s has %d entries, and a conversation begun at entry %d asked for one after its entry %d; record the conversation again (--record) or add an entry",
			m.name, len(m.expects), c.start+1, c.next)
	}
	if m.owner[entry] < 0 {
		m.owner[entry] = c.start
	}
	c.next, c.seen = entry+1, keys
	return c, entry, nil
}

// startOf is the entry a new conversation begins at (see the file's
// comment), -1 for none; one whose first call answers tool calls (an
// agent that reopened a session and words its history anew) begins after
// the entry that made the calls.
func (m *Model) startOf(req *request, mreq *model.Request) int {
	if start := slices.IndexFunc(m.expects, func(e string) bool { return e != "" && model.Matches(e, mreq) }); start >= 0 {
		return start
	}
	if len(req.answered) > 0 {
		for i, ids := range m.calls {
			if i+1 < len(m.calls) && slices.Contains(ids, req.answered[len(req.answered)-1]) {
				mreq.Matched = true
				return i + 1
			}
		}
	}
	if len(m.expects) > 0 && m.expects[0] == "" {
		return 0
	}
	return -1
}

// entryFor is the entry a continuing call of c gets (see the file's
// comment).
func (m *Model) entryFor(c *conversation, answers bool, mreq *model.Request) int {
	own := func(i int) bool { return m.owner[i] < 0 || m.owner[i] == c.start }
	next := c.next
	for next < len(m.expects) && !own(next) {
		next++
	}
	if next >= len(m.expects) || m.expects[next] == "" || model.Matches(m.expects[next], mreq) {
		return next
	}
	for i := next + 1; i < len(m.expects); i++ {
		if own(i) && m.expects[i] != "" && model.Matches(m.expects[i], mreq) {
			return i
		}
	}
	mreq.Matched = answers
	return next // matched by call, or its check says how the call diverged
}

// quoteAll is the non-empty expects, quoted, with commas.
func quoteAll(expects []string) string {
	var q []string
	for _, e := range expects {
		if e != "" && !slices.Contains(q, fmt.Sprintf("%q", e)) {
			q = append(q, fmt.Sprintf("%q", e))
		}
	}
	return strings.Join(q, ", ")
}

// messageKey is a message of a call as conversations are told apart by it:
// a SHA-256 of what tells it apart, so that a conversation keeps 32 bytes
// a message however long they are.
type messageKey = [sha256.Size]byte

func messageKeyOf(s string) messageKey { return sha256.Sum256([]byte(s)) }

// commonPrefix is how many keys a and b begin with alike.
func commonPrefix(a, b []messageKey) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// serve answers a call with the fixture's entry at index entry, read by a
// reader of its own: calls never wait for each other, not even two of one
// conversation.
func (m *Model) serve(ctx context.Context, entry int, req *model.Request, out model.Sink) (acp.StopReason, error) {
	replay, err := model.NewReplay(m.path)
	if err != nil {
		return "", err
	}
	if err := replay.Seek(entry); err != nil {
		return "", model.Errorf("replay fixture: %v", err)
	}
	return replay.Complete(ctx, req, out)
}
