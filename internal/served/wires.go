// wires.go holds what the served model's wires share: a model call read
// from any wire (request), the answer a wire writes (wireAnswer),
// and the sink the replay serves an entry into, which maps each recorded
// tool call onto the calling agent's tools and gives every answer a usage.
//
// The wires, one file each: OpenAI Chat Completions (wire_chat.go), OpenAI
// Responses (wire_responses.go), Anthropic Messages (wire_anthropic.go)
// and Gemini (wire_gemini.go).

package served

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
)

// request is one model call, whatever its wire.
type request struct {
	model  string // the model name asked for, said back in the answer
	stream bool
	msgs   []model.Message // the conversation, thoughts left out
	// answers reports that the newest message answers tool calls: it is
	// matched to an entry by the call it answers, not by its wording.
	answers bool
	// answered are the ids of the tool calls the newest messages answer.
	answered []string
	tools    []offeredTool
	// schema is the JSON schema the answer is asked to meet ("{}" for any
	// JSON); nil when the call asks for none.
	schema json.RawMessage
	// key is the agent's own name for the conversation, "" when it gives
	// none: the Responses and Chat wires' prompt_cache_key (codex's
	// thread), the session in Anthropic's metadata.user_id (claude's).
	key string
	// probe reports a call that allows at most one token of answer (claude
	// checks its quota so): nothing a conversation's turn could be.
	probe bool
	// context is how many of msgs, from the first, are the agent's
	// instructions (system and developer messages), not the user's.
	context int
}

// marked reports whether the call carries an agent's mark of a side call
// (a title, a routing decision, a summary, a quota check, a suggestion of
// the user's next prompt): it asks for JSON, or for at most one token, or
// its user's newest message holds claude's [SUGGESTION MODE: ...]. It is
// answered without an entry. A call without tools is not a side call for
// that alone: a chat-only agent offers none (see Model.choose for the
// other side calls).
func (r *request) marked() bool { return r.schema != nil || r.probe || r.suggestion() }

// suggestionMark opens claude's instructions, in the last user message of
// its call for a suggestion of the user's next prompt (the whole
// conversation, the same tools): Claude Code 2.1.318 begins the message
// with "[SUGGESTION MODE: Suggest what the user might naturally type next
// into Claude Code.]" and its rules on the lines after it.
const suggestionMark = "[SUGGESTION MODE:"

// suggestion reports a call for a suggestion of the user's next prompt.
func (r *request) suggestion() bool {
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if m := r.msgs[i]; m.Role == "user" && strings.TrimSpace(m.Text) != "" {
			t := strings.TrimSpace(m.Text)
			return strings.HasPrefix(t, suggestionMark) || strings.Contains(t, "\n"+suggestionMark) ||
				strings.Contains(t, suggestionMark) && strings.HasSuffix(t, "]")
		}
	}
	return false
}

// messageKeys are a call's messages as conversations are told apart by
// them: a key for each text, each tool call and each tool result, in
// order (an agent that merges its earlier messages into one keeps its
// keys' order).
type messageKeys struct {
	keys []messageKey
	// opening is the index in keys of the user's first words, -1 when
	// the call has none: what no two conversations of different users'
	// words share, where a system prompt or other preamble may be shared.
	opening int
	// answer is the key of the newest of the model's messages, zero when
	// the call carries none.
	answer messageKey
}

func (r *request) keys() messageKeys {
	k := messageKeys{keys: make([]messageKey, 0, len(r.msgs)), opening: -1}
	for i, m := range r.msgs {
		if m.Text != "" || m.Role == "tool" {
			if k.opening < 0 && i >= r.context && m.Role == "user" && strings.TrimSpace(m.Text) != "" {
				k.opening = len(k.keys)
			}
			k.keys = append(k.keys, messageKeyOf(m.Role+"\x00"+m.ToolCallID+"\x00"+m.Text))
			if m.Role == "assistant" {
				k.answer = k.keys[len(k.keys)-1]
			}
		}
		for _, tc := range m.ToolCalls {
			k.keys = append(k.keys, messageKeyOf("call\x00"+tc.ID+"\x00"+tc.Name))
			k.answer = k.keys[len(k.keys)-1]
		}
	}
	return k
}

