// bench_prompt_linux_test.go measures, on the binary, what one big prompt
// costs in memory: the process's peak RSS (VmHWM) for a text prompt and an
// image prompt on an OpenAI-compatible endpoint, against the line's size.
// docs/performance.md has the figures and the command.

package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkPromptMemory sends one prompt of each size to a fresh process
// and reports its peak RSS in MiB and that peak over the line's size.
func BenchmarkPromptMemory(b *testing.B) {
	sse, err := os.ReadFile("fixtures/openai/text.sse")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name string
		mib  int
		kind string
	}{{"text10MiB", 10, "text"}, {"text40MiB", 40, "text"}, {"image20MiB", 20, "image"}} {
		b.Run(c.name, func(b *testing.B) {
			var block string
			switch c.kind {
			case "text":
				t, _ := json.Marshal(strings.Repeat("pasted log line, ", c.mib<<20/17))
				block = `{"type":"text","text":` + string(t) + `}`
			case "image":
				block = `{"type":"text","text":"what is this?"},{"type":"image","mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(make([]byte, c.mib<<20)) + `"}`
			}
			line := `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"SID","prompt":[` + block + `]}}`
			var peak int
			for b.Loop() {
				peak = promptPeak(b, srv.URL, line)
			}
			b.ReportMetric(float64(peak)/1024, "peak-MiB")
			b.ReportMetric(float64(peak<<10)/float64(len(line)), "peak/line")
			b.ReportMetric(float64(len(line))/(1<<20), "line-MiB")
		})
	}
}

// promptPeak runs the binary, sends the prompt line (its SID replaced by
// the session's id) and returns the process's peak RSS in KiB once the
// prompt is answered.
func promptPeak(b *testing.B, url, line string) int {
	cmd := exec.Command(binary(b), "--model", "openai:gpt-test", "--base-url", url+"/v1", "--models", "gpt-test", "--state-dir", b.TempDir(), "--log-level", "error")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-bench")
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	out := bufio.NewReaderSize(outPipe, 1<<20)
	until := func(marker string) string {
		for {
			l, err := out.ReadString('\n')
			if err != nil {
				b.Fatalf("the agent ended before %s: %v", marker, err)
			}
			if strings.Contains(l, marker) {
				return l
			}
		}
	}
	io.WriteString(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n")
	until(`"id":0,`)
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`+"\n", b.TempDir())
	var r struct{ Result struct{ SessionID string } }
	json.Unmarshal([]byte(until(`"id":1,`)), &r)
	io.WriteString(in, strings.Replace(line, `"SID"`, strconv.Quote(r.Result.SessionID), 1)+"\n")
	if res := until(`"id":2,`); !strings.Contains(res, `"result"`) {
		b.Fatalf("the prompt failed: %.300s", res)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	b.Fatal("no VmHWM")
	return 0
}
