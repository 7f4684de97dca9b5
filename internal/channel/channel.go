// Package channel is the stdio channel under the jrpc2 server: newline
// framing, a line-size limit, the buffered stdout, the arrival order of
// requests, the agent's own requests to the client (calls.go) and --trace
// (trace.go).
//
// The rules of the output side:
//   - Everything jrpc2 sends (responses, its own error replies) and every
//     request of the agent's (Call) is written and flushed at once, after
//     whatever was buffered before it, so the client never waits on a
//     message it must act on.
//   - Notifications (session/update) are written into the same buffer by
//     Notify without a flush; the agent loop calls Flush when its stream
//     pauses. One mutex orders all writes, so a turn's updates always precede
//     its response on the wire.
//   - The first write error is sticky and closes Broken, so that main can end
//     the process when the client stops reading.
//
// The input side: Recv reads every whole line that one read brought before
// it hands any to jrpc2, decodes each once (encoding/json), answers what it
// must refuse, and tells Arrive of each well-formed request in arrival order
// (the root's arrival), then Arrived once the read's lines have all arrived,
// so that what arrived together takes effect in order. An arrival may answer
// at once, or take the request to answer it later with Send (the root's
// agent loop does, for the steps it runs); jrpc2 then never sees the
// request, and holds no handler slot for it.
//
// What of jrpc2 (v1.3.6) the channel overrides, why, and the test that pins it:
//
//	jrpc2 does                          the channel does instead                   pinned by
//	Server.Callback for requests to     Call; responses taken out before jrpc2     TestHostile_clientAnswers,
//	  the client; a late reply gets a     sees them; late ones dropped quietly      FuzzClientAnswer
//	  spurious error sent back
//	drops requests still queued at      Recv waits (EOFGrace) until every request  TestHostile_answeredBeforeEOF
//	  stdin EOF, unanswered               received is answered
//	starts handlers in any order        Arrive, in read order, before dispatch;    TestOrder, TestOrder_goldens
//	                                      the root's loop runs steps in that order
//	answers a malformed envelope        answered at arrival with jrpc2's words     TestHostile_malformedAnsweredBeforeEOF,
//	  after later messages, or not at     (EnvelopeError)                            FuzzInbound
//	  all once stdin has ended
//	answers a batch with an array       one error: batches are not ACP             TestHostile_badInput
//	runs a null-id request as a         an invalid request error                   TestHostile_badInput,
//	  notification; a parse error or      with the id the line's start shows         FuzzInbound
//	  a non-string method with null id
//	reads a line of any size            skips a line over --max-line-bytes and     TestHostile_longLine
//	                                      answers it with its id
package channel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
)

// Wire implements jrpc2's channel.Channel over a reader and a writer.
type Wire struct {
	raw     *graceWriter // the writer under w, for LimitWrites
	in      *bufio.Reader
	maxLine int
	ahead   []inbound // lines read and admitted, not yet handed on (Recv's own)

	mu     sync.Mutex // protects the fields below
	w      *bufio.Writer
	err    error         // first write error
	Broken chan struct{} // closed when err is set
	trace  *Tracer
	calls  map[int64]chan reply // our requests awaiting the client's response
	nextID int64
	eof    bool // stdin has ended: no response will come

	// The client's requests handed to jrpc2 and not yet answered, by id.
	// At stdin EOF, Recv waits (up to EOFGrace) for these to be answered,
	// since jrpc2 drops the requests still queued when it stops.
	unanswered map[string]int
	answered   chan struct{} // signalled when unanswered shrinks

	// Arrive is told of every well-formed request and notification in the
	// order the lines were read, before jrpc2 dispatches it: method, the
	// id's JSON text ("" for a notification) and the params (nil when
	// absent or null). It runs on the reading goroutine and must not wait
	// on the client or the model. When it returns a response, that is
	// written at once; when it reports the request taken, the caller
	// answers it later with Send. Either way jrpc2 never sees the request.
	Arrive func(method, id string, params json.RawMessage) (answer []byte, taken bool)
	// Arrived is called once every whole line that one read brought has
	// arrived: what arrives together takes effect together, in order.
	Arrived  func()
	Ended    chan struct{} // closed when stdin has ended and Recv has returned its error
	OnHangUp func()        // called when stdin ends, before Recv waits for answers
}

