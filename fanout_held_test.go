//go:build linux

// fanout_held_test.go holds the test of the router's held requests: each
// wait a request of the client's can be held in (internal/fanout/held.go),
// driven through each exit, on the binary.

package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldWait brings the client's request 50 to one wait of the router's.
type heldWait struct {
	waits  string   // the wait, as request_held names it
	router []string // the router's flags
	agent  []string // oneagent's
	// hold sends request 50 (and what it needs first) and returns the pid
	// whose death is this wait's death: the process it waits on.
	hold func(t *testing.T, p *procAgent, sid string) int
	// event ends the wait the way it waits to end (nil: time does).
	event func(p *procAgent, sid string)
	// answers are the ids that must each be answered once (50, and any
	// request sent beside it).
	answers []int
	// want is what answers 50 at each exit: ok (a result), stop (a prompt
	// cancelled), -32800, or error (any other error).
	want map[string]string
}

// heldExits are the exits of a wait, as the test makes them.
var heldExits = []string{"event", "cancel", "death", "end", "signal"}

// Verify that a request the router holds is answered exactly once
// whatever ends its wait: for each wait (a process for session/new, a
// thread's process, a load's old process, a load joined to another, a
// later initialize, a child not yet ready, a child's answer), each exit
// (what it waits for, $/cancel_request, the death of the process it waits
// on, stdin's end, SIGTERM) answers it once, with what the table in
// held.go says, and the router exits 0.
func TestFanoutHeld_eachWaitEachExit(t *testing.T) {
	t.Parallel()
	newLine := `{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`
	loadLine := `{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":"$CWD","mcpServers":[]}}`
	waits := []heldWait{{
		waits: "process", router: []string{"--spares", "0", "--max-children", "2"}, agent: []string{"-close-late", "3s"},
		hold: func(t *testing.T, p *procAgent, sid string) int {
			p.openSession(11)
			p.send(fmt.Sprintf(newLine, 50)) // the thread used least recently is evicted for it, and closes late
			return agentPid(t, sid)
		},
		want: map[string]string{"event": "ok", "cancel": "-32800", "death": "ok", "end": "error", "signal": "error"},
	}, {
		waits: "thread", router: []string{"--spares", "0"}, agent: []string{"-start-delay", "2s"},
		hold: func(t *testing.T, p *procAgent, sid string) int {
			require.NoError(t, syscall.Kill(agentPid(t, sid), syscall.SIGKILL))
			p.awaitEvent("child_ended")
			p.send(prompt(50, sid, "hello")) // held while a new process starts, slowly, to reopen it
			p.awaitEvent("reopening")
			return eventInt(t, p.events.String(), "reopening", "pid")
		},
		want: map[string]string{"event": "ok", "cancel": "-32800", "death": "ok", "end": "stop", "signal": "stop"},
	}, {
		waits: "load", router: []string{"--spares", "0"}, agent: []string{"-close-late", "3s"},
		hold: func(t *testing.T, p *procAgent, sid string) int {
			p.send(fmt.Sprintf(loadLine, 50, sid)) // its process closes late
			return agentPid(t, sid)
		},
		want: map[string]string{"event": "ok", "cancel": "-32800", "death": "ok", "end": "error", "signal": "error"},
	}, {
		waits: "joined", router: []string{"--spares", "0"}, agent: []string{"-close-late", "3s"},
		hold: func(t *testing.T, p *procAgent, sid string) int {
			p.sendTogether(fmt.Sprintf(loadLine, 49, sid), fmt.Sprintf(loadLine, 50, sid)) // two panes
			return agentPid(t, sid)
		},
		answers: []int{49},
		want:    map[string]string{"event": "ok", "cancel": "-32800", "death": "ok", "end": "error", "signal": "error"},
	}, {
		waits: "ready", router: []string{"--spares", "0"}, agent: []string{"-start-delay", "2s"},
		hold: func(t *testing.T, p *procAgent, sid string) int {
			p.send(`{"jsonrpc":"2.0","id":50,"method":"session/list","params":{}}`) // a process of the moment starts for it, slowly
			var pid int
			require.Eventually(t, func() bool {
				others := slices.DeleteFunc(agentChildren(t, p.cmd.Process.Pid), func(pid int) bool { return pid == agentPid(t, sid) })
				if len(others) == 1 {
					pid = others[0]
				}
				return pid != 0
			}, hang, 10*time.Millisecond, "the process started for session/list")
			return pid
		},
		want: map[string]string{"event": "error", "cancel": "-32800", "death": "error", "end": "error", "signal": "error"},
	}, {
		waits: "answer",
		hold: func(t *testing.T, p *procAgent, sid string) int {
			p.send(prompt(50, sid, "wait"))
			return agentPid(t, sid)
		},
		event: func(p *procAgent, sid string) {
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
		},
		want: map[string]string{"event": "stop", "cancel": "stop", "death": "error", "end": "stop", "signal": "stop"},
	}, {
		waits: "init", router: []string{"--spares", "1"}, agent: []string{"-start-delay", "2s"},
		hold: func(t *testing.T, p *procAgent, sid string) int {
			p.sendTogether(initLine, `{"jsonrpc":"2.0","id":50,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			var pid int
			require.Eventually(t, func() bool {
				if kids := agentChildren(t, p.cmd.Process.Pid); len(kids) > 0 {
					pid = kids[0]
				}
				return pid != 0
			}, hang, 10*time.Millisecond, "the first agent process")
			return pid
		},
		answers: []int{0},
		want:    map[string]string{"event": "ok", "cancel": "ok", "death": "error", "end": "error", "signal": "error"},
	}}
	for _, w := range waits {
		for _, exit := range heldExits {
			t.Run(w.waits+"/"+exit, func(t *testing.T) {
				t.Parallel()
				p := startRoutedWith(t, w.router, w.agent...)
				var sid string
				if w.waits != "init" {
					p.call(initLine)
					sid = p.openSession(10)
				}
				pid := w.hold(t, p, sid)
				p.awaitEvent("request_held", "id", "50", "method", heldMethod(w.waits), "waits", w.waits)
				switch exit {
				case "event":
					if w.event != nil {
						w.event(p, sid)
					}
				case "cancel":
					p.send(cancelRequest(50))
				case "death":
					require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
				case "end":
					p.stdin.Close()
				case "signal":
					require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
				}
				answers := map[int][]response{}
				for {
					line := p.next("request 50's answer")
					if line == nil {
						break
					}
					var m struct {
						ID     *int
						Method string
					}
					require.NoError(t, json.Unmarshal(line, &m))
					if m.Method == "" && m.ID != nil {
						answers[*m.ID] = append(answers[*m.ID], decodeResponse(t, line))
						if *m.ID == 50 && exit != "end" {
							p.stdin.Close() // the rest, to the router's end: no second answer
						}
					}
				}
				p.closed = true
				for _, id := range append([]int{50}, w.answers...) {
					assert.Len(t, answers[id], 1, "request %d answered once", id)
				}
				if len(answers[50]) > 0 {
					assert.Equal(t, w.want[exit], answerKind(t, answers[50][0]), "what answers request 50: %+v", answers[50][0])
				}
				assert.NotContains(t, p.events.String(), `"event":"move_refused"`, "no answer refused as a second one")
				select {
				case code := <-p.exit:
					assert.Equal(t, 0, code, "the router's exit status")
				case <-time.After(hang):
					t.Fatal("the router did not exit")
				}
			})
		}
	}
}

// heldMethod is the method of request 50 for each wait.
func heldMethod(waits string) string {
	return map[string]string{"process": "session/new", "thread": "session/prompt", "load": "session/load", "joined": "session/load",
		"ready": "session/list", "answer": "session/prompt", "init": "initialize"}[waits]
}

// answerKind says what a response is: ok (a result), stop (a prompt
// cancelled), -32800, or error (any other error).
func answerKind(t *testing.T, r response) string {
	t.Helper()
	switch {
	case r.Error != nil && r.Error.Code == -32800:
		return "-32800"
	case r.Error != nil:
		return "error"
	}
	var res struct{ StopReason string }
	json.Unmarshal(r.Result, &res)
	if res.StopReason == "cancelled" {
		return "stop"
	}
	return "ok"
}

// Verify that a $/cancel_request sent as a request (with an id, as some
// clients send it) withdraws what it names and is itself answered, with a
// null result as acpbridge alone answers it, once.
func TestFanoutHeld_cancelSentAsARequest(t *testing.T) {
	t.Parallel()
	p := startRoutedWith(t, []string{"--spares", "0"}, "-start-delay", "1s")
	p.call(initLine)
	a := p.openSession(10)
	p.sendTogether(`{"jsonrpc":"2.0","id":50,"method":"session/list","params":{}}`,
		`{"jsonrpc":"2.0","id":51,"method":"$/cancel_request","params":{"requestId":50}}`)
	_, rs, _ := p.collect(50, 51)
	require.NotNil(t, rs[50].Error)
	assert.Equal(t, -32800, rs[50].Error.Code, "the request it names is withdrawn")
	assert.Nil(t, rs[51].Error)
	assert.JSONEq(t, "null", string(rs[51].Result), "the cancel itself answered")
	_, r := p.turnUpdates(20, a, "hello")
	require.Nil(t, r.Error)
	p.close()
}
