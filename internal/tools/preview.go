// preview.go bounds what the client is shown of a tool's output: the
// model is given the output (within its own limits), the editor a preview.

package tools

import (
	"encoding/json"
	"fmt"
	"strings"

	"acpbridge/internal/acp"
	"acpbridge/internal/jsonenc"
)

// PreviewBytes bounds the text contents of one tool_call_update as JSON
// (escapes counted). With the rest of the update the line stays under
// 64 KiB, which clients that read lines with asyncio's default limit (the
// Python ACP SDK) can take.
const PreviewBytes = 48 << 10

// RawPreviewBytes bounds the JSON of a tool call's rawOutput (an MCP tool's
// structuredContent is as large as the tool makes it); the texts share
// what is left of PreviewBytes.
const RawPreviewBytes = PreviewBytes / 4

// Preview cuts what the client is shown of out to PreviewBytes: a rawOutput
// whose JSON is longer than RawPreviewBytes becomes a preview of that JSON,
// as a string; each text content longer than its share of the rest
// becomes a preview: its head and its tail, with a note between of how much
// was left out. The result the model is given is not touched, nor diffs
// (what the user approves) or terminals.
func Preview(out *Outcome) {
	budget := PreviewBytes - previewRaw(out)
	texts := 0
	for _, c := range out.Content {
		if c.Text != "" {
			texts++
		}
	}
	if texts == 0 {
		return
	}
	budget /= texts
	for i, c := range out.Content {
		if c.Text != "" && jsonenc.StringLen(c.Text) > budget {
			out.Content[i] = acp.TextOut(preview(c.Text, budget))
		}
	}
}

// previewRaw cuts out's rawOutput to a preview when its JSON is longer than
// RawPreviewBytes; the bytes it takes of the update.
func previewRaw(out *Outcome) int {
	if out.RawOutput == nil {
		return 0
	}
	raw, ok := out.RawOutput.(json.RawMessage)
	if !ok {
		raw = acp.MustJSON(out.RawOutput)
	}
	if len(raw) <= RawPreviewBytes {
		return len(raw)
	}
	out.RawOutput = json.RawMessage(jsonenc.AppendString(nil, preview(string(raw), RawPreviewBytes)))
	return RawPreviewBytes
}

// preview is s as at most budget bytes of JSON: three quarters head, a
// quarter tail (a command's error is at its end), cut between characters.
func preview(s string, budget int) string {
	budget -= 2 + 160 // the quotes and the note
	head := 0
	for n := 0; head < len(s); {
		size, w := jsonenc.CharLen(s, head)
		if n+w > budget*3/4 {
			break
		}
		head, n = head+size, n+w
	}
	tail := len(s)
	for n := 0; tail > head; {
		start := tail - 1
		for start > head && s[start]&0xC0 == 0x80 {
			start-- // back to the character's first byte
		}
		_, w := jsonenc.CharLen(s, start)
		if n+w > budget/4 {
			break
		}
		tail, n = start, n+w
	}
	left := s[head:tail]
	return fmt.Sprintf("%s\n[… %d bytes (%d lines) not shown here …]\n%s",
		s[:head], len(left), strings.Count(left, "\n"), s[tail:])
}
