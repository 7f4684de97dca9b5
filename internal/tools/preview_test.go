// preview_test.go checks what the editor is shown of a tool's output:
// held to the preview's bound for every kind of content.

package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"acpbridge/internal/acp"
	"acpbridge/internal/jsonenc"
)

// Verify that a long text content becomes a preview whose JSON fits the
// budget, whatever its escapes cost, keeping its head and tail and saying
// how much was left out; that the model's result and short texts stay.
func TestPreview(t *testing.T) {
	for _, unit := range []string{"line of text\n", "\x01\"\\é😀\u2028", "x"} {
		text := "HEAD" + strings.Repeat(unit, 300<<10/len(unit)) + "TAIL"
		out := Outcome{Content: []acp.ToolContent{acp.TextOut(text), acp.TextOut("short")}, Result: text}
		Preview(&out)
		got := out.Content[0].Text
		assert.LessOrEqual(t, jsonenc.StringLen(got), PreviewBytes/2, "its share of the budget, as JSON")
		assert.True(t, strings.HasPrefix(got, "HEAD") && strings.HasSuffix(got, "TAIL"), "head and tail kept")
		assert.Contains(t, got, "not shown here")
		assert.Equal(t, "short", out.Content[1].Text)
		assert.Equal(t, text, out.Result, "the model's result is not the preview")
		assert.Equal(t, string(jsonenc.AppendString([]byte(`{"type":"text","text":`), got))+"}", string(out.Content[0].Content))
	}
}

// Verify that a large rawOutput (an MCP tool's structuredContent of 200
// KB) is shown as a preview of its JSON, within RawPreviewBytes, beside a
// text preview, the whole update within PreviewBytes; a small rawOutput
// stays as it is; the model's result is not touched.
func TestPreview_rawOutput(t *testing.T) {
	big := map[string]any{"rows": strings.Repeat(`{"id":1,"name":"x"},`, 10<<10), "end": "TAIL"}
	text := strings.Repeat("y", 200<<10)
	out := Outcome{Content: []acp.ToolContent{acp.TextOut(text)}, RawOutput: map[string]json.RawMessage{"structuredContent": acp.MustJSON(big)}, Result: text}
	Preview(&out)
	raw := acp.MustJSON(out.RawOutput)
	assert.LessOrEqual(t, len(raw), RawPreviewBytes)
	assert.True(t, json.Valid(raw), "still JSON")
	assert.Contains(t, string(raw), "not shown here")
	assert.Contains(t, string(raw), "TAIL", "the JSON's tail kept")
	assert.LessOrEqual(t, len(raw)+jsonenc.StringLen(out.Content[0].Text), PreviewBytes, "the update within its budget")
	assert.Equal(t, text, out.Result)

	small := Outcome{Content: []acp.ToolContent{acp.TextOut("ok")}, RawOutput: map[string]any{"exitCode": 0}}
	Preview(&small)
	assert.Equal(t, map[string]any{"exitCode": 0}, small.RawOutput)
}
