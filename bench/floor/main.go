// Command floor is the benchmark's reference agent: the least an ACP agent
// can do, with the standard library. It answers initialize and
// session/new; a prompt "stream N K" streams N agent_message_chunk updates
// of K bytes, pre-encoded, through one buffered writer; "read M" makes M
// bare fs/read_text_file requests of CWD/f.txt, one after the other. Its
// figures are the practical limit the driver measures acpbridge against.
// It ignores its command-line arguments, so that it runs with acpbridge's.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// msg is what the agent reads of a message.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Cwd    string `json:"cwd"`
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	} `json:"params"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	cwd := ""
	for in.Scan() {
		var m msg
		if json.Unmarshal(in.Bytes(), &m) != nil || m.Method == "" || len(m.ID) == 0 {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}`+"\n", m.ID)
		case "session/new":
			cwd = m.Params.Cwd
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
				path, _ := json.Marshal(filepath.Join(cwd, "f.txt"))
				for i := range n {
					fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"s1","path":%s}}`+"\n", i+1, path)
					out.Flush()
					if !in.Scan() { // the answer
						return
					}
				}
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`+"\n", m.ID)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		out.Flush()
	}
}
