// calls.go holds the agent's own requests to the client (permission,
// fs/*, terminal/*). They go out through Call, not through jrpc2: Recv takes
// every response the client sends out of the input before jrpc2 sees it
// and hands it to the waiting Call. Ids are the agent's own, counted from 1,
// and a response's id is matched as a JSON value (1, 1.0 and 1e0 are one
// id; "1" is not). A response nobody waits for any more (the turn was
// cancelled) is dropped quietly; a line too broken to read that looks like
// an answer fails the request it answers.

package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/jsonenc"
)

// reply is the client's response to one of our requests.
type reply struct {
	result json.RawMessage
	err    error
}

// errConnClosed is the answer to a request the client can no longer answer.
var errConnClosed = errors.New("the client closed the connection")

// Call sends a request to the client, flushes, and waits for its response
// or for ctx to end.
//
// params that are json.RawMessage (compact JSON) are sent as they are.
func (c *Wire) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.call(ctx, method, params, false)
}

// CallOrWithdraw is Call that, when ctx ends before the answer, also tells
// the client to drop the request ($/cancel_request): a permission prompt
// on its screen goes away (--fanout, when a child that asked has died).
func (c *Wire) CallOrWithdraw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.call(ctx, method, params, true)
}

func (c *Wire) call(ctx context.Context, method string, params any, withdraw bool) (json.RawMessage, error) {
	p, isRaw := params.(json.RawMessage)
	var err error
	if !isRaw {
		if p, err = acp.Marshal(params); err != nil {
			return nil, err
		}
	}
	a, err := c.Ask(method, p)
	if err != nil {
		return nil, err
	}
	return a.Wait(ctx, withdraw)
}

// Asked is a request written to the client whose answer has not been
// taken yet.
type Asked struct {
	c  *Wire
	id int64
	ch chan reply
}

// Ask writes the request method with params (compact JSON) and flushes,
// without waiting for its answer: the caller's goroutine writes it, in
// the caller's order (--fanout writes a child's request where the child
// put it among its lines, and holds nothing of it once written). Wait
// takes the answer.
func (c *Wire) Ask(method string, params json.RawMessage) (*Asked, error) {
	id, ch, err := c.writeCall(method, params)
	if err != nil {
		if err != errConnClosed {
			c.forget(id)
		}
		return nil, err
	}
	return &Asked{c: c, id: id, ch: ch}, nil
}

// Wait waits for the request's answer or for ctx to end; with withdraw,
// a request left unanswered at ctx's end is withdrawn at the client
// ($/cancel_request): a permission prompt on its screen goes away.
func (a *Asked) Wait(ctx context.Context, withdraw bool) (json.RawMessage, error) {
	select {
	case r := <-a.ch:
		return r.result, r.err
	case <-ctx.Done():
	}
	if a.c.forget(a.id) && withdraw {
		a.c.Notify(acp.MethodCancelRequest, fmt.Appendf(nil, `{"requestId":%d}`, a.id))
		a.c.Flush()
	}
	return nil, ctx.Err()
}

// forget drops the request id's wait, and reports whether it was still
// waiting (not answered meanwhile).
func (c *Wire) forget(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, waiting := c.calls[id]
	delete(c.calls, id)
	return waiting
}

// writeCall writes and flushes the request method with params p, noting the
// call its answer is delivered to; err is the wire's failure, or
// errConnClosed (and no call) when stdin has ended.
func (c *Wire) writeCall(method string, p json.RawMessage) (id int64, ch chan reply, err error) {
	ch = make(chan reply, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.eof {
		return 0, nil, errConnClosed
	}
	c.nextID++
	id = c.nextID
	c.calls[id] = ch
	msg := strconv.AppendInt(append(make([]byte, 0, len(p)+64), `{"jsonrpc":"2.0","id":`...), id, 10)
	msg = jsonenc.AppendString(append(msg, `,"method":`...), method)
	msg = append(append(append(msg, `,"params":`...), p...), '}')
	c.writeLocked(msg)
	c.flushLocked()
	return id, ch, c.err
}

// CloseCalls fails every waiting request and every later one: stdin has
// ended, or a signal asked the process to end as if it had.
func (c *Wire) CloseCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eof = true
	for id, ch := range c.calls {
		ch <- reply{err: errConnClosed}
		delete(c.calls, id)
	}
}

