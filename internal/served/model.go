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
// its own start. A call continues a conversation found so (Model.find):
// the one the agent names (codex's prompt_cache_key, the session in
// claude's Anthropic metadata), whatever the order calls arrive in; else
// the one of an earlier, shorter call whose messages the call begins with
// the most of, at least up to the user's first words (a shared system
// prompt or other preamble is no shared conversation); else, for an agent
// that merged or reworded its older messages, the one whose first user
// words and newest model answer the call carries. Conversations alike so
// far are told apart by the answer the call carries (the entry each was
// last given); still alike at different places, the call is refused
// (HTTP 422) naming them.
//
// A new conversation whose first call carries a history (a reopened or
// loaded session) begins after the entry that gave its newest answer (by
// its tool calls, else its text); else at the first entry whose expect its
// first call meets and that no conversation has taken (threads recorded
// together begin their own threads; when every such entry is taken, the
// recording begins again), else at the fixture's first entry when that one
// has no expect; a call that meets none is refused (HTTP 422) with its
// first words. A continuing call gets its conversation's next entry when
// the call's newest message meets its expect (an entry without one is met
// by any), else the first later one whose expect it meets, leaving out
// entries that a conversation begun elsewhere has had, and one an
// earlier-begun conversation would take next; when none is met and the
// newest message answers tool calls, the next entry is its own: a tool
// result is matched by the call it answers, not by the agent's wording.
//
// Side calls are recognised by what they are, never by the absence of
// tools (a chat-only agent or a plain client offers none and is served the
// recording, its tool calls as recorded): a call that asks for JSON
// (titles, routing, a next speaker) or for at most one token (a quota
// check), and a call without tools in a conversation whose calls offer
// them. They are answered without an entry, and counted apart.

package served

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	answers atomic.Int64 // answers begun: each answer's number, which its ids carry

	mu      sync.Mutex   // guards the fields below
	expects []string     // each entry's expect, "" for none
	calls   [][]string   // each entry's tool call ids
	texts   []messageKey // each entry's text, trimmed; zero for none
	owner   []int        // the start of the first conversation that had each entry, -1 for none
	convs   []*conversation
	counted Count
}

// conversation is one caller's place in the fixture.
type conversation struct {
	key   string      // the agent's own name for it, "" when it gives none
	seen  messageKeys // the messages of its last call
	start int         // the entry it began at
	next  int         // the entries before this one are behind it
	tools bool        // its first call offered tools
	again bool        // it began the recording again (startOf)
}

// Count is what the endpoint has served so far.
type Count struct {
	Requests  int `json:"requests"`   // model calls asked for, side calls included
	SideCalls int `json:"side_calls"` // side calls, answered without an entry
	// Restarts counts new conversations that found every thread of the
	// recording they could begin taken, and began it again: another
	// agent's run of the same recording, or a conversation the endpoint
	// lost (an agent's call it could not place, taken for a new one).
	Restarts int   `json:"recording_restarts"`
	Bytes    int64 `json:"bytes"`  // the request bodies
	Tokens   int64 `json:"tokens"` // the usage the entries' answers reported, input and output (side calls' not: they are no entry's)
	// PromptTokens and CompletionTokens are estimated the same way for
	// every agent and wire: a token per four bytes of the request's text
	// (textBytes), and of the answer's text, thoughts and tool inputs.
	PromptTokens     int64          `json:"prompt_tokens_estimated"`
	CompletionTokens int64          `json:"completion_tokens_estimated"`
	Mapped           map[string]int `json:"tool_calls,omitempty"` // the recorded tool calls served, by mapping ("write_file → Write {content, file_path}")
}

