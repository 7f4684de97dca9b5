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
	msgs, trim := c.Fit(50_000)
	assert.True(t, trim.Trimmed())
	assert.Greater(t, trim.Results, 0)
	assert.Zero(t, trim.Turns)
	assert.False(t, trim.Over)
	assert.LessOrEqual(t, size(msgs), 50_000)
	assert.Equal(t, before, len(msgs), "replacing tool results was enough: no turn left out")
	assert.Equal(t, LeftOut, msgs[2].Text, "the oldest tool result goes first")
	assert.Equal(t, "now", msgs[len(msgs)-1].Text)

	msgs, trim = c.Fit(1_000)
	assert.Greater(t, trim.Turns, 0, "turns counted")
	assert.False(t, trim.Over)
	assert.LessOrEqual(t, size(msgs), 1_000)
	assert.Equal(t, "user", msgs[0].Role, "whole turns are left out")
	assert.Less(t, len(msgs), before/10, "old turns left out")
	assert.Equal(t, "now", msgs[len(msgs)-1].Text, "the current turn kept")
	msgs, trim = c.Fit(10)
	assert.Equal(t, []Message{{Role: "user", Text: "now"}}, msgs, "the current turn is kept even over the budget")
	assert.False(t, trim.Over, "it fits")
	_, trim = c.Fit(1)
	assert.True(t, trim.Over, "over the budget alone, and said to be")
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

// Verify the image budget of a request: the newest images kept, older ones
// past it replaced by a line naming them, the conversation unchanged.
func TestWithinImageBudget(t *testing.T) {
	img := func(n int) Image { return Image{MimeType: "image/png", Data: strings.Repeat("A", n)} }
	msgs := []Message{
		{Role: "user", Text: "one", Images: []Image{img(40)}},
		{Role: "assistant", Text: "seen"},
		{Role: "user", Text: "two", Images: []Image{img(30), img(30)}},
		{Role: "user", Text: "three", Images: []Image{img(40)}},
	}
	out := WithinImageBudget(msgs, 90)
	assert.Len(t, out[3].Images, 1, "the newest kept")
	assert.Len(t, out[2].Images, 1, "the newer of two kept within 90 bytes")
	assert.Equal(t, "two\n[image image/png, 30 bytes of base64: left out of this request, which carries at most 0 MiB of images; the model saw it in an earlier one]", out[2].Text)
	assert.Empty(t, out[0].Images)
	assert.Contains(t, out[0].Text, "one\n[image image/png, 40 bytes of base64: left out")
	assert.Len(t, msgs[0].Images, 1, "the conversation keeps its images")
	assert.Equal(t, "one", msgs[0].Text)
	same := WithinImageBudget(msgs, 1000)
	assert.Same(t, &msgs[0], &same[0], "within the budget: not copied")
}

// Verify that a conversation drops the images no request will carry
// again, and that a request made from it afterwards is the one made
// before it dropped them.
func TestConversation_keepImagesWithin(t *testing.T) {
	img := func(n int) Image { return Image{MimeType: "image/png", Data: strings.Repeat("A", n)} }
	c := &Conversation{Full: true}
	for i := range 5 {
		c.Add(Message{Role: "user", Text: fmt.Sprint("look ", i), Images: []Image{img(40)}})
		c.Add(Message{Role: "assistant", Text: "seen"})
	}
	before := WithinImageBudget(c.Msgs, 90)
	c.KeepImagesWithin(90)
	held := 0
	for _, m := range c.Msgs {
		for _, im := range m.Images {
			held += len(im.Data)
		}
	}
	assert.Equal(t, 80, held, "the two newest images, within 90 bytes")
	assert.Equal(t, before, WithinImageBudget(c.Msgs, 90), "what the model is sent is the same")
	assert.Contains(t, c.Msgs[0].Text, "look 0\n[image image/png, 40 bytes of base64: left out")
}
