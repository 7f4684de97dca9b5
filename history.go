// history.go rebuilds the model's side of a conversation from the
// session's log, as opening a session (load, resume) does: each record fed
// in order, turns that ended in refusal left out, a tool call without a
// recorded result given one saying so.

package main

import (
	"encoding/json"
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/model"
	"acpbridge/internal/store"
)

// feeder rebuilds the model-side conversation from records in order:
// turns that ended in refusal are left out, and a tool call with no
// recorded result gets one saying so.
type feeder struct {
	c           *model.Conversation
	imageBudget int             // the images the conversation keeps (config.imageBudget)
	mark        int             // where the current turn began
	asst        *model.Message  // the assistant message being built
	text        strings.Builder // its text: appended in parts, made a string once
	pending     map[string]bool
	order       []string // model call ids of the current step, in order
}

func newFeeder(c *model.Conversation, imageBudget int) *feeder {
	return &feeder{c: c, imageBudget: imageBudget, pending: map[string]bool{}}
}

func (f *feeder) flushAsst() {
	if f.asst != nil {
		f.asst.Text = f.text.String()
		f.text.Reset()
		f.c.Add(*f.asst)
		f.asst = nil
	}
}

// closeCalls answers the calls of the last step that have no result.
func (f *feeder) closeCalls() {
	f.flushAsst()
	for _, id := range f.order {
		if f.pending[id] {
			f.c.Add(model.Message{Role: "tool", ToolCallID: id, Text: "The tool call was interrupted: acpbridge stopped before it finished. Its effects are unknown."})
		}
	}
	clear(f.pending)
	f.order = f.order[:0]
}

func (f *feeder) assistant() *model.Message {
	if f.asst == nil {
		f.asst = &model.Message{Role: "assistant"}
	}
	return f.asst
}

func (f *feeder) add(rec store.Record) {
	switch rec.Type {
	case store.RecUser:
		f.closeCalls()
		f.mark = f.c.Mark()
		blocks := storedPrompt(rec.Blocks)
		f.c.Add(model.Message{Role: "user", Text: promptText(blocks), Images: promptImages(blocks)})
	case store.RecAgent:
		if !rec.Notice {
			f.assistant()
			if f.c.Full {
				f.text.WriteString(rec.Text)
			}
		}
	case store.RecToolCall:
		if rec.Call != nil {
			m := f.assistant()
			m.ToolCalls = append(m.ToolCalls, model.ToolCall(*rec.Call))
			f.pending[rec.Call.ID] = true
			f.order = append(f.order, rec.Call.ID)
		}
	case store.RecToolResult:
		f.result(rec)
	case store.RecTurnEnd:
		f.closeCalls()
		if acp.StopReason(rec.StopReason) == acp.StopRefusal {
			f.c.Truncate(f.mark)
		}
		f.c.KeepImagesWithin(f.imageBudget) // as the turn's end did live
	}
}

// result adds a recorded tool result, once, for a call the model made.
func (f *feeder) result(rec store.Record) {
	f.flushAsst()
	if rec.Call == nil || !f.pending[rec.Call.ID] {
		return
	}
	f.pending[rec.Call.ID] = false
	text := rec.Result
	if rec.ResultIsContent {
		text = contentText(rec.Content)
	}
	f.c.Add(model.Message{Role: "tool", ToolCallID: rec.Call.ID, Text: text})
}

// storedPrompt is a recorded prompt's content blocks, those that decode
// whole (a text block has its text, a resource its resource).
func storedPrompt(raw []json.RawMessage) []acp.ContentBlock {
	var blocks []acp.ContentBlock
	for _, b := range raw {
		var cb acp.ContentBlock
		if json.Unmarshal(b, &cb) == nil && (cb.Type != "text" || cb.Text != nil) && (cb.Type != "resource" || cb.Resource != nil) {
			blocks = append(blocks, cb)
		}
	}
	return blocks
}

func (f *feeder) finish() {
	f.closeCalls()
	f.c.KeepImagesWithin(f.imageBudget)
}

// contentText is the text of the one text block of stored tool content.
func contentText(content json.RawMessage) string {
	var c []struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(content, &c) != nil || len(c) != 1 {
		return ""
	}
	return c[0].Content.Text
}
