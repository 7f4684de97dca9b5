// Command floortool is the benchmark's honest floor for a tool call: the
// floor agent (../floor) doing the protocol work acpbridge does for each
// read_file call through the client. For "read M" it makes M calls, each:
// a tool_call (pending, kind read, title, locations, rawInput) and a
// tool_call_update in_progress, the fs/read_text_file request (the three
// lines in one write) and the wait for its answer, a tool_call_update
// completed with the text as content, and one JSON record with the result
// appended to a session log under --state-dir (buffered, written while it
// waits on the client, synced at the end of the turn). A ratio to it is
// what an implementation costs beyond the protocol.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Cwd    string `json:"cwd"`
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	} `json:"params"`
	Result struct {
		Content string `json:"content"`
	} `json:"result"`
}

func main() {
	fs := flag.NewFlagSet("floortool", flag.ContinueOnError)
	state := fs.String("state-dir", os.TempDir(), "")
	fs.String("model", "", "")
	fs.Int("max-turn-requests", 0, "")
	fs.Parse(os.Args[1:])
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	cwd := ""
	var log *os.File
	var logw *bufio.Writer
	for in.Scan() {
		var m msg
		if json.Unmarshal(in.Bytes(), &m) != nil || m.Method == "" || len(m.ID) == 0 {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"authMethods":[]}}`+"\n", m.ID)
		case "session/new":
			cwd = m.Params.Cwd
			os.MkdirAll(*state, 0o700)
			log, _ = os.OpenFile(filepath.Join(*state, "floortool-s1.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			logw = bufio.NewWriterSize(log, 64<<10)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}`+"\n", m.ID)
		case "session/prompt":
			var text string
			if len(m.Params.Prompt) > 0 {
				text = m.Params.Prompt[0].Text
			}
			var n, k int
			if _, err := fmt.Sscanf(text, "stream %d %d", &n, &k); err == nil {
				chunk := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", k) + `"}}}}` + "\n"
				for range n {
					out.WriteString(chunk)
				}
			} else if _, err := fmt.Sscanf(text, "read %d", &n); err == nil {
				if !calls(in, out, logw, filepath.Join(cwd, "f.txt"), n) {
					return
				}
				logw.Flush()
				log.Sync()
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`+"\n", m.ID)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		out.Flush()
	}
}

// calls makes n read_file tool calls of path through the client.
func calls(in *bufio.Scanner, out, logw *bufio.Writer, path string, n int) bool {
	p, _ := json.Marshal(path)
	input := `{"path":"f.txt"}`
	for i := range n {
		id := fmt.Sprintf("call_%d", i+1)
		fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"%s","title":"Read f.txt","kind":"read","status":"pending","locations":[{"path":%s}],"rawInput":%s}}}`+"\n", id, p, input)
		fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"%s","status":"in_progress"}}}`+"\n", id)
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"s1","path":%s}}`+"\n", i+1, p)
		out.Flush()
		logw.Flush() // written while the client works
		if !in.Scan() {
			return false
		}
		var m msg
		json.Unmarshal(in.Bytes(), &m)
		content, _ := json.Marshal(m.Result.Content)
		fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"%s","status":"completed","content":[{"type":"content","content":{"type":"text","text":%s}}]}}}`+"\n", id, content)
		fmt.Fprintf(logw, `{"type":"tool_result","toolCallId":"%s","call":{"id":"r%d","name":"read_file","input":%s},"status":"completed","content":[{"type":"content","content":{"type":"text","text":%s}}],"resultIsContent":true}`+"\n", id, i, input, content)
	}
	return true
}
