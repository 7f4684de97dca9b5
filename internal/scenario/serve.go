// serve.go plays the agent's side of a scenario, to test an editor or any
// ACP client: the < lines are written to the client, and each line the
// client sends is checked against the > line in its place, with the same
// matching rules and variables as a run.

package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"acpbridge/internal/clip"
)

// server is one `scenario serve`: the scenario, the client's lines, and
// what it found.
type server struct {
	ctx     context.Context // done at a signal: the play stops where it waits
	sc      *Scenario
	v       *vars
	lines   chan []byte // the client's lines; closed at its EOF
	out     io.Writer
	timeout time.Duration
	ids     map[string]any // a > line's literal request id → the id the client used
	open    map[string]any // the client's requests matched and not yet answered, by the id's JSON
	made    int            // values made up for variables only the agent's lines bind
	diffs   []string
}

// Serve plays sc's agent side on in and out and returns the differences
// between what the client sent and the scenario's > lines (none when the
// client did as the scenario says). timeout bounds each wait for a client
// line; ctx's end (a signal) stops the play as a difference.
func Serve(ctx context.Context, sc *Scenario, in io.Reader, out io.Writer, timeout time.Duration) []string {
	s := &server{ctx: ctx, sc: sc, v: newVars(), lines: make(chan []byte, 64), out: out, timeout: timeout, ids: map[string]any{}, open: map[string]any{}}
	go s.read(in)
	if s.play() {
		s.rest()
	} else {
		s.drain()
	}
	return s.diffs
}

// maxServedLine bounds a client line serve reads, as acpbridge's
// --max-line-bytes does by default; a longer one is cut there (and so
// differs).
const maxServedLine = 80 << 20

// read hands the client's non-blank lines to s.lines.
func (s *server) read(in io.Reader) {
	br := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := readLine(br, maxServedLine)
		if t := bytes.TrimSpace(line); len(t) > 0 {
			s.lines <- t
		}
		if err != nil {
			close(s.lines)
			return
		}
	}
}

// readLine reads a line, keeping at most max bytes of it.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line) < max {
			line = append(line, frag[:min(len(frag), max-len(line))]...)
		}
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// next is the client's next line; ok is false at its EOF, err set when none
// came in time.
func (s *server) next() (line []byte, ok bool, err error) {
	select {
	case line, ok := <-s.lines:
		return line, ok, nil
	case <-time.After(s.timeout):
		return nil, false, fmt.Errorf("the client sent nothing for %v", s.timeout)
	case <-s.ctx.Done():
		return nil, false, errors.New("stopped by a signal")
	}
}

// play walks the transcript; false at the first difference.
func (s *server) play() bool {
	for _, st := range s.sc.Steps {
		switch st.Kind {
		case Expect:
			if err := s.write(st); err != nil {
				return s.differ(st, "", err.Error())
			}
		case Send, SendRaw:
			line, ok, err := s.next()
			switch {
			case err != nil:
				return s.differ(st, "", err.Error()+" where the scenario expects it")
			case !ok:
				return s.differ(st, "", "the client closed its output (EOF) where the scenario expects it")
			}
			if msg := s.check(st, line); msg != "" {
				s.refuse(line, msg)
				return s.differ(st, string(line), msg)
			}
		case Close, Restart:
			switch line, ok, err := s.next(); {
			case err != nil:
				return s.differ(st, "", err.Error()+" and did not close its output, as the scenario has it do here")
			case ok:
				s.refuse(line, "the scenario ends the conversation here")
				return s.differ(st, string(line), "the scenario has the client close its output here")
			}
			if st.Kind == Restart {
				return true // what follows is the next process's, another serve's
			}
		}
	}
	return true
}

// rest waits for the client's EOF after the last line: whatever it sends
// meanwhile is a difference.
func (s *server) rest() {
	line, ok, err := s.next()
	switch {
	case err != nil:
		s.diffs = append(s.diffs, fmt.Sprintf("%s: after the scenario's last line: %v and did not close its output", s.sc.Path, err))
	case ok:
		s.diffs = append(s.diffs, fmt.Sprintf("%s: after the scenario's last line the client sent: %s", s.sc.Path, clip.Marked(string(line), 400)))
		s.refuse(line, "the scenario has no more lines")
		s.drain()
	}
}

// drain answers what the client still sends with an error, until its EOF
// or a quiet timeout, so that it does not wait on an answer forever.
func (s *server) drain() {
	for {
		line, ok, err := s.next()
		if !ok || err != nil {
			return
		}
		s.refuse(line, "an earlier line differed from the scenario")
	}
}