// EOFGrace is how long requests received before stdin's EOF may still take
// to be answered: a turn cancelled by the EOF is answered once it has
// persisted, which takes milliseconds, or hundreds of them on a machine
// with a hundred acpbridge processes ending at once (--fanout). The process
// exits within a second of EOF.
const EOFGrace = 800 * time.Millisecond

// NewWire is a wire that reads lines of at most maxLine bytes from r and
// writes to w, and to trace when it is not nil.
func NewWire(r io.Reader, w io.Writer, maxLine int, trace *Tracer) *Wire {
	raw := &graceWriter{w: w}
	return &Wire{
		raw:     raw,
		in:      bufio.NewReaderSize(r, 64<<10),
		maxLine: maxLine,
		w:       bufio.NewWriterSize(raw, 64<<10),
		Broken:  make(chan struct{}),
		trace:   trace,
		calls:   map[int64]chan reply{},

		unanswered: map[string]int{},
		answered:   make(chan struct{}, 1),
		Ended:      make(chan struct{}),
	}
}

// take handles the lines jrpc2 must not see and reports whether it took
// this one: a response (no method; a result or an error) goes to the
// request it answers; a request whose id ACP does not allow (null, or a
// number that is not an integer) or whose method is not a string is
// answered with an error here, and so is an object that is neither a
// request nor a response. Every other well-formed request or notification
// is told to arrive, in the order lines are read, before jrpc2 sees it (see
// the Order section of the root's session.go).
func (c *Wire) take(m Message) bool {
	if _, hasMethod := m.Get("method"); hasMethod {
		return c.request(m)
	}
	_, hasResult := m.Get("result")
	_, hasErr := m.Get("error")
	if !c.deliver(m) && !hasResult && !hasErr {
		// Neither a request nor a response (JSON-RPC's own example is
		// {"foo": "boo"}): answered -32600 with a null id, as JSON-RPC has
		// it. Not with the id it may carry: that id is the client's, and
		// the answer would read as one to a request of the client's own.
		c.reject("null", jrpc2.InvalidRequest, "invalid request: a message needs a method (a request or a notification) or a result or an error (a response)")
	}
	return true
}

// request takes a request or notification (m, its members) as take does.
func (c *Wire) request(m Message) bool {
	method, _ := m.Get("method")
	id, hasID := m.Get("id")
	if c.refuseBadRequest(id, hasID, method) {
		return true
	}
	if msg := EnvelopeError(m); msg != "" {
		// Answered here, at once and with jrpc2's words: jrpc2 would answer
		// it later than what follows it, or after stdin's end, never.
		rid := "null"
		if hasID && IsValidID(id) && (id[0] == '"' || !bytes.ContainsAny(id, ".eE")) {
			rid = string(id)
		}
		c.reject(rid, jrpc2.InvalidRequest, msg)
		return true
	}
	var name string
	json.Unmarshal(method, &name)
	if hasID {
		c.mu.Lock()
		dup := c.unanswered[string(id)] > 0
		c.unanswered[string(id)]++
		c.mu.Unlock()
		if dup {
			// Answered here, as jrpc2 would: the request it repeats may be
			// one jrpc2 never saw (taken by Arrive).
			c.reject(string(id), jrpc2.InvalidRequest, "duplicate request ID "+string(id)+": a request with this id is still being served")
			return true
		}
	}
	if c.Arrive != nil && name != "" {
		params, _ := m.Get("params")
		if string(params) == "null" {
			params = nil
		}
		answer, taken := c.Arrive(name, string(id), params)
		if answer != nil {
			c.Send(answer)
			return true
		}
		return taken
	}
	return false
}

// refuseBadRequest answers, and reports, a request whose id ACP does not allow
// (null, or a number with a fraction or exponent) or whose method is not a
// string; jrpc2 would take the one and misname the other.
func (c *Wire) refuseBadRequest(id json.RawMessage, hasID bool, method json.RawMessage) bool {
	switch {
	case hasID && (string(id) == "null" || (IsValidID(id) && id[0] != '"' && bytes.ContainsAny(id, ".eE"))):
		c.reject("null", jrpc2.InvalidRequest, "invalid request id "+string(id)+": ACP request ids are integers or strings")
		return true
	case len(method) == 0 || method[0] != '"':
		rid := "null"
		if hasID && IsValidID(id) {
			rid = string(id)
		}
		c.reject(rid, jrpc2.InvalidRequest, "invalid request: method must be a string, not "+clip.Marked(string(method), 40))
		return true
	}
	return false
}