// Since is what was served after an earlier count.
func (c Count) Since(before Count) Count {
	d := Count{Requests: c.Requests - before.Requests, SideCalls: c.SideCalls - before.SideCalls, Restarts: c.Restarts - before.Restarts,
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

// Served is what m has served so far; nothing for a run without a model.
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

// Start serves the replay fixture at path (name is the file the user
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
	texts := make([]messageKey, len(entries))
	for i, e := range entries {
		expects[i], calls[i] = e.Expect, e.Calls
		if t := strings.TrimSpace(e.Text); t != "" {
			texts[i] = messageKeyOf(t)
		}
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the model fixture: %w", err)
	}
	m := &Model{URL: "http://" + ln.Addr().String() + "/v1", path: path, name: name, roots: roots,
		expects: expects, calls: calls, texts: texts, owner: make([]int, len(expects))}
	for i := range m.owner {
		m.owner[i] = -1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.handler(decodeChatHTTP, func(w http.ResponseWriter, r *request) wireAnswer {
		return &chatAnswer{sse: m.sse(w), model: r.model, stream: r.stream}
	}))
	mux.HandleFunc("POST /v1/responses", m.handler(decodeResponsesHTTP, func(w http.ResponseWriter, r *request) wireAnswer {
		return &responsesAnswer{sse: m.sse(w), model: r.model, stream: r.stream}
	}))
	mux.HandleFunc("POST /v1/messages", m.handler(decodeAnthropicHTTP, func(w http.ResponseWriter, r *request) wireAnswer {
		return &anthropicAnswer{sse: m.sse(w), model: r.model, stream: r.stream}
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

// sse is the writer of a new answer, numbered: every id an answer hands
// out (response, message, output item) carries its number, so that no two
// answers in the served model's life share one (codex keeps a thread's
// items by id: with one id for all, a load replayed only the first turn).
func (m *Model) sse(w http.ResponseWriter) sse { return sse{w: w, n: m.answers.Add(1)} }

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
		return &geminiAnswer{sse: m.sse(w), model: r.model, stream: r.stream}
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
	// The input's estimate from the start: a wire that says the usage
	// before the answer (Anthropic's message_start) has it to say.
	wire.usage(model.Usage{InputTokens: size / model.BytesPerToken})
	conv := model.NewConversation(nil)
	for _, msg := range req.msgs {
		conv.Add(msg)
	}
	mreq := &model.Request{Conv: conv, Roots: m.roots}
	c, entry, err := m.choose(req, mreq)
	if errors.Is(err, errSideCall) {
		m.mu.Lock()
		m.counted.SideCalls++
		m.mu.Unlock()
		ans.TextChunk(sideAnswer(req))
		ans.finish(acp.StopEndTurn, nil, size)
		m.counts(ans, model.Usage{}) // its usage is no entry's: not the fixture's tokens
		return "a side call, answered without an entry", nil
	}
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
	begun := fmt.Sprintf("a conversation begun at entry %d", c.start+1)
	if c.again && entry == c.start {
		begun += ", the recording begun again"
	}
	return fmt.Sprintf("entry %d (%s) for %q%s", entry+1, begun, clip.Marked(mreq.Conv.Newest(), 80), mapped(ans.mappings)), err
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

// errSideCall is choose's answer for a side call: the agent's
// housekeeping, answered without an entry.
var errSideCall = errors.New("a side call")

// choose finds the call's conversation (see find; a new one when it has
// none) and picks its entry (see the package comment); mreq is told when
// the entry was matched by call. A call the agent marks as a side call,
// and one without tools in a conversation whose calls offer them, is a
// side call (errSideCall).
func (m *Model) choose(req *request, mreq *model.Request) (*conversation, int, error) {
	if req.marked() {
		return nil, 0, errSideCall
	}
	keys := req.keys()
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.find(req, keys)
	if err != nil {
		return nil, 0, err
	}
	if c != nil && c.tools && len(req.tools) == 0 {
		return nil, 0, errSideCall
	}
	if c == nil {
		restarts := m.counted.Restarts
		start := m.startOf(req, mreq)
		if start < 0 {
			return nil, 0, &callRefused{fmt.Sprintf(
				"no conversation of the replay fixture %s begins with this model call, whose newest message is %q; its conversations begin with %s",
				m.name, clip.Marked(mreq.Conv.Newest(), 120), clip.Marked(quoteAll(m.expects), 300))}
		}
		c = &conversation{key: req.key, start: start, next: start, tools: len(req.tools) > 0, again: m.counted.Restarts > restarts}
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

// find is the conversation a call continues, nil for none (a new one):
//   - the conversation of the agent's key for it, when it gives one;
//   - else, of the conversations without a key whose last call had fewer
//     messages, the one whose messages the call begins with the most of, at
//     least up to its user's first words (a system prompt or other preamble
//     alone is shared by every conversation of an agent);
//   - else, for an agent that reshaped its history (merged or reworded
//     older messages), the conversation whose first user words and newest
//     answer of the model the call carries, most messages in common.
//
// Two conversations alike for the call, at different places in the
// fixture, cannot be told apart: the call is refused, naming them.
func (m *Model) find(req *request, keys messageKeys) (*conversation, error) {
	if req.key != "" {
		for _, c := range m.convs {
			if c.key == req.key {
				return c, nil
			}
		}
		return nil, nil
	}
	var best []*conversation
	score := 0
	consider := func(c *conversation, n int) {
		switch {
		case n > score:
			best, score = []*conversation{c}, n
		case n == score && n > 0:
			best = append(best, c)
		}
	}
	for _, c := range m.convs {
		if c.key == "" && c.seen.opening >= 0 && len(keys.keys) > len(c.seen.keys) {
			if n := commonPrefix(c.seen.keys, keys.keys); n > c.seen.opening {
				consider(c, n)
			}
		}
	}
	if best == nil {
		for _, c := range m.convs {
			if c.key == "" && c.seen.opening >= 0 && c.seen.answer != (messageKey{}) &&
				slices.Contains(keys.keys, c.seen.keys[c.seen.opening]) && slices.Contains(keys.keys, c.seen.answer) {
				consider(c, shared(c.seen.keys, keys.keys))
			}
		}
	}
	if len(best) > 1 {
		// Alike so far: the one whose last entry gave the answer the call
		// carries.
		answer := req.carried()
		gave := slices.DeleteFunc(slices.Clone(best), func(c *conversation) bool { return !m.gave(c.next-1, answer) })
		if len(gave) > 0 {
			best = gave
		}
	}
	for _, c := range best[min(1, len(best)):] {
		if c.next != best[0].next {
			return nil, &callRefused{fmt.Sprintf(
				"this model call continues conversations of the replay fixture %s begun at entries %d and %d alike, and they are at different entries; give each conversation words of its own, or an agent that names its conversations (prompt_cache_key)",
				m.name, best[0].start+1, c.start+1)}
		}
	}
	if best == nil {
		return nil, nil
	}
	return best[0], nil
}

// gave reports whether the fixture's entry gave the answer a call
// carries: its tool calls, else its text.
func (m *Model) gave(entry int, a carried) bool {
	switch {
	case entry < 0 || entry >= len(m.expects):
		return false
	case a.call != "":
		return slices.Contains(m.calls[entry], a.call)
	}
	return a.text != messageKey{} && m.texts[entry] == a.text
}

// shared is how many of b's keys a holds.
func shared(a, b []messageKey) int {
	n := 0
	for _, k := range b {
		if slices.Contains(a, k) {
			n++
		}
	}
	return n
}

// startOf is the entry a new conversation begins at (see the package
// comment), -1 for none. A first call that carries a history (an agent
// that reopened a session, or a loaded one) begins after the entry that
// gave the model's newest answer in it: its tool calls, or its text.
func (m *Model) startOf(req *request, mreq *model.Request) int {
	if i := m.answeredEntry(req); i >= 0 && i+1 < len(m.expects) {
		mreq.Matched = req.answers && len(req.answered) > 0
		return i + 1
	}
	met := func(i int) bool {
		e := m.expects[i]
		return e != "" && model.Matches(e, mreq) || i == 0 && e == ""
	}
	first := -1
	for i := range m.expects {
		if !met(i) {
			continue
		}
		if m.owner[i] < 0 {
			return i // a thread of the recording no conversation has taken
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		// Every thread it could begin has been taken: the recording
		// begins again (another run, another agent).
		for i := range m.owner {
			m.owner[i] = -1
		}
		m.counted.Restarts++
	}
	return first
}

// answeredEntry is the entry that gave the model's newest answer the call
// carries (gave), -1 for none; of entries alike, the first whose next
// entry no conversation has had.
func (m *Model) answeredEntry(req *request) int {
	answer := req.carried()
	first := -1
	for i := range m.expects {
		if !m.gave(i, answer) {
			continue
		}
		if i+1 < len(m.owner) && m.owner[i+1] < 0 {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

// entryFor is the entry a continuing call of c gets (see the package
// comment). Of threads recorded together whose turns have the same words,
// the recording cannot say which entry is whose: they are taken in the
// order the conversations began: of the entries a call could take, one
// that an earlier-begun conversation would take next is left to it.
func (m *Model) entryFor(c *conversation, answers bool, mreq *model.Request) int {
	met := func(i int) bool { return m.expects[i] != "" && model.Matches(m.expects[i], mreq) }
	owns := func(d *conversation, i int) bool { return m.owner[i] < 0 || m.owner[i] == d.start }
	// takesNext is the entry d would take next for the call's words: the
	// first from d.next it may have that they meet; -1 when an entry that
	// continues a turn (without expect) comes first: that is d's next, and
	// the words are no turn of d's.
	takesNext := func(d *conversation) int {
		for j := d.next; j < len(m.expects); j++ {
			switch {
			case !owns(d, j):
			case m.expects[j] == "":
				return -1
			case met(j):
				return j
			}
		}
		return -1
	}
	leftToEarlier := func(i int) bool {
		for _, d := range m.convs {
			if d != c && d.start < c.start && d.next <= i && takesNext(d) == i {
				return true
			}
		}
		return false
	}
	next := c.next
	for next < len(m.expects) && !owns(c, next) {
		next++
	}
	if next < len(m.expects) && m.expects[next] == "" && !answers {
		// The next entry continues the last turn (it answers a tool's
		// result), but the call brings the user's new words: the agent
		// ended that turn early (codex at a rejected permission, a
		// cancel). The turn those words begin is the call's, when an
		// entry ahead expects them.
		for i := next + 1; i < len(m.expects); i++ {
			if owns(c, i) && met(i) && !leftToEarlier(i) {
				return i
			}
		}
	}
	if next >= len(m.expects) || m.expects[next] == "" {
		return next
	}
	var candidates []int
	for i := next; i < len(m.expects); i++ {
		if owns(c, i) && met(i) {
			candidates = append(candidates, i)
		}
	}
	for _, i := range candidates {
		if !leftToEarlier(i) {
			return i
		}
	}
	if len(candidates) > 0 {
		return candidates[0]
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
