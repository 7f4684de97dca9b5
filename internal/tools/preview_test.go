package tools

import (
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
