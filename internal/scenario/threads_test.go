// threads_test.go checks the multiplexer of --threads against an agent
// that sends a session's first update before its session/new answer, and
// an answer to no request.

package scenario

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSharedAgent answers initialize (after an answer to an id it was
// never asked) and session/new (each session's update first, then the
// answer), counting the initialize requests that reach it.
func fakeSharedAgent(inits *int) *Agent {
	sessions := 0
	return scriptedAgent(func(out io.Writer, method string, id json.RawMessage) {
		switch method {
		case "initialize":
			*inits++
			fmt.Fprintln(out, `{"jsonrpc":"2.0","id":999,"result":{}}`)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}`+"\n", id)
		case "session/new":
			sessions++
			fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s%d","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`+"\n", sessions)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s%d"}}`+"\n", id, sessions)
		}
	})
}

// Verify that every thread gets its own answers under its own ids, its
// session's update before its session/new answer, and initialize's answer
// though only the first thread's reached the agent.
func TestMux_routesByIDAndSession(t *testing.T) {
	inits := 0
	m := newMux(fakeSharedAgent(&inits), 3)
	var readers []*bufio.Scanner
	var agents []*Agent
	for k := range 3 {
		a := m.thread(k)
		agents = append(agents, a)
		readers = append(readers, bufio.NewScanner(a.Stdout))
	}
	for k := 2; k >= 0; k-- { // the later threads ask first
		_, err := agents[k].Stdin.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
			`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}` + "\n"))
		require.NoError(t, err)
	}
	next := func(k int) string {
		require.True(t, readers[k].Scan(), "thread %d's next line", k)
		return readers[k].Text()
	}
	assert.Contains(t, next(0), `"id":999`, "an answer to no request goes to the first thread, whose run says so")
	sessions := map[string]bool{}
	for k := range 3 {
		var lines []string
		for range 3 {
			lines = append(lines, next(k))
		}
		init := slicesIndex(lines, `"protocolVersion":1`)
		require.GreaterOrEqual(t, init, 0, "thread %d: %v", k, lines)
		assert.Contains(t, lines[init], `"id":0`, "its own id")
		update := slicesIndex(lines, "available_commands_update")
		answer := slicesIndex(lines, `"result":{"sessionId"`)
		require.True(t, update >= 0 && answer > update, "thread %d: the update, then the answer: %v", k, lines)
		assert.Contains(t, lines[answer], `"id":1`)
		var res struct{ Result struct{ SessionID string } }
		require.NoError(t, json.Unmarshal([]byte(lines[answer]), &res))
		assert.Contains(t, lines[update], `"sessionId":"`+res.Result.SessionID+`"`, "its own session's update")
		sessions[res.Result.SessionID] = true
	}
	assert.Len(t, sessions, 3, "a session each")
	for _, a := range agents {
		require.NoError(t, a.Stdin.Close())
	}
	for k := range 3 {
		assert.False(t, readers[k].Scan(), "every thread's output ends with the agent's")
	}
	agents[0].Wait()
	assert.Equal(t, 1, inits, "one initialize reached the agent")
}

func slicesIndex(lines []string, sub string) int {
	for i, l := range lines {
		if strings.Contains(l, sub) {
			return i
		}
	}
	return -1
}

// scriptedAgent is an agent whose answer to each line is what reply
// writes; it exits when its stdin closes.
func scriptedAgent(reply func(out io.Writer, method string, id json.RawMessage)) *Agent {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer outW.Close()
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage
				Method string
			}
			json.Unmarshal(sc.Bytes(), &m)
			reply(outW, m.Method, m.ID)
		}
	}()
	return &Agent{Stdin: inW, Stdout: outR, Wait: func() int { <-exited; return 0 }, Kill: func() { inW.Close() }, Stderr: func() string { return "" }}
}

// Verify what a misbehaving agent gets from the multiplexer: an error to
// initialize reaches every thread (none waits for an answer that never
// comes); updates for a session no thread opened reach the first thread
// at the end, for its run to fail on; a thread that failed and stopped
// reading holds up no other.
func TestMux_misbehavingAgent(t *testing.T) {
	m := newMux(scriptedAgent(func(out io.Writer, method string, id json.RawMessage) {
		switch method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no"}}`+"\n", id)
		case "session/new":
			for range 3000 { // more than a pipe holds, for the thread that stopped reading
				fmt.Fprintln(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ghost","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`)
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s"}}`+"\n", id)
		}
	}), 3)
	a0, a1, a2 := m.thread(0), m.thread(1), m.thread(2)
	r0, r1 := bufio.NewScanner(a0.Stdout), bufio.NewScanner(a1.Stdout)
	a2.Kill() // failed before reading a line: it must not hold up the others
	for _, a := range []*Agent{a1, a0} {
		_, err := a.Stdin.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n"))
		require.NoError(t, err)
	}
	for _, r := range []*bufio.Scanner{r0, r1} {
		require.True(t, r.Scan())
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no"}}`, r.Text(), "the error, under the thread's own id")
	}
	_, err := a1.Stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}` + "\n"))
	require.NoError(t, err)
	require.True(t, r1.Scan())
	assert.Contains(t, r1.Text(), `"sessionId":"s"`, "its answer, not the updates of a session it did not open")
	a1.Stdin.Close()
	a0.Stdin.Close()
	ghost := 0
	for r0.Scan() {
		if strings.Contains(r0.Text(), `"ghost"`) {
			ghost++
		}
	}
	assert.Equal(t, 3000, ghost, "the first thread gets them, and its run fails naming them")
	assert.False(t, r1.Scan())
}
