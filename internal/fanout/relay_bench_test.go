// relay_bench_test.go measures what relaying one of a child's lines costs
// the router: its one decode (off the loop) and its write to the client.

package fanout

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"acpbridge/internal/channel"
)

// BenchmarkRelayUpdate: a child's session/update of 5 KB, from the line as
// read to its bytes written to the client: decodeChildLine's one read of
// the members the router routes by (windows on the line, nothing copied),
// then onChildMessage, which forwards the line as it came.
func BenchmarkRelayUpdate(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}}}}`)
	r := newRouter(Options{Log: slog.New(slog.DiscardHandler), MaxChildren: 1, Version: "test", Stderr: io.Discard}, "")
	r.out = channel.NewWire(strings.NewReader(""), io.Discard, 1<<20, nil)
	c := &child{state: childServing, session: "s1"}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		r.onChildMessage(c, decodeChildLine(line))
	}
	r.out.Flush()
}
