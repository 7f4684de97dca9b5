// context.go keeps what the model is sent within a budget: a long session
// must not end in a provider's context-length error. The session log and
// session/load keep everything; only the model's view is trimmed.
//
// The budget is --max-context-tokens, estimated at four bytes a token. Over
// it, the oldest tool results (before the current turn) are replaced by a
// one-line note first, then the oldest turns are left out whole; the system
// prompt and the current turn never are. A provider's own context-length
// error lowers the budget below what was sent and the call is made again,
// once.

package model

import (
	"fmt"
	"slices"
	"strings"
)

// BytesPerToken is the estimate of a token's size.
const BytesPerToken = 4

// LeftOut replaces a tool result the budget leaves out.
const LeftOut = "[This tool result was left out to fit the model's context window; run the tool again if you need it.]"

// imageTokens is what an image is estimated to take of the context (a
// large image at high detail costs providers about that many tokens).
const imageTokens = 1000

// Estimate is a message's size in tokens.
func Estimate(m Message) int {
	n := len(m.Text) + 16 + len(m.Images)*imageTokens*BytesPerToken
	for _, tc := range m.ToolCalls {
		n += len(tc.Name) + len(tc.Input) + 16
	}
	return n / BytesPerToken
}

// Trim is what Fit left out of what the model is sent.
type Trim struct {
	Results int  // older tool results replaced by a note (LeftOut)
	Turns   int  // older turns left out whole
	Over    bool // the current turn alone is over the budget: it is sent whole all the same
}

// Trimmed reports whether anything was left out.
func (t Trim) Trimmed() bool { return t.Results > 0 || t.Turns > 0 || t.Over }

// Fit returns the messages to send within budget tokens (the system prompt
// and the tools not counted), and what was left out. The conversation
// itself is not changed.
func (c *Conversation) Fit(budget int) ([]Message, Trim) {
	total := 0
	for _, m := range c.Msgs {
		total += Estimate(m)
	}
	if total <= budget {
		return c.Msgs, Trim{}
	}
	// The current turn begins at the newest user message.
	current := 0
	for i := len(c.Msgs) - 1; i >= 0; i-- {
		if c.Msgs[i].Role == "user" {
			current = i
			break
		}
	}
	msgs := append([]Message(nil), c.Msgs...)
	note := Message{Text: LeftOut}
	var t Trim
	for i := 0; i < current && total > budget; i++ {
		if m := msgs[i]; m.Role == "tool" && len(m.Text) > len(LeftOut) {
			total -= Estimate(m) - Estimate(note)
			msgs[i].Text = LeftOut
			t.Results++
		}
	}
	start, total := oldTurnsOut(msgs, current, total, budget, &t)
	t.Over = total > budget
	return msgs[start:], t
}

// oldTurnsOut returns where msgs begin once whole turns before current,
// oldest first (from one user message to the next), are left out until
// the estimate (total) is within budget, and the estimate then; it counts
// the turns in t.
func oldTurnsOut(msgs []Message, current, total, budget int, t *Trim) (int, int) {
	start := 0
	for start < current && total > budget {
		end := start + 1
		for end < current && msgs[end].Role != "user" {
			end++
		}
		for _, m := range msgs[start:end] {
			total -= Estimate(m)
		}
		start = end
		t.Turns++
	}
	return start, total
}

// ContextTooLong reports whether a model error says the request was over
// the model's context window (OpenAI, vLLM, llama.cpp and Ollama word it
// in these ways).
func ContextTooLong(err error) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "context length") || strings.Contains(s, "context_length") ||
		strings.Contains(s, "context window") || strings.Contains(s, "maximum context") ||
		strings.Contains(s, "too many tokens") || strings.Contains(s, "exceeds the context")
}

// ImageBudget is the most image data one request carries, in bytes as
// sent (base64): chat APIs are stateless, so every call carries the
// conversation's earlier images again, and providers refuse a request past
// a few tens of MiB. It holds a prompt at acpbridge's own limit (50 MiB
// decoded) with room to spare.
const ImageBudget = 72 << 20

// WithinImageBudget is msgs with at most budget bytes of image data: the
// newest images kept, and from the first that does not fit, each older one
// replaced by a line in its message's text that names it. msgs itself is not changed (a
// message that loses images is a copy).
func WithinImageBudget(msgs []Message, budget int) []Message {
	out := msgs
	used, full := 0, false
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		var kept []Image
		var left []string
		for j := len(m.Images) - 1; j >= 0; j-- {
			im := m.Images[j]
			if full = full || used+len(im.Data) > budget; !full {
				used += len(im.Data)
				kept = append(kept, im)
				continue
			}
			left = append(left, fmt.Sprintf("[image %s, %d bytes of base64: left out of this request, which carries at most %d MiB of images; the model saw it in an earlier one]", im.MimeType, len(im.Data), budget>>20))
		}
		if len(left) == 0 {
			continue
		}
		if &out[0] == &msgs[0] {
			out = slices.Clone(msgs)
		}
		slices.Reverse(kept)
		slices.Reverse(left)
		m.Images = kept
		m.Text = strings.Join(append([]string{m.Text}, left...), "\n")
		out[i] = m
	}
	return out
}

// ImageCount is how many images msgs carry.
func ImageCount(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	return n
}

// KeepImagesWithin drops from the conversation the images no request will
// carry again: from the first that does not fit within budget, counting
// from the newest, each older one is replaced by the line a request names
// it with (WithinImageBudget). Requests send the newest images first and
// only ever drop older turns, so what the model is sent does not change;
// what the process holds is bounded by the budget, not by the images the
// session has had. The session log keeps every image.
func (c *Conversation) KeepImagesWithin(budget int) {
	c.Msgs = WithinImageBudget(c.Msgs, budget)
}