// EnvelopeError is what jrpc2 would answer a malformed request with, or ""
// for a well-formed one.
func EnvelopeError(m Message) string {
	if WellFormed(m) {
		return ""
	}
	if v, _ := m.Get("jsonrpc"); string(v) != `"2.0"` {
		return "invalid version marker"
	}
	if p, ok := m.Get("params"); ok && string(p) != "null" && (len(p) == 0 || (p[0] != '{' && p[0] != '[')) {
		return "parameters must be array or object"
	}
	if id, ok := m.Get("id"); ok && !IsValidID(id) {
		return "invalid request ID"
	}
	return "extra fields in request"
}

// Message is a message's top-level members, decoded once.
type Message map[string]json.RawMessage

// ParseMessage decodes a line that is a JSON object into its members,
// windows on the line (acp.Window): the line must not change while they
// are held (recvLine makes each line anew).
func ParseMessage(line []byte) (Message, bool) {
	var ws map[string]acp.Window
	if json.Unmarshal(line, &ws) != nil || ws == nil {
		return nil, false
	}
	m := make(Message, len(ws))
	for k, w := range ws {
		m[k] = json.RawMessage(w)
	}
	return m, true
}

// Get returns the member k, and whether there is one.
func (m Message) Get(k string) (json.RawMessage, bool) {
	v, ok := m[k]
	return v, ok
}

// WellFormed reports whether jrpc2 will dispatch the request or
// notification m to a handler: the checks of jrpc2's parser (a "2.0"
// version, a valid id, object or array params, no other members). Only
// such a message arrives; one jrpc2 refuses never reaches its handler, so
// it must change no state.
func WellFormed(m Message) bool {
	for k, v := range m {
		switch k {
		case "jsonrpc":
			if string(v) != `"2.0"` {
				return false
			}
		case "id":
			if !IsValidID(v) {
				return false
			}
		case "params":
			if string(v) != "null" && (len(v) == 0 || (v[0] != '{' && v[0] != '[')) {
				return false
			}
		case "method":
		default:
			return false
		}
	}
	_, ok := m.Get("jsonrpc")
	return ok
}

// Send writes one message (a response) and flushes; it returns once the
// message is written (or the write failed).
func (c *Wire) Send(msg []byte) error {
	c.mu.Lock()
	c.writeLocked(msg)
	c.flushLocked()
	err := c.err
	id := leadingID(msg)
	answered := c.unanswered[id] > 0
	if answered {
		if c.unanswered[id]--; c.unanswered[id] == 0 {
			delete(c.unanswered, id)
		}
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return err
}

// EncodeResponse is the response to request id (its JSON text), as jrpc2
// would write it: with err when it is not nil, else with result. A result
// that is a json.RawMessage is written as it is; it must be compact.
func EncodeResponse(id string, result any, err *jrpc2.Error) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	if raw, ok := result.(json.RawMessage); ok && err == nil {
		b = append(append(b, `,"result":`...), raw...)
		return append(b, '}')
	}
	if err == nil {
		r, merr := json.Marshal(result)
		if merr == nil {
			b = append(append(b, `,"result":`...), r...)
			return append(b, '}')
		}
		err = &jrpc2.Error{Code: jrpc2.InternalError, Message: "encoding the result: " + merr.Error()}
	}
	e, _ := json.Marshal(err)
	b = append(append(b, `,"error":`...), e...)
	return append(b, '}')
}

// Notify writes a notification of method with pre-encoded params. It does not
// flush: callers flush when they pause.
func (c *Wire) Notify(method string, params []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	// The envelope is written piecewise into the buffer: no copy of params.
	c.w.WriteString(`{"jsonrpc":"2.0","method":"`)
	c.w.WriteString(method)
	c.w.WriteString(`","params":`)
	c.w.Write(params)
	_, err := c.w.WriteString("}\n")
	if c.trace != nil {
		c.trace.out(func(b []byte) []byte {
			b = append(b, `{"jsonrpc":"2.0","method":"`...)
			b = append(b, method...)
			b = append(b, `","params":`...)
			b = append(b, params...)
			return append(b, '}')
		})
	}
	c.failLocked(err)
	return c.err
}