// carried is the model's newest answer a call carries, as an entry of the
// fixture is found to have given it: the id of the tool call the call's
// newest results answer, else the key of the answer's text (trimmed);
// both empty when the call carries no answer.
type carried struct {
	call string
	text messageKey
}

func (r *request) carried() carried {
	if len(r.answered) > 0 {
		return carried{call: r.answered[len(r.answered)-1]}
	}
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if r.msgs[i].Role == "assistant" {
			if t := strings.TrimSpace(r.msgs[i].Text); t != "" {
				return carried{text: messageKeyOf(t)}
			}
			break
		}
	}
	return carried{}
}

// add appends a message to the call's; instructions says it is a system
// or developer message, counted in context while only such came before.
// One inside the conversation (Claude Code's "# Environment ..." between
// the turns) is context too, and never the user's turn: it is left out,
// so that neither an entry's expect nor the conversation's keys meet it.
func (r *request) add(m model.Message, instructions bool) {
	if instructions {
		if r.context < len(r.msgs) {
			return
		}
		r.context++
	}
	r.msgs = append(r.msgs, m)
}

// atMostOne reports a token limit of at most one; nil is none.
func atMostOne(limits ...*int64) bool {
	for _, l := range limits {
		if l != nil && *l <= 1 {
			return true
		}
	}
	return false
}

// noteAnswers notes whether the newest non-assistant message answers tool
// calls, and the ids of those the tool results after the newest assistant
// message answer.
func (r *request) noteAnswers() {
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if r.msgs[i].Role != "assistant" {
			r.answers = r.msgs[i].Role == "tool"
			break
		}
	}
	for i := len(r.msgs) - 1; i >= 0 && r.msgs[i].Role != "assistant"; i-- {
		if r.msgs[i].Role == "tool" {
			r.answered = append([]string{r.msgs[i].ToolCallID}, r.answered...)
		}
	}
}

// wireAnswer is one answer being written in its wire's format.
type wireAnswer interface {
	text(s string) error
	thought(s string) error
	call(c agentCall) error
	// usage is the call's usage; every answer has one.
	usage(u model.Usage)
	// flush writes out what streamed so far.
	flush()
	// finish ends the answer: the stop reason's finish, or err.
	finish(stop acp.StopReason, err error)
}

// sink is the model.Sink the replay serves an entry into: it maps
// tool calls onto the agent's tools and passes everything to the wire.
type sink struct {
	wire     wireAnswer
	req      *request
	cwd      string
	mappings []string // each call's mapping, in order
	err      error    // a call that could not be mapped
	used     *model.Usage
	outBytes int
}

func (a *sink) TextChunk(s string) error {
	a.outBytes += len(s)
	return a.wire.text(s)
}

func (a *sink) ThoughtChunk(s string) error {
	a.outBytes += len(s)
	return a.wire.thought(s)
}

func (a *sink) ToolCall(tc model.ToolCall) {
	if a.err != nil {
		return
	}
	c, err := mapCall(tc, a.req.tools, a.cwd)
	if err != nil {
		a.err = err
		return
	}
	a.mappings = append(a.mappings, c.Mapping)
	a.outBytes += len(tc.Input)
	a.wire.call(c)
}

func (a *sink) AddUsage(u model.Usage) { a.used = &u }
func (a *sink) Retrying(string)        {}

func (a *sink) Pause() error {
	a.wire.flush()
	return nil
}

func (a *sink) KeepState(json.RawMessage) error { return nil }

