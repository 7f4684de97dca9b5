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
	return scriptedAgent(func(out io.Writer, method string, id json.RawMessage, _ json.RawMessage) {
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
func scriptedAgent(reply func(out io.Writer, method string, id json.RawMessage, params json.RawMessage)) *Agent {
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
				Params json.RawMessage
			}
			json.Unmarshal(sc.Bytes(), &m)
			reply(outW, m.Method, m.ID, m.Params)
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
	m := newMux(scriptedAgent(func(out io.Writer, method string, id json.RawMessage, _ json.RawMessage) {
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

// Verify that $/cancel_request is mapped as ids are: a thread's withdraws
// its own prompt (the agent gets the multiplexer's id for it), not another
// thread's request with the same id; and the agent's own goes to the
// thread it asked.
func TestMux_cancelRequestMapped(t *testing.T) {
	prompts := map[string]string{} // the agent's view: request id → session
	m := newMux(scriptedAgent(func(out io.Writer, method string, id json.RawMessage, params json.RawMessage) {
		var p struct {
			SessionID string
			RequestID json.RawMessage
		}
		json.Unmarshal(params, &p)
		switch method {
		case "session/new":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s%s"}}`+"\n", id, id)
		case "session/prompt":
			prompts[string(id)] = p.SessionID
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":"perm-%s","method":"session/request_permission","params":{"sessionId":%q}}`+"\n", id, p.SessionID)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"perm-%s"}}`+"\n", id)
		case "$/cancel_request":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"cancelled","session":%q}}`+"\n", p.RequestID, prompts[string(p.RequestID)])
		}
	}), 2)
	a0, a1 := m.thread(0), m.thread(1)
	r0, r1 := bufio.NewScanner(a0.Stdout), bufio.NewScanner(a1.Stdout)
	next := func(r *bufio.Scanner) string {
		require.True(t, r.Scan())
		return r.Text()
	}
	for _, c := range []struct {
		a *Agent
		r *bufio.Scanner
	}{{a0, r0}, {a1, r1}} {
		_, err := c.a.Stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}` + "\n"))
		require.NoError(t, err)
		require.Contains(t, next(c.r), `"result"`)
	}
	// Both threads prompt under the id 2; thread 1 withdraws its own.
	_, err := a0.Stdin.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s0"}}` + "\n"))
	require.NoError(t, err)
	assert.Contains(t, next(r0), `"method":"session/request_permission"`)
	assert.Contains(t, next(r0), `"method":"$/cancel_request","params":{"requestId":"perm-`, "the agent's cancel goes to the thread it asked")
	_, err = a1.Stdin.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}` + "\n"))
	require.NoError(t, err)
	assert.Contains(t, next(r1), `"method":"session/request_permission"`)
	assert.Contains(t, next(r1), `"method":"$/cancel_request"`)
	got := next(r1)
	assert.Contains(t, got, `"id":2`, "under its own id")
	assert.Contains(t, got, `"session":"s1"`, "its own prompt was withdrawn, not thread 0's")
	a0.Stdin.Close()
	a1.Stdin.Close()
}

// Verify that an agent flooding updates for sessions no thread opened
// (50,000 of 4.8 KB, 240 MB) while a thread does not read holds at most
// maxHeldBytes of them, and that the thread's kill (the run's --timeout or
// a signal) is not held up by the flood.
func TestMux_floodOfUnknownSessionsBounded(t *testing.T) {
	update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ghost-%d","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", 4800) + `"}}}}` + "\n"
	flooded := make(chan struct{})
	m := newMux(scriptedAgent(func(out io.Writer, method string, id json.RawMessage, _ json.RawMessage) {
		if method == "session/new" {
			for i := range 50_000 {
				fmt.Fprintf(out, update, i%100)
			}
			close(flooded)
		}
	}), 2)
	a0, a1 := m.thread(0), m.thread(1)
	_, err := a0.Stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}` + "\n"))
	require.NoError(t, err)
	<-flooded // nobody has read a line of it
	m.mu.Lock()
	held, dropped := m.heldSize, m.dropped
	m.mu.Unlock()
	assert.LessOrEqual(t, held, maxHeldBytes, "what is held of them")
	assert.Greater(t, dropped, 40_000, "the rest dropped")
	killed := make(chan struct{})
	go func() {
		a0.Kill()
		a1.Kill()
		close(killed)
	}()
	<-killed // a deadlock would hang the test here
	io.Copy(io.Discard, a0.Stdout)
}