// NotifyJSON writes a session/update with a struct payload, unflushed.
func (c *Wire) NotifyJSON(sessionID string, u any) error {
	b, err := acp.Marshal(acp.SessionNotification{SessionID: sessionID, Update: u})
	if err != nil {
		return err
	}
	return c.Notify(acp.MethodSessionUpdate, b)
}

// Forward writes a whole message line as it is (--fanout passes its
// children's notifications on). It does not flush.
func (c *Wire) Forward(line []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeLocked(line)
}

// writeGrace is how long a write may still block once the connection is
// ending: a client that has stopped reading must not keep the process
// alive (what could not be written is still persisted).
const writeGrace = time.Second

// LimitWrites gives every write from now on writeGrace to finish, when the
// writer can have a deadline (stdout as a pipe or a socket): a write
// blocked on a client that stopped reading then fails and frees the wire,
// while a client that reads gets everything. It takes no lock, so it frees
// a writer that holds one.
func (c *Wire) LimitWrites() {
	c.raw.limited.Store(true)
	c.raw.arm()
}

// graceWriter is stdout under the wire's buffer: once limited, each write
// must finish within writeGrace.
type graceWriter struct {
	w       io.Writer
	limited atomic.Bool
}

func (g *graceWriter) Write(p []byte) (int, error) {
	if g.limited.Load() {
		g.arm()
	}
	return g.w.Write(p)
}

// arm sets the write deadline writeGrace from now, when the writer has one.
func (g *graceWriter) arm() {
	if d, ok := g.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now().Add(writeGrace))
	}
}

// HungUp reports whether the client has hung up: stdin ended or stdout broke.
func (c *Wire) HungUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eof || c.err != nil
}

// Flush writes out whatever notifications are buffered.
func (c *Wire) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	return c.err
}

func (c *Wire) writeLocked(msg []byte) {
	if c.err != nil {
		return
	}
	c.w.Write(msg)
	_, err := c.w.Write([]byte{'\n'})
	c.failLocked(err)
	if c.trace != nil {
		c.trace.out(func(b []byte) []byte { return append(b, msg...) })
	}
}

func (c *Wire) flushLocked() {
	if c.err == nil && c.w.Buffered() > 0 {
		c.failLocked(c.w.Flush())
	}
}

func (c *Wire) failLocked(err error) {
	if err != nil && c.err == nil {
		c.err = err
		close(c.Broken)
	}
}

// Close flushes; the writer itself (stdout) is left to the process.
func (c *Wire) Close() error { return c.Flush() }

// Recv returns the next line without its newline, for jrpc2. Responses to
// the agent's own requests are taken out on the way (see Call). A last line
// without a newline at EOF is returned whole. A line longer than maxLine is
// skipped and answered here with an error carrying the id found at the
// line's start (if any); the next line is served.
func (c *Wire) Recv() ([]byte, error) {
	in, err := c.next()
	return in.line, err
}

// RecvMessage is Recv for a reader that is not jrpc2 (the --fanout router):
// the next line to handle, decoded (the wire decodes each line once); nil
// for a line that is JSON but no object.
func (c *Wire) RecvMessage() (Message, error) {
	in, err := c.next()
	return in.msg, err
}

// inbound is a line the wire has admitted, with its members when it is an
// object.
type inbound struct {
	line []byte
	msg  Message
}

func (c *Wire) next() (inbound, error) {
	for len(c.ahead) == 0 {
		line, err := c.recvLine()
		if err != nil {
			c.hangUp()
			return inbound{}, err
		}
		c.accept(line)
		// Every further whole line that the same read brought is taken in
		// (and so arrives) before jrpc2 dispatches any of them: a cancel
		// written together with its prompt must be admitted before that
		// prompt's turn can start on another thread.
		for c.lineBuffered() {
			line, err := c.recvLine()
			if err != nil {
				break
			}
			c.accept(line)
		}
		if c.Arrived != nil {
			c.Arrived()
		}
	}
	in := c.ahead[0]
	c.ahead[0] = inbound{} // a line (a huge prompt, say) is not kept past its turn
	c.ahead = c.ahead[1:]
	return in, nil
}

// hangUp is stdin's end: the agent's calls fail, OnHangUp runs, and Ended closes
// once every request taken in has been answered.
func (c *Wire) hangUp() {
	c.LimitWrites()
	c.CloseCalls()
	if c.OnHangUp != nil {
		c.OnHangUp()
	}
	c.awaitAnswers()
	close(c.Ended)
}

