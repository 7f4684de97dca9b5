// context_test.go checks what of a conversation fits the context budget.

package model

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify fit: hundreds of tool results in old turns are replaced by a note
// first, then old turns are left out, the current turn never; the
// conversation itself keeps everything.
func TestConversation_fit(t *testing.T) {
	c := &Conversation{Full: true}
	for turn := range 20 {
		c.Add(Message{Role: "user", Text: fmt.Sprintf("turn %d", turn)})
		for i := range 20 {
			id := fmt.Sprintf("c%d_%d", turn, i)
			c.Add(Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Name: "read_file", Input: []byte(`{"path":"a"}`)}}})
			c.Add(Message{Role: "tool", ToolCallID: id, Text: strings.Repeat("r", 2000)})
		}
	}
	c.Add(Message{Role: "user", Text: "now"})
	before := len(c.Msgs)
	size := func(ms []Message) (n int) {
		for _, m := range ms {
			n += Estimate(m)
		}
		return n
	}
	msgs, trimmed := c.Fit(50_000)
	assert.True(t, trimmed)
	assert.LessOrEqual(t, size(msgs), 50_000)
	assert.Equal(t, before, len(msgs), "replacing tool results was enough: no turn left out")
	assert.Equal(t, LeftOut, msgs[2].Text, "the oldest tool result goes first")
	assert.Equal(t, "now", msgs[len(msgs)-1].Text)

	msgs, _ = c.Fit(1_000)
	assert.LessOrEqual(t, size(msgs), 1_000)
	assert.Equal(t, "user", msgs[0].Role, "whole turns are left out")
	assert.Less(t, len(msgs), before/10, "old turns left out")
	assert.Equal(t, "now", msgs[len(msgs)-1].Text, "the current turn kept")
	msgs, _ = c.Fit(10)
	assert.Equal(t, []Message{{Role: "user", Text: "now"}}, msgs, "the current turn is kept even over the budget")
	assert.Len(t, c.Msgs, before, "the conversation keeps everything")
	assert.Equal(t, 2000, len(c.Msgs[2].Text))
}

// Verify that answering the unrun calls of an answer with 100,000 tool
// calls, some answered, gives each unanswered one exactly one result (and
// does not take quadratic time: this runs in well under a second).
func TestConversation_answerUnrunMany(t *testing.T) {
	c := &Conversation{Full: true}
	calls := make([]ToolCall, 100_000)
	for i := range calls {
		calls[i] = ToolCall{ID: fmt.Sprintf("c%d", i), Name: "read_file"}
	}
	c.Add(Message{Role: "assistant", ToolCalls: calls})
	c.Add(Message{Role: "tool", ToolCallID: "c7", Text: "ran"})
	c.AnswerUnrun(calls, "the turn was cancelled")
	assert.Len(t, c.Msgs, 1+100_000)
	seen := map[string]int{}
	for _, m := range c.Msgs[1:] {
		seen[m.ToolCallID]++
	}
	assert.Len(t, seen, 100_000)
	assert.Equal(t, "ran", c.Msgs[1].Text)
}
