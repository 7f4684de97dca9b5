// bench_test.go holds the in-process benchmarks of the two hot paths: a
// streamed turn (session/update chunks) and tool calls that round-trip
// through the client's fs/read_text_file. The side-by-side figures against
// other agents come from bench.sh, which runs ../shared/bench on the binary.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchAgent runs an agent in-process with a minimal client that answers
// fs/read_text_file at once and counts lines until the response with id.
type benchAgent struct {
	in  *io.PipeWriter
	out *bufio.Reader
}

// serveBench runs an agent with args in-process; stop closes its stdin and
// waits for it to end.
func serveBench(args ...string) (ba *benchAgent, stop func()) {
	a, _, _ := setup(append(args, "--log-level", "error"), io.Discard, io.Discard)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		serve(context.Background(), a, inR, outW, nil)
		outW.Close()
		close(done)
	}()
	ba = &benchAgent{in: inW, out: bufio.NewReaderSize(outR, 1<<20)}
	ba.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	ba.until(`"id":0,"result"`)
	return ba, func() {
		inW.Close()
		io.Copy(io.Discard, outR)
		<-done
	}
}

func startBench(b *testing.B, fixture string) *benchAgent {
	b.Helper()
	ba, stop := serveBench("--model", "replay:"+fixture, "--state-dir", b.TempDir(), "--max-turn-requests", "1000000")
	b.Cleanup(stop)
	cwd := b.TempDir()
	os.WriteFile(filepath.Join(cwd, "f.txt"), []byte("x"), 0o644)
	ba.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd))
	line := ba.until(`"id":1,"result"`)
	var r struct{ Result struct{ SessionID string } }
	json.Unmarshal([]byte(line), &r)
	ba.send(prompt(2, r.Result.SessionID, "go"))
	return ba
}

func (ba *benchAgent) send(line string) { io.WriteString(ba.in, line+"\n") }

// benchFile is what fs/read_text_file answers: 1 KiB of text in lines of
// 64 bytes, as ../shared/bench's driver answers.
var benchFile = func() string {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	var b strings.Builder
	for i := 0; b.Len() < 1024; i++ {
		if i%64 == 63 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(alpha[i%len(alpha)])
		}
	}
	return b.String()
}()

var benchFileJSON = func() string { b, _ := json.Marshal(benchFile); return string(b) }()

// until reads lines, answering fs reads, until one contains marker.
func (ba *benchAgent) until(marker string) string {
	for {
		line, err := ba.out.ReadString('\n')
		if err != nil {
			panic(err)
		}
		if strings.Contains(line, marker) {
			return line
		}
		if strings.Contains(line, `"method":"fs/read_text_file"`) {
			var req struct{ ID json.RawMessage }
			json.Unmarshal([]byte(line), &req)
			ba.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":` + benchFileJSON + `}}`)
		}
	}
}

// BenchmarkStream streams b.N chunks of 64 bytes in one turn.
func BenchmarkStream(b *testing.B) {
	chunk := strings.Repeat("abcdefgh", 8)
	var sb strings.Builder
	sb.WriteString(`{"chunks":[`)
	for i := range b.N {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"text":"` + chunk + `"}`)
	}
	sb.WriteString("]}\n")
	fixture := filepath.Join(b.TempDir(), "stream.jsonl")
	os.WriteFile(fixture, []byte(sb.String()), 0o644)
	b.ResetTimer()
	ba := startBench(b, fixture)
	ba.until(`"id":2,"result":{"stopReason"`)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkCallback makes b.N read_file tool calls through the client's
// fs/read_text_file in one turn, each answered with 1 KiB: the per-call
// round trip, with the client's side in the same process.
func BenchmarkCallback(b *testing.B) {
	var sb strings.Builder
	for i := range b.N {
		fmt.Fprintf(&sb, `{"chunks":[{"toolCall":{"id":"r%d","name":"read_file","input":{"path":"f.txt"}}}]}`+"\n", i)
	}
	sb.WriteString(`{"chunks":[{"text":"done"}]}` + "\n")
	fixture := filepath.Join(b.TempDir(), "reads.jsonl")
	os.WriteFile(fixture, []byte(sb.String()), 0o644)
	b.ReportAllocs()
	b.ResetTimer()
	ba := startBench(b, fixture)
	ba.until(`"id":2,"result":{"stopReason"`)
}

// loadTurns is the size of the session BenchmarkLoad loads.
const loadTurns = 1000

// BenchmarkLoad loads a session of loadTurns turns (a prompt, a thought, a
// read_file tool call and an answer each) with session/load: every update
// replayed, then the response.
func BenchmarkLoad(b *testing.B) {
	state := b.TempDir()
	cwd := b.TempDir()
	os.WriteFile(filepath.Join(cwd, "f.txt"), []byte(strings.Repeat("file text ", 20)), 0o644)
	var sb strings.Builder
	answer := strings.Repeat("An answer of some length. ", 8)
	for i := range loadTurns {
		fmt.Fprintf(&sb, `{"chunks":[{"thought":"Turn %d."},{"toolCall":{"id":"c%d","name":"read_file","input":{"path":"f.txt"}}}]}`+"\n", i, i)
		fmt.Fprintf(&sb, `{"chunks":[{"text":%q}]}`+"\n", answer)
	}
	fixture := filepath.Join(b.TempDir(), "turns.jsonl")
	os.WriteFile(fixture, []byte(sb.String()), 0o644)

	// One agent makes the session; until answers its fs reads.
	ba, stop := serveBench("--model", "replay:"+fixture, "--state-dir", state)
	ba.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd))
	var r struct{ Result struct{ SessionID string } }
	json.Unmarshal([]byte(ba.until(`"id":1,"result"`)), &r)
	sid := r.Result.SessionID
	for i := range loadTurns {
		ba.send(prompt(10+i, sid, fmt.Sprintf("prompt %d: please read f.txt and tell me about it", i)))
		ba.until(fmt.Sprintf(`"id":%d,"result"`, 10+i))
	}
	stop()

	b.ResetTimer()
	for range b.N {
		ba, stop := serveBench("--state-dir", state)
		ba.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, sid, cwd))
		ba.until(`"id":1,"result"`)
		stop()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
}

// BenchmarkSessionNew opens b.N sessions one after the other in one
// process, each closed and deleted before the next (a state directory of
// thousands of files makes every create slower): session/new's cost, warm.
func BenchmarkSessionNew(b *testing.B) {
	ba, stop := serveBench("--model", "replay:fixtures/hello.jsonl", "--state-dir", b.TempDir())
	b.Cleanup(stop)
	cwd := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ba.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, 2*i+1, cwd))
		var r struct{ Result struct{ SessionID string } }
		json.Unmarshal([]byte(ba.until(fmt.Sprintf(`"id":%d,"result"`, 2*i+1))), &r)
		b.StopTimer()
		ba.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":%q}}`, 2*i+2, r.Result.SessionID))
		ba.until(fmt.Sprintf(`"id":%d,"result"`, 2*i+2))
		ba.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"d%d","method":"session/delete","params":{"sessionId":%q}}`, i, r.Result.SessionID))
		ba.until(fmt.Sprintf(`"id":"d%d","result"`, i))
		b.StartTimer()
	}
}
