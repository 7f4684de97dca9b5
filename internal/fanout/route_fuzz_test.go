// route_fuzz_test.go fuzzes the router's read of the client's lines: the
// wire's one decode, then what route reads of it.

package fanout

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"acpbridge/internal/channel"
)

// FuzzRoute: a router that may start no child (--max-children 0) takes any
// line a client could send without a panic, and writes only whole JSON
// objects, each a response with an id, to the client.
func FuzzRoute(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":"x","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":7}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/list","params":null}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
		`[1,2]`, `"text"`, `{"id":1}`, `{"jsonrpc":"2.0","id":1,"method":"a\u0001b","params":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\r\n") {
			return // one line at a time
		}
		var out bytes.Buffer
		r := newRouter(Options{Log: slog.New(slog.DiscardHandler), MaxChildren: 0, Version: "test", Stderr: io.Discard, RefusedMove: func(what string) { panic(what) }}, "")
		r.out = channel.NewWire(bytes.NewReader(append(line, '\n')), &out, 1<<20, nil)
		for {
			m, err := r.out.RecvMessage()
			if err != nil {
				break
			}
			r.onClientMessage(m)
		}
		r.out.Flush()
		close(r.done) // the children it began to start post to no loop
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l == "" {
				continue
			}
			var resp struct {
				ID     json.RawMessage
				Method string
			}
			if err := json.Unmarshal([]byte(l), &resp); err != nil || resp.ID == nil || resp.Method != "" {
				t.Fatalf("wrote %q for %q", l, line)
			}
		}
	})
}
