// Command oneagent is a small single-session ACP agent, the generic child
// the --fanout router tests run behind `acpbridge --fanout -- CMD`: it
// refuses a second session, persists its sessions (a file per session in
// ONEAGENT_STATE, default the working directory), streams its answer in
// three chunks, asks permission when the prompt says "ask", and reads a
// file through the client when it says "read PATH". Standard library only.
//
// Flags make it behave as agents in the wild do: -method-first writes its
// requests with "method" before "id" (the TypeScript SDK's order); -auth
// requires authenticate before session/new; -no-close does not offer
// session/close; -same-id answers every session/new with "session-1";
// -ignore-eof keeps running at stdin's end and ignores SIGTERM;
// -start-delay D sleeps before serving (a slow-starting agent);
// -close-hang never answers session/close, -close-late D answers it after
// D; -load-hang never answers session/load, -load-refuse refuses it;
// -list offers session/list, listing the sessions that had a prompt
// (-list-hang never answers it);
// -name and -version set its agentInfo. Like
// the TypeScript SDK, it refuses a request that comes before its initialize
// is answered.
//
// A prompt's words make it misbehave as agents do: "stop reading" stops
// reading its stdin for good (a long blocking call); "crash with helper"
// starts a helper in a session of its own that holds its stdout and stderr,
// ("start a daemon" starts one that holds nothing, and says its pid)
// then exits; "burst N of SIZE" writes N updates of SIZE bytes at once;
// "endless N" writes a line of N MiB; "stall N" writes N MiB of a line
// and stops there; "spoof ID" sends an
// update and a permission request naming session ID; "flood N" sends N
// requests to the client at once and counts aloud those refused;
// "withdraw" asks permission and withdraws the request at once
// ($/cancel_request; "withdraw as a request" sends it with an id); "garbage" writes a cut line and one that is not JSON;
// "where" says the directory its process runs in; "wait" waits a minute
// for its turn to be cancelled (session/cancel, or $/cancel_request of the
// prompt).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

type agent struct {
	methodFirst, needAuth, noClose, sameID                        bool
	closeHang, closeExits, loadHang, loadRefuse, loadDies, noLoad bool
	list, listHang                                                bool // offer session/list: the sessions that had a prompt; never answer it
	closeLate                                                     time.Duration
	name, version                                                 string // its agentInfo

	mu     sync.Mutex
	w      *bufio.Writer
	authed bool
	// initialized: its initialize is answered; a request before it is
	// refused, as the TypeScript SDK refuses it.
	initialized bool
	session     string
	pending     map[string]chan json.RawMessage // our requests to the client, by id
	nextID      int
	state       string
	cancelMu    sync.Mutex
	cancel      chan struct{}
}

func main() {
	a := &agent{w: bufio.NewWriter(os.Stdout), pending: map[string]chan json.RawMessage{}}
	flag.BoolVar(&a.methodFirst, "method-first", false, "write method before id")
	flag.BoolVar(&a.needAuth, "auth", false, "require authenticate")
	flag.BoolVar(&a.noClose, "no-close", false, "do not offer session/close")
	flag.BoolVar(&a.sameID, "same-id", false, "answer every session/new with session-1")
	ignoreEOF := flag.Bool("ignore-eof", false, "keep running at stdin's end, ignoring SIGTERM")
	delay := flag.Duration("start-delay", 0, "sleep before serving")
	flag.BoolVar(&a.closeHang, "close-hang", false, "never answer session/close")
	flag.BoolVar(&a.closeExits, "close-exits", false, "exit at session/close, answering nothing (its way of closing)")
	flag.DurationVar(&a.closeLate, "close-late", 0, "answer session/close after this long")
	flag.BoolVar(&a.loadHang, "load-hang", false, "never answer session/load")
	flag.BoolVar(&a.loadRefuse, "load-refuse", false, "refuse session/load")
	flag.BoolVar(&a.loadDies, "load-dies", false, "exit at session/load, answering nothing (a reopen that dies every time)")
	flag.BoolVar(&a.noLoad, "no-load", false, "offer no session/load (it still serves one sent to it)")
	flag.BoolVar(&a.list, "list", false, "offer session/list, listing the sessions that had a prompt")
	flag.BoolVar(&a.listHang, "list-hang", false, "never answer session/list")
	flag.StringVar(&a.name, "name", "oneagent", "the name in its agentInfo")
	flag.StringVar(&a.version, "version", "1.0.0", "the version in its agentInfo")
	flag.Parse()
	a.state = os.Getenv("ONEAGENT_STATE")
	if a.state == "" {
		a.state, _ = os.Getwd()
	}
	time.Sleep(*delay)
	if *ignoreEOF {
		signal.Ignore(syscall.SIGTERM)
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Method == "" { // an answer to one of our requests
			a.mu.Lock()
			ch := a.pending[string(m.ID)]
			delete(a.pending, string(m.ID))
			a.mu.Unlock()
			if ch != nil {
				ch <- append(m.Result, m.Error...)
			}
			continue
		}
		if len(m.ID) == 0 {
			if m.Method == "session/cancel" || m.Method == "$/cancel_request" { // its one request withdrawn: the turn's
				a.cancelTurn()
			}
			continue
		}
		a.mu.Lock()
		early := !a.initialized && m.Method != "initialize"
		a.mu.Unlock()
		if early { // as the TypeScript SDK refuses it
			a.fail(m.ID, -32600, "a request before initialize was answered: "+m.Method)
			continue
		}
		if m.Method == "session/prompt" {
			a.newTurn()
		}
		go a.serve(m.ID, m.Method, m.Params)
		if m.Method == "session/prompt" && strings.Contains(string(m.Params), "stop reading") {
			time.Sleep(time.Hour) // a long blocking call: stdin is never read again
		}
	}
	if *ignoreEOF {
		select {}
	}
}

