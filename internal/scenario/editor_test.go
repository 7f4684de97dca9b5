// editor_test.go tests the transcript's editor line (the agent's requests
// answered as an editor answers them) and the end of an agent that ignores
// its stdin's end.

package scenario

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// askingAgent, at the prompt (method "go"), asks permission, reads a file
// that does not exist, writes it, reads it back by line and limit, asks an
// unknown method and tries a path outside the run; it answers the prompt
// with every answer it got. It ignores stdin's end until End is called.
func askingAgent(ended *atomic.Bool) func([]string, Env) (*Agent, error) {
	return func(flags []string, env Env) (*Agent, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan struct{})
		end := make(chan struct{})
		go func() {
			defer close(done)
			defer outW.Close()
			br := bufio.NewScanner(inR)
			ask := func(id int, method, params string) json.RawMessage {
				fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
				br.Scan()
				var m struct {
					Result json.RawMessage `json:"result"`
					Error  json.RawMessage `json:"error"`
				}
				json.Unmarshal(br.Bytes(), &m)
				if m.Error != nil {
					return m.Error
				}
				return m.Result
			}
			for br.Scan() {
				var m struct {
					ID     int    `json:"id"`
					Method string `json:"method"`
				}
				json.Unmarshal(br.Bytes(), &m)
				if m.Method != "go" {
					fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", m.ID)
					continue
				}
				path := filepath.Join(env.Cwd, "a.txt")
				got := []json.RawMessage{
					ask(100, "session/request_permission", `{"options":[{"optionId":"no","kind":"reject_once"},{"optionId":"yes!","kind":"allow_once"}]}`),
					ask(101, "fs/read_text_file", fmt.Sprintf(`{"path":%q}`, path)),
					ask(102, "fs/write_text_file", fmt.Sprintf(`{"path":%q,"content":"1\n2\n3\n"}`, path)),
					ask(103, "fs/read_text_file", fmt.Sprintf(`{"path":%q,"line":2,"limit":1}`, path)),
					ask(104, "terminal/create", `{"command":"ls"}`),
					ask(105, "fs/read_text_file", `{"path":"/etc/passwd"}`),
				}
				b, _ := json.Marshal(got)
				fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":%d,"result":{"answers":%s}}`+"\n", m.ID, b)
			}
			<-end // stdin's end ignored
		}()
		return &Agent{Stdin: inW, Stdout: outR,
			Wait:   func() int { <-done; return -1 },
			Kill:   func() { inW.Close(); outR.Close() },
			End:    func() { ended.Store(true); close(end) },
			Stderr: func() string { return "" }}, nil
	}
}

// Verify that after an editor line the agent's requests are answered as
// an editor answers them, not matched; and that an agent that does not
// exit at stdin's end is ended by the run, a figure and not a failure.
func TestRun_editor(t *testing.T) {
	var ended atomic.Bool
	res := runText(t, `The editor answers.
-- flags --
-- transcript --
> {"jsonrpc":"2.0","id":1,"method":"before"}
< {"jsonrpc":"2.0","id":1,"result":{}}
editor
> {"jsonrpc":"2.0","id":2,"method":"go"}
< {"jsonrpc":"2.0","id":2,"result":{"answers":"$ANSWERS"}}
-- check/a.txt --
1
2
3
`, Options{Start: askingAgent(&ended)})
	require.NoError(t, res.Err)
	assert.True(t, ended.Load() && res.EndedByRun, "the agent was ended after stdin's end")
	var answers []json.RawMessage
	require.NoError(t, json.Unmarshal(res.Received[len(res.Received)-1], &struct {
		Result struct{ Answers *[]json.RawMessage } `json:"result"`
	}{struct{ Answers *[]json.RawMessage }{&answers}}))
	require.Len(t, answers, 6)
	assert.JSONEq(t, `{"outcome":{"outcome":"selected","optionId":"yes!"}}`, string(answers[0]))
	assert.JSONEq(t, `{"content":""}`, string(answers[1]), "a file not on disk reads as a new, empty buffer")
	assert.JSONEq(t, `{}`, string(answers[2]))
	assert.JSONEq(t, `{"content":"2\n"}`, string(answers[3]))
	assert.Contains(t, string(answers[4]), `"code":-32601`)
	assert.Contains(t, string(answers[5]), "keeps to the run's directory")
	_, err := os.Stat(res.Env.Dir)
	assert.True(t, os.IsNotExist(err), "the run's directory is gone")
}

// Verify `editor rejecting`: the same editor, whose user rejects every
// permission asked (the option of kind reject_once), the rest answered
// as before.
func TestRun_editorRejecting(t *testing.T) {
	var ended atomic.Bool
	res := runText(t, `The editor's user says no.
-- flags --
-- transcript --
editor rejecting
> {"jsonrpc":"2.0","id":2,"method":"go"}
< {"jsonrpc":"2.0","id":2,"result":{"answers":"$ANSWERS"}}
`, Options{Start: askingAgent(&ended)})
	require.NoError(t, res.Err)
	var answers []json.RawMessage
	require.NoError(t, json.Unmarshal(res.Received[len(res.Received)-1], &struct {
		Result struct{ Answers *[]json.RawMessage } `json:"result"`
	}{struct{ Answers *[]json.RawMessage }{&answers}}))
	require.Len(t, answers, 6)
	assert.JSONEq(t, `{"outcome":{"outcome":"selected","optionId":"no"}}`, string(answers[0]), "rejected")
	assert.JSONEq(t, `{}`, string(answers[2]), "a write still answered as an editor does")
}

// Verify that `editor rejecting`, asked with no option that says no,
// dismisses the request (cancelled) rather than picking an allow.
func TestEditorRejecting_noRejectOffered(t *testing.T) {
	r := &run{rejecting: true}
	got, err := r.answerAsEditor("session/request_permission", json.RawMessage(`{"options":[{"optionId":"yes","kind":"allow_once"}]}`))
	require.Nil(t, err)
	b, _ := json.Marshal(got)
	assert.JSONEq(t, `{"outcome":{"outcome":"cancelled"}}`, string(b))
}