// textBytes is the bytes of a request's text, whatever its wire: the
// string values of its JSON (messages, the system prompt, tool
// descriptions and schemas, tool inputs and results), not its keys or
// syntax. A token per four of them is the prompt's estimate.
func textBytes(body []byte) int64 {
	dec := json.NewDecoder(bytes.NewReader(body))
	var n int64
	// Where the reader is in each open object or array: 'k' a key comes
	// next, 'v' a value, 'a' an array's element.
	var open []byte
	valueRead := func() {
		if len(open) > 0 && open[len(open)-1] == 'v' {
			open[len(open)-1] = 'k'
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, 'k')
			case '[':
				open = append(open, 'a')
			default:
				open = open[:len(open)-1]
				valueRead()
			}
		case string:
			if len(open) > 0 && open[len(open)-1] == 'k' {
				open[len(open)-1] = 'v'
				continue
			}
			n += int64(len(t))
			valueRead()
		default:
			valueRead()
		}
	}
}

// finish ends the answer with the entry's usage, or an estimate (a token
// per four bytes) when the entry has none: agents fail a turn whose
// answer lacks one.
func (a *sink) finish(stop acp.StopReason, err error, inBytes int64) model.Usage {
	if err == nil {
		err = a.err
	}
	u := model.Usage{InputTokens: inBytes / 4, OutputTokens: int64(a.outBytes/4 + 1)}
	if a.used != nil {
		u = *a.used
	}
	if err == nil {
		a.wire.usage(u)
	}
	a.wire.finish(stop, err)
	return u
}

// sideAnswer is what a side call gets: the smallest value of the schema it
// asks for, as JSON text, its title (claude's title call) the first words
// of the conversation; a short suggestion of the next prompt; or a short
// text.
func sideAnswer(req *request) string {
	if req.schema == nil {
		if req.suggestion() {
			return "Go on."
		}
		return "OK"
	}
	var schema map[string]any
	json.Unmarshal(req.schema, &schema)
	v := smallest(schema)
	if obj, ok := v.(map[string]any); ok {
		if title, ok := obj["title"].(string); ok && title == "" {
			obj["title"] = req.title()
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// title is a short title for the call's conversation: its user's first
// words (at most six), or "A conversation".
func (r *request) title() string {
	for _, m := range r.msgs[r.context:] {
		if words := strings.Fields(m.Text); m.Role == "user" && len(words) > 0 {
			return strings.Join(words[:min(len(words), 6)], " ")
		}
	}
	return "A conversation"
}

// smallest is the smallest value a JSON schema allows, near enough: its
// first enum value or constant, an object of its required properties,
// an empty string or array, zero, false.
func smallest(schema map[string]any) any {
	if v, ok := schema["const"]; ok {
		return v
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[0].(map[string]any); ok {
				return smallest(alt)
			}
		}
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		return ""
	case "number", "integer":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	obj := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	required, _ := schema["required"].([]any)
	for _, r := range required {
		name, _ := r.(string)
		if p, ok := props[name].(map[string]any); ok {
			obj[name] = smallest(p)
		} else {
			obj[name] = ""
		}
	}
	return obj
}

// callRefused is a model call the fixture has no conversation for: the
// caller's mistake (HTTP 422), not the server's.
type callRefused struct{ msg string }

func (e *callRefused) Error() string { return e.msg }

// statusOf is the HTTP status an answer that failed with err gets.
func statusOf(err error) int {
	var r *callRefused
	if errors.As(err, &r) {
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// errorText is what an answer that failed with err says.
func errorText(err error) string {
	var r *callRefused
	if errors.As(err, &r) {
		return r.msg
	}
	return acp.AsError(err).Message
}

// ownWords is a text part of a message as matching sees it: "" for a part
// that is wholly one tagged block (<system-reminder>…</system-reminder>,
// <environment_context>…</environment_context>, <session_context>…): the
// context an agent wraps around the user's words, which an entry's expect
// is not checked against (a word of it, "again" say, would meet any expect
// that has it).
func ownWords(part string) string {
	t := strings.TrimSpace(part)
	if !strings.HasPrefix(t, "<") {
		return part
	}
	end := strings.IndexByte(t, '>')
	name := t[1:max(end, 1)]
	if end < 2 || strings.ContainsFunc(name, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r == '_' || r == '-' || r >= '0' && r <= '9') }) {
		return part
	}
	if strings.HasSuffix(t, "</"+name+">") {
		return ""
	}
	return part
}
