// openai_fuzz_test.go fuzzes the model's event-stream reader with the
// bodies a hostile or broken OpenAI-compatible server could send.

package model

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"acpbridge/internal/acp"
)

// FuzzEventStream: whatever the body, the reader returns (no panic, no
// hang), with a stop reason a model may give or an error; every tool call it
// hands on has an id and its arguments within their cap (arguments that are
// not JSON are the core's to report to the model); the text it hands on
// stays under its cap.
func FuzzEventStream(f *testing.F) {
	for _, seed := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"pa\"}}]}}]}\n" +
			"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"a\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n",
		"data: {\"error\":{\"message\":\"model overloaded\"}}\n",
		"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}],\"usage\":{\"prompt_tokens\":3}}\ndata: [DONE]\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n",
		": comment\nevent: x\ndata:\ndata: null\ndata: []\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"unterminated",
	} {
		f.Add([]byte(seed))
	}
	m, err := NewOpenAI("http://127.0.0.1:1/v1", nil, nil, "m", slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := &http.Response{
			StatusCode: 200,
			Header:     http.Header{"Content-Type": {"text/event-stream"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		var e events
		stop, err := m.stream(context.Background(), resp, &e, "http://127.0.0.1:1/v1/chat/completions")
		if err == nil {
			switch stop {
			case acp.StopEndTurn, acp.StopMaxTokens, acp.StopRefusal, acp.StopToolUse:
			default:
				t.Fatalf("stop reason %q is not ACP's", stop)
			}
		}
		for _, c := range e.calls {
			if c.ID == "" || len(c.Input) > maxToolArgs {
				t.Fatalf("tool call %q handed on with no id or %d bytes of arguments", c.Name, len(c.Input))
			}
		}
		n := 0
		for _, g := range e.got {
			n += len(g)
		}
		if n > maxTextBytes+len(body) {
			t.Fatalf("handed on %d bytes from a %d-byte body", n, len(body))
		}
	})
}
