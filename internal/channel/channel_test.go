// channel_test.go checks the channel on its own: the agent's calls and the
// client's answers, arrival in read order, and answers to what jrpc2 must
// not see.

package channel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wireOn serves a wire on pipes: the test writes the client's lines to in
// and receives what the wire wrote from out, a line at a time; Recv runs
// as jrpc2 would run it.
func wireOn(t *testing.T) (w *Wire, in *io.PipeWriter, out <-chan []byte) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w = NewWire(inR, outW, 4096, nil)
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				return
			}
		}
	}()
	lines := make(chan []byte, 1024)
	go func() {
		defer close(lines)
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	t.Cleanup(func() { inW.Close(); outW.Close() })
	return w, inW, lines
}

// FuzzClientAnswer sends arbitrary lines where the agent waits for the
// answer to its request 1, then the real answer: the call returns, and the
// wire never answers a response (no line of its own carries id 1 without a
// method).
func FuzzClientAnswer(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`,
		`{"jsonrpc":"2.0","id":1.0,"result":{}}`, `{"jsonrpc":"2.0","id":"1","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`, `{"jsonrpc":"2.0","id":1,"result":{"outcome":`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603}}`, `{"jsonrpc":"2.0","id":1,"error":"boom"}`, `{"id":1}`, `not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.ReplaceAll(line, []byte("\n"), []byte(" "))
		w, in, out := wireOn(t)
		returned := make(chan error, 1)
		go func() {
			_, err := w.Call(context.Background(), "session/request_permission", struct{}{})
			returned <- err
		}()
		select { // the request is out: its answer may come
		case <-out:
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatal("the call wrote no request")
		}
		in.Write(append(line, '\n'))
		in.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
		select {
		case <-returned:
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatal("the call never returned")
		}
		in.Close()
		w.Flush()
		for len(out) > 0 {
			l := <-out
			var m map[string]json.RawMessage
			if json.Unmarshal(l, &m) == nil && m["method"] == nil {
				var id float64
				if json.Unmarshal(m["id"], &id) == nil && id == 1 {
					t.Fatalf("the wire answered a response to its request 1: %s", l)
				}
			}
		}
	})
}

// Verify that the lines one read brings arrive in order before any is
// handed on, that Arrived follows them, and that a malformed envelope, a
// batch and a line that is not JSON are answered at once.
func TestWire_arrivalInReadOrder(t *testing.T) {
	w, in, out := wireOn(t)
	var got []string
	arrived := make(chan []string, 1)
	w.Arrive = func(method, id string, params json.RawMessage) ([]byte, bool) {
		got = append(got, method+" "+id)
		return nil, false
	}
	w.Arrived = func() { arrived <- append([]string(nil), got...) }
	in.Write([]byte(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/list","extra":1}`,
		`[1]`,
		`{"jsonrpc":"2.0","id":3,`,
	}, "\n") + "\n"))
	assert.Equal(t, []string{"session/prompt 1", "session/cancel "}, <-arrived)
	for _, want := range []string{`"id":2,"error":{"code":-32600,"message":"extra fields in request"}`,
		`"id":null,"error":{"code":-32600,"message":"batches are not part of ACP`, `"id":3,"error":{"code":-32700`} {
		select {
		case l := <-out:
			assert.Contains(t, string(l), want)
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatalf("no answer %s", want)
		}
	}
}

// Verify that an answer whose id is the text of a pending request's number
// ("1" for 1) fails that request, saying what the client sent, rather than
// leaving it to wait for ever; and that "1" matches no other request.
func TestWire_quotedIDFailsTheRequest(t *testing.T) {
	w, in, out := wireOn(t)
	returned := make(chan error, 1)
	go func() {
		_, err := w.Call(context.Background(), "session/request_permission", struct{}{})
		returned <- err
	}()
	<-out // the request
	in.Write([]byte(`{"jsonrpc":"2.0","id":"1","result":{}}` + "\n"))
	select {
	case err := <-returned:
		require.Error(t, err)
		assert.Contains(t, err.Error(), `the client answered with the id "1", a string, where the request's id was the number 1`)
	case <-time.After(10 * time.Second): // a hang, not a timing
		t.Fatal("the request waits for ever")
	}
}

// Verify that an object that is neither a request nor a response is
// answered -32600 with a null id (even when it carries an id: that id is
// the client's), and that one whose id answers a waiting request of ours
// fails that request instead of being answered.
func TestWire_neitherRequestNorResponse(t *testing.T) {
	w, in, out := wireOn(t)
	returned := make(chan error, 1)
	go func() {
		_, err := w.Call(context.Background(), "session/request_permission", struct{}{})
		returned <- err
	}()
	<-out // the request, id 1
	in.Write([]byte(`{"foo":"boo"}` + "\n" + `{"jsonrpc":"2.0","id":7}` + "\n" + `{"jsonrpc":"2.0","id":1}` + "\n"))
	for range 2 {
		select {
		case l := <-out:
			assert.Contains(t, string(l), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: a message needs a method`)
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatal("no answer to a message that is neither a request nor a response")
		}
	}
	select {
	case err := <-returned:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "neither a result nor an error")
	case <-time.After(10 * time.Second): // a hang, not a timing
		t.Fatal("the request waits for ever")
	}
	in.Write([]byte("[]\n")) // a marker: its answer is the next line
	select {
	case l := <-out:
		assert.Contains(t, string(l), "batches are not part of ACP", "the wire answered the client's answer to its request")
	case <-time.After(10 * time.Second): // a hang, not a timing
		t.Fatal("no answer to the marker")
	}
}