func (a *agent) write(v any) {
	b, _ := json.Marshal(v)
	a.mu.Lock()
	a.w.Write(b)
	a.w.WriteByte('\n')
	a.w.Flush()
	a.mu.Unlock()
}

func (a *agent) answer(id json.RawMessage, result any) {
	a.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *agent) fail(id json.RawMessage, code int, msg string) {
	a.write(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (a *agent) update(sid string, u map[string]any) {
	a.write(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": sid, "update": u}})
}

// call sends a request to the client and waits for its answer.
func (a *agent) call(method string, params any) json.RawMessage {
	a.mu.Lock()
	a.nextID++
	id := fmt.Sprint(a.nextID)
	ch := make(chan json.RawMessage, 1)
	a.pending[id] = ch
	a.mu.Unlock()
	p, _ := json.Marshal(params)
	var line string
	if a.methodFirst { // as the TypeScript SDK writes its requests
		line = fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"id":%s,"params":%s}`, method, id, p)
	} else {
		line = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, p)
	}
	a.mu.Lock()
	a.w.WriteString(line + "\n")
	a.w.Flush()
	a.mu.Unlock()
	return <-ch
}

// newTurn makes the cancel of the turn whose prompt was just read.
func (a *agent) newTurn() {
	a.cancelMu.Lock()
	a.cancel = make(chan struct{})
	a.cancelMu.Unlock()
}

// cancelTurn cancels the turn in flight, once: its cancel stays closed.
func (a *agent) cancelTurn() {
	a.cancelMu.Lock()
	defer a.cancelMu.Unlock()
	if a.cancel == nil {
		return
	}
	select {
	case <-a.cancel:
	default:
		close(a.cancel)
	}
}

func (a *agent) serve(id json.RawMessage, method string, params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Text string `json:"text"`
		} `json:"prompt"`
		ProtocolVersion int `json:"protocolVersion"`
	}
	json.Unmarshal(params, &p)
	switch method {
	case "initialize":
		sc := map[string]any{}
		if !a.noClose {
			sc["close"] = map[string]any{}
		}
		if a.list {
			sc["list"] = map[string]any{}
		}
		caps := map[string]any{"loadSession": !a.noLoad, "sessionCapabilities": sc}
		auth := []any{}
		if a.needAuth {
			auth = []any{map[string]any{"id": "token", "name": "Token"}}
		}
		a.mu.Lock()
		a.initialized = true
		a.mu.Unlock()
		if p.ProtocolVersion >= 2 {
			// It speaks the draft v2 too, as codex-acp 2.x and
			// claude-agent-acp 0.101 do: its own shape of capabilities.
			a.answer(id, map[string]any{"protocolVersion": 2, "capabilities": map[string]any{"sessions": map[string]any{"load": map[string]any{}}},
				"authMethods": auth, "agentInfo": map[string]any{"name": a.name, "version": a.version}})
			return
		}
		a.answer(id, map[string]any{"protocolVersion": 1, "agentCapabilities": caps, "authMethods": auth,
			"agentInfo": map[string]any{"name": a.name, "version": a.version}})
	case "authenticate":
		a.mu.Lock()
		a.authed = true
		a.mu.Unlock()
		a.answer(id, map[string]any{})
	case "session/load":
		if a.loadHang {
			return
		}
		if a.loadRefuse {
			a.fail(id, -32002, "oneagent keeps no session "+p.SessionID+" here (refused on purpose)")
			return
		}
		if a.loadDies {
			os.Exit(3)
		}
		fallthrough
	case "session/new":
		a.mu.Lock()
		authed, live := a.authed || !a.needAuth, a.session
		a.mu.Unlock()
		switch {
		case !authed:
			a.fail(id, -32000, "authentication required")
			return
		case live != "" && !(method == "session/load" && live == p.SessionID): // its live session it loads again
			a.fail(id, 1001, "oneagent serves one session per process; "+live+" is live")
			return
		}
		sid := p.SessionID
		if method == "session/new" {
			sid = fmt.Sprintf("one-%d-%d", os.Getpid(), time.Now().UnixNano())
			if a.sameID {
				sid = "session-1"
			}
			os.WriteFile(filepath.Join(a.state, sid+".session"), nil, 0o644)
		} else if _, err := os.Stat(filepath.Join(a.state, sid+".session")); err != nil {
			a.fail(id, -32002, "no session "+sid)
			return
		}
		a.mu.Lock()
		a.session = sid
		a.mu.Unlock()
		if method == "session/load" {
			history, _ := os.ReadFile(filepath.Join(a.state, sid+".session"))
			for _, text := range strings.Split(strings.TrimSpace(string(history)), "\n") {
				if text != "" {
					a.update(sid, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": text}})
				}
			}
			a.answer(id, map[string]any{})
			return
		}
		a.answer(id, map[string]any{"sessionId": sid})
	case "session/close":
		if a.closeHang {
			return
		}
		if a.closeExits {
			os.Exit(0)
		}
		time.Sleep(a.closeLate)
		a.mu.Lock()
		a.session = ""
		a.mu.Unlock()
		a.answer(id, map[string]any{})
	case "session/prompt":
		a.prompt(id, p.SessionID, p.Prompt[0].Text)
	case "session/list":
		if !a.list {
			a.fail(id, -32601, "method not found: "+method)
			return
		}
		if a.listHang {
			return
		}
		// A session is listed once it had a prompt (its file has a line).
		var sessions []any
		files, _ := filepath.Glob(filepath.Join(a.state, "*.session"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				sessions = append(sessions, map[string]any{"sessionId": strings.TrimSuffix(filepath.Base(f), ".session"), "cwd": "/tmp"})
			}
		}
		a.answer(id, map[string]any{"sessions": sessions})
	default:
		a.fail(id, -32601, "method not found: "+method)
	}
}

func (a *agent) prompt(id json.RawMessage, sid, text string) {
	f, _ := os.OpenFile(filepath.Join(a.state, sid+".session"), os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintln(f, text)
	f.Close()
	a.cancelMu.Lock()
	cancel := a.cancel // made as the prompt was read (newTurn): a cancel read next finds it
	a.cancelMu.Unlock()
	chunk := func(s string) {
		a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": s}})
	}
	chunk("One, ")
	a.misbehave(sid, text)
	if strings.Contains(text, "where") {
		wd, _ := os.Getwd()
		chunk("in " + wd + ", ")
	}
	if strings.Contains(text, "ask") {
		res := a.call("session/request_permission", map[string]any{"sessionId": sid,
			"toolCall": map[string]any{"toolCallId": "t1", "title": "Do it"},
			"options":  []any{map[string]any{"optionId": "yes", "name": "Yes", "kind": "allow_once"}, map[string]any{"optionId": "no", "name": "No", "kind": "reject_once"}}})
		chunk("asked: " + string(res) + ", ")
	}
	if i := strings.Index(text, "read "); i >= 0 {
		res := a.call("fs/read_text_file", map[string]any{"sessionId": sid, "path": strings.TrimSpace(text[i+5:])})
		chunk("read: " + string(res) + ", ")
	}
	if strings.Contains(text, "wait") {
		select {
		case <-cancel:
			a.answer(id, map[string]any{"stopReason": "cancelled"})
			return
		case <-time.After(time.Minute):
		}
	}
	chunk("two, three.")
	a.answer(id, map[string]any{"stopReason": "end_turn"})
}

// misbehave does what a prompt's words ask of an agent that misbehaves.
func (a *agent) misbehave(sid, text string) {
	var n int
	var other string
	switch {
	case strings.Contains(text, "start a daemon"): // as codex-acp and claude-agent-acp run commands: in a session of its own
		helper := exec.Command("sleep", "300")
		helper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		helper.Start()
		a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": fmt.Sprintf("daemon=%d, ", helper.Process.Pid)}})
	case strings.Contains(text, "crash with helper"):
		helper := exec.Command("sleep", "300")
		helper.Stdout, helper.Stderr = os.Stdout, os.Stderr
		helper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		helper.Start()
		os.Exit(2)
	case scan(text, "burst %d", &n): // N updates of SIZE bytes, as fast as they can be written
		var size int
		fmt.Sscanf(text[strings.Index(text, "burst "):], "burst %d of %d", &n, &size)
		for i := range n {
			a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": fmt.Sprintf("%03d:%s", i, strings.Repeat("b", size))}})
		}
	case scan(text, "permits %d", &n): // N permission requests of SIZE bytes, written at once, their answers not awaited
		var size int
		fmt.Sscanf(text[strings.Index(text, "permits "):], "permits %d of %d", &n, &size)
		a.mu.Lock()
		for i := range n {
			a.nextID++
			fmt.Fprintf(a.w, `{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"a%03d","title":"%03d:%s"},"options":[{"optionId":"yes","name":"Yes","kind":"allow_once"}]}}`+"\n", a.nextID, sid, i, i, strings.Repeat("q", size))
		}
		a.w.Flush()
		a.mu.Unlock()
	case scan(text, "endless %d", &n):
		a.mu.Lock()
		a.w.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`)
		chunk := strings.Repeat("x", 1<<20)
		for range n {
			a.w.WriteString(chunk)
		}
		a.w.WriteString("\"}}}}\n")
		a.w.Flush()
		a.mu.Unlock()
	case scan(text, "stall %d", &n): // N MiB of an update's line, then nothing more of it, for ever
		a.mu.Lock()
		a.w.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`)
		a.w.WriteString(strings.Repeat("x", n<<20))
		a.w.Flush()
		select {} // its writes stop in the middle of the line; the lock stays held
	case scan(text, "spoof %s", &other):
		a.update(other, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "spoofed"}})
		go a.call("session/request_permission", map[string]any{"sessionId": other,
			"toolCall": map[string]any{"toolCallId": "t9", "title": "Spoofed"},
			"options":  []any{map[string]any{"optionId": "yes", "name": "Yes", "kind": "allow_once"}}})
	case strings.Contains(text, "garbage"):
		a.mu.Lock()
		fmt.Fprintf(a.w, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":`+"\nnot JSON at all\n", sid)
		a.w.Flush()
		a.mu.Unlock()
	case strings.Contains(text, "withdraw"):
		a.mu.Lock()
		a.nextID++
		id := a.nextID
		fmt.Fprintf(a.w, `{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"t8","title":"Withdrawn"},"options":[{"optionId":"yes","name":"Yes","kind":"allow_once"}]}}`+"\n", id, sid)
		if strings.Contains(text, "as a request") { // wrongly, with an id of its own
			fmt.Fprintf(a.w, `{"jsonrpc":"2.0","id":%d,"method":"$/cancel_request","params":{"requestId":%d}}`+"\n", id+1000, id)
		} else {
			fmt.Fprintf(a.w, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`+"\n", id)
		}
		a.w.Flush()
		a.mu.Unlock()
	case scan(text, "flood %d", &n):
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := 0
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if res := a.call("fs/read_text_file", map[string]any{"sessionId": sid, "path": "/flood"}); strings.Contains(string(res), `"code"`) {
					mu.Lock()
					errs++
					a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": fmt.Sprintf("refused %d; ", errs)}})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": fmt.Sprintf("flood: %d refused, ", errs)}})
	}
}

// scan reports whether text holds format's words with its value.
func scan(text, format string, v any) bool {
	word, _, _ := strings.Cut(format, " ")
	i := strings.Index(text, word+" ")
	if i < 0 {
		return false
	}
	_, err := fmt.Sscanf(text[i:], format, v)
	return err == nil
}