// lineBuffered reports whether a whole line is waiting in the read buffer.
func (c *Wire) lineBuffered() bool {
	b, _ := c.in.Peek(c.in.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// accept answers or takes one line, or queues it for jrpc2.
func (c *Wire) accept(line []byte) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return // a blank line (or a skipped one) is no message
	}
	m, ok := ParseMessage(t)
	switch {
	case ok:
		if !c.take(m) {
			c.ahead = append(c.ahead, inbound{line, m})
		}
	case !json.Valid(t):
		// Answered here, with the id when the line's start shows one;
		// jrpc2 would answer with a null id.
		if !c.failCall(line, "is not valid JSON") {
			c.reject(leadingID(line), jrpc2.ParseError, "parse error: the message is not valid JSON")
		}
	case t[0] == '[':
		// jrpc2 would answer a batch with an array, which is no ACP message.
		c.reject("null", jrpc2.InvalidRequest, "batches are not part of ACP: send one message a line")
	default:
		c.ahead = append(c.ahead, inbound{line: line}) // JSON, but no object: jrpc2 answers it
	}
}

// awaitAnswers waits, up to EOFGrace, until every request received has
// been answered.
func (c *Wire) awaitAnswers() {
	deadline := time.NewTimer(EOFGrace)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		n := len(c.unanswered)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.answered:
		case <-deadline.C:
			return
		}
	}
}

// recvLine reads one line. A line that spans several reads is kept as
// fragments and put together once, at its end: a line is held at most once
// (twice only while it is put together), and one over the limit is dropped
// as soon as it is known to be, never held past maxLine bytes.
func (c *Wire) recvLine() ([]byte, error) {
	var frags [][]byte
	n := 0
	for {
		frag, err := c.in.ReadSlice('\n')
		if n+len(frag) > c.maxLine+1 {
			head := frag // the first bytes, where skipLong looks for the id
			if len(frags) > 0 {
				head = frags[0]
			}
			head = bytes.Clone(head[:min(len(head), 4096)])
			frags = nil
			return c.skipLong(head, n+len(frag), err)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			frags = append(frags, bytes.Clone(frag))
			n += len(frag)
			continue
		}
		if err != nil && !(errors.Is(err, io.EOF) && n+len(frag) > 0) {
			return nil, err // an unterminated last line is still a message
		}
		buf := bytes.Join(append(frags, frag), nil)
		if err == nil {
			buf = buf[:len(buf)-1]
		}
		if c.trace != nil {
			c.trace.in(buf)
		}
		return buf, nil
	}
}

// skipLong discards the rest of an oversized line whose first bytes are head.
func (c *Wire) skipLong(head []byte, n int, err error) ([]byte, error) {
	for errors.Is(err, bufio.ErrBufferFull) {
		var frag []byte
		frag, err = c.in.ReadSlice('\n')
		n += len(frag)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if c.trace != nil {
		c.trace.in(fmt.Appendf(nil, `{"skipped":"a line of %d bytes"}`, n))
	}
	if c.failCall(head, fmt.Sprintf("is %d bytes, over the line limit of %d bytes (--max-line-bytes)", n, c.maxLine)) {
		return nil, err
	}
	c.reject(leadingID(head), jrpc2.InvalidRequest,
		fmt.Sprintf("message of %d bytes exceeds the line limit of %d bytes and was skipped; raise it with --max-line-bytes", n, c.maxLine))
	return nil, err
}

// reject answers a message that never reaches jrpc2.
func (c *Wire) reject(id string, code jrpc2.Code, message string) {
	type errObj struct {
		Code    jrpc2.Code `json:"code"`
		Message string     `json:"message"`
	}
	msg, _ := acp.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errObj          `json:"error"`
	}{"2.0", json.RawMessage(id), errObj{code, message}})
	c.Send(msg)
}

// leadingID finds the top-level "id" member in the first bytes of a JSON
// object, for answering a line too long or too broken to parse. It returns
// "null" when there is none, or when it is not an id ACP allows (an
// integer or a string).
func leadingID(head []byte) string {
	id, _ := leadingKind(head)
	if id == "" || (id[0] != '"' && strings.ContainsAny(id, ".eE")) {
		return "null"
	}
	return id
}

// IsValidID reports whether v is a JSON-RPC id: a string, a number or null.
func IsValidID(v json.RawMessage) bool {
	if len(v) == 0 {
		return false
	}
	switch c := v[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return string(v) == "null"
}