// differ notes a difference at step st, answers the client's requests
// still open with an error (a client waiting on one would wait forever),
// and returns false.
func (s *server) differ(st Step, got, msg string) bool {
	for _, id := range s.open {
		b, _ := json.Marshal(id)
		s.answerError(b, msg)
	}
	clear(s.open)
	d := fmt.Sprintf("%s:%d: %s%s\n  expected: %s", s.sc.Path, st.Line, msg, st.where(), clip.Marked(stepText(st), 1000))
	if got != "" {
		d += "\n  the client sent: " + clip.Marked(got, 1000)
	}
	s.diffs = append(s.diffs, d+"\n  bindings:"+s.v.String())
	return false
}

func stepText(st Step) string {
	switch st.Kind {
	case Send:
		return "> " + st.Text
	case SendRaw:
		return ">! " + st.Text
	case Close:
		return "close"
	case Restart:
		return "restart"
	case Editor:
		return strings.TrimSpace("editor " + st.Text)
	}
	return "< " + st.Text
}

// check matches a client line against the > (or >!) step st, binding its
// variables; "" when it matches. A literal request id in the file stands
// for whatever id the client gives that request (clients number their own).
func (s *server) check(st Step, line []byte) string {
	if st.Kind == SendRaw {
		if string(line) != strings.TrimSpace(st.Text) {
			return "the client's line differs from the >! line"
		}
		return ""
	}
	got, err := decode(line)
	if err != nil {
		return fmt.Sprintf("the client's line is not JSON (%v)", err)
	}
	want, err := decode([]byte(st.Text))
	if err != nil {
		return err.Error()
	}
	w, _ := want.(map[string]any)
	g, _ := got.(map[string]any)
	if id, isLiteral := w["id"]; isLiteral && w["method"] != nil && !isVarText(fmt.Sprint(id)) {
		if gid, ok := g["id"]; ok {
			s.ids[idKey(id)] = gid
			w["id"] = gid
		}
	}
	m := s.v.match("", want, got)
	if m == nil {
		s.v.commit()
		if g["method"] != nil && g["id"] != nil {
			s.open[idKey(g["id"])] = g["id"]
		}
		return ""
	}
	s.v.drop()
	if m.err != nil {
		return m.err.Error()
	}
	at := m.path
	if at == "" {
		at = "the top"
	}
	return fmt.Sprintf("the client's line differs at %s\n  want: %s\n  got:  %s", at, clip.Marked(m.want, 400), clip.Marked(m.got, 400))
}

func idKey(id any) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// refuse answers a client request that differs from the scenario with an
// error saying so, so that the client does not wait on it.
func (s *server) refuse(line []byte, why string) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) == nil && len(m.ID) > 0 && m.Method != "" {
		s.answerError(m.ID, why)
	}
}

// answerError answers the client's request id with an error saying why.
func (s *server) answerError(id json.RawMessage, why string) {
	fmt.Fprintf(s.out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":%s}}`+"\n", id,
		encode("acpbridge scenario serve: "+why+"; see its report"))
}

// write writes the < step st's line: its variables replaced by their
// values; a variable nothing bound yet (the agent's own ids) given a value
// of its own; "$ANY" a time for a member named ...At, else null; "$REST"
// members dropped; a response's literal id the one the client used.
func (s *server) write(st Step) error {
	x, err := decode([]byte(st.Text))
	if err != nil {
		return err
	}
	x, err = s.fill(x, "", 0)
	if err != nil {
		return err
	}
	if m, ok := x.(map[string]any); ok && m["method"] == nil {
		if id, ok := m["id"]; ok {
			if client, mapped := s.ids[idKey(id)]; mapped {
				m["id"] = client
			}
			delete(s.open, idKey(m["id"]))
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return err
	}
	_, err = s.out.Write(buf.Bytes())
	return err
}

// fill is the template x with its variables filled in.
func (s *server) fill(x any, key string, depth int) (any, error) {
	switch t := x.(type) {
	case map[string]any:
		for k, e := range t {
			if k == "$REST" {
				delete(t, k)
				continue
			}
			v, err := s.fill(e, k, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = v
		}
		return t, nil
	case []any:
		for i, e := range t {
			v, err := s.fill(e, key, depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = v
		}
		return t, nil
	case string:
		return s.fillString(t, key, depth)
	}
	return x, nil
}

// fillString is a string of a < line with its variables filled in.
func (s *server) fillString(str, key string, depth int) (any, error) {
	name, isVar := varName(str)
	switch {
	case isVar && name == "ANY":
		if strings.HasSuffix(key, "At") {
			return time.Now().UTC().Format(time.RFC3339Nano), nil
		}
		return nil, nil
	case isVar:
		if x, bound := s.v.get(name); bound {
			return x, nil
		}
		s.made++
		var made any = fmt.Sprintf("%s-%d", strings.ToLower(name), s.made)
		if key == "id" && depth == 1 {
			made = json.Number(fmt.Sprint(1000 + s.made)) // a request of the agent's
		}
		s.v.set(name, made)
		return made, nil
	case strings.Contains(str, "$"):
		return s.v.interpolate(str)
	}
	return str, nil
}