// deliver hands a response to the request of ours it answers, and reports
// whether one waited for it. The agent never answers a response; what it
// cannot use fails the request it answers.
func (c *Wire) deliver(m Message) bool {
	result, hasResult := m.Get("result")
	rawErr, hasErr := m.Get("error")
	r := reply{result: result}
	if !hasResult && !hasErr {
		r.err = errors.New("the client's answer has neither a result nor an error")
	}
	if hasErr {
		var e jrpc2.Error
		if json.Unmarshal(rawErr, &e) != nil {
			e = jrpc2.Error{Code: jrpc2.InternalError, Message: "malformed error response: " + string(rawErr)}
		}
		r.err = &e
	}
	id, _ := m.Get("id")
	if ch := c.takeQuotedCall(id); ch != nil {
		// "1" for our 1: ids are JSON values, so it answers nothing; but
		// the request would wait for ever. It fails, saying why.
		ch <- reply{err: fmt.Errorf("the client answered with the id %s, a string, where the request's id was the number %s; a JSON-RPC response carries the request's id as it was sent", id, id[1:len(id)-1])}
		return true
	}
	ch := c.takeCall(id)
	if ch == nil {
		// It is late (its request was given up) or answers nothing we sent:
		// there is nobody to tell, and no reply is due to a response.
		return false
	}
	ch <- r
	// Let the waiting goroutine run here and now: this goroutine is about
	// to block in read(2), and the runtime would otherwise have to wake
	// another thread to take the waiter from this one's run queue.
	runtime.Gosched()
	return true
}

// takeCall returns the channel of the request of ours that id answers, and
// forgets it; nil when none waits for an answer with that id.
func (c *Wire) takeCall(id json.RawMessage) chan reply {
	n, ok := callID(id)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.calls[n]
	delete(c.calls, n)
	return ch
}

// takeQuotedCall is takeCall for a string id whose text is the number of a
// request of ours that waits for an answer; nil otherwise.
func (c *Wire) takeQuotedCall(id json.RawMessage) chan reply {
	var s string
	if len(id) < 3 || id[0] != '"' || json.Unmarshal(id, &s) != nil {
		return nil
	}
	if _, err := strconv.ParseInt(s, 10, 64); err != nil || !json.Valid([]byte(s)) {
		return nil
	}
	return c.takeCall(json.RawMessage(s))
}

// failCall fails the request of ours that an unusable line answers, and
// reports whether the line was such an answer: "result" or "error" before
// any "method", or no "method" in what could be read and an id we wait on.
// The agent never answers a response; the turn learns what was wrong.
func (c *Wire) failCall(head []byte, what string) bool {
	id, kind := leadingKind(head)
	if kind == isRequest {
		return false
	}
	if ch := c.takeCall(json.RawMessage(id)); ch != nil {
		ch <- reply{err: fmt.Errorf("the client's answer %s", what)}
		return true
	}
	return kind == isResponse // a response nobody waits for is dropped, as in take
}

// What the start of a line that may be cut or broken shows it to be.
const (
	isUnknown = iota
	isRequest
	isResponse
)

// leadingKind reads the top-level members at the start of a line that may
// be cut or broken: the id (its JSON text, or ""), and whether "method" (a
// request) or "result" or "error" (a response) comes first.
func leadingKind(head []byte) (id string, kind int) {
	if len(head) > 4096 {
		head = head[:4096]
	}
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", isUnknown
	}
	for {
		k, err := dec.Token()
		key, ok := k.(string)
		if err != nil || !ok {
			return id, kind
		}
		if kind == isUnknown {
			switch key {
			case "method":
				kind = isRequest
			case "result", "error":
				kind = isResponse
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return id, kind
		}
		if key == "id" && IsValidID(v) {
			id = string(v)
		}
	}
}

// callID reads a response's id as one of ours: ids are matched as JSON
// values, so 1, 1.0 and 1e0 are the same id; "1" is not.
func callID(id json.RawMessage) (int64, bool) {
	if len(id) == 0 || id[0] == '"' {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(id), 64)
	if err != nil || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}
