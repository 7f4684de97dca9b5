// replay.go holds the replay model (--model replay:PATH): a JSON Lines
// fixture whose Nth entry answers the process's Nth model call.
//
// The file is not read at start-up. Each call reads the next entry from
// where the last one ended, and an entry's chunks are decoded and streamed
// one at a time, so an entry of any length streams in constant memory.
// `expect` is checked where it stands in the line: before any chunk when it
// comes first, as --record writes it.
package model

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
	"acpbridge/internal/jsonenc"
)

type Replay struct {
	path string

	mu     sync.Mutex // protects the fields below
	r      *bufio.Reader
	f      *os.File
	line   int // lines read so far
	served int // entries served so far
}

// Chunk is one element of an entry's chunks: exactly one key is set.
type Chunk struct {
	Text     *string   `json:"text,omitempty"`
	Thought  *string   `json:"thought,omitempty"`
	ToolCall *ToolCall `json:"toolCall,omitempty"`
	Usage    *Usage    `json:"usage,omitempty"`
	DelayMs  *int64    `json:"delayMs,omitempty"`
}

func NewReplay(path string) (*Replay, error) {
	fi, err := os.Stat(path)
	if err != nil {
		where := ""
		if !filepath.IsAbs(path) {
			wd, _ := os.Getwd()
			where = fmt.Sprintf(" (a relative path resolves against the agent's working directory, %s)", wd)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("replay fixture %s does not exist%s", path, where)
		}
		return nil, fmt.Errorf("replay fixture %s: %v%s", path, errors.Unwrap(err), where)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("replay fixture %s is a directory; give a .jsonl file", path)
	}
	return &Replay{path: path}, nil
}

func (m *Replay) NeedsHistory() bool  { return false }
func (m *Replay) Models() []string    { return []string{m.DefaultName()} }
func (m *Replay) DefaultName() string { return "replay:" + filepath.Base(m.path) }

func (m *Replay) Complete(ctx context.Context, req *Request, out Sink) (acp.StopReason, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.openLocked(); err != nil {
		return "", Errorf("replay fixture: %v", err)
	}
	if err := m.skipToEntry(); err != nil {
		if errors.Is(err, io.EOF) {
			return "", Errorf("replay fixture %s has %s, and this model call asked for entry %d; record the conversation again (--record) or add an entry",
				m.path, plural(m.served, "entry", "entries"), m.served+1)
		}
		return "", Errorf("replay fixture %s: %v", m.path, err)
	}
	m.line++
	m.served++
	stop, err := m.serve(ctx, req, out)
	if err != nil && ctx.Err() == nil {
		if rerr := (*jrpc2.Error)(nil); errors.As(err, &rerr) {
			return "", err
		}
		return "", Errorf("replay fixture %s line %d: %v", m.path, m.line, err)
	}
	return stop, err
}

// serve serves the entry that starts the reader's next line, consuming
// the line. An entry whole in the read buffer (up to 64 KiB, the usual
// one) of the usual shape is read in place; any other streams through a
// json.Decoder, which also explains what is wrong with a bad one.
func (m *Replay) serve(ctx context.Context, req *Request, out Sink) (acp.StopReason, error) {
	if line, ok := m.wholeLine(); ok {
		if ms, ok := usualEntry(line); ok {
			defer m.r.Discard(len(line) + 1)
			return m.entryMembers(ctx, ms, req, out)
		}
	}
	lr := &lineReader{r: m.r}
	defer lr.drain()
	return m.entry(ctx, json.NewDecoder(lr), req, out)
}

// wholeLine returns the reader's next line, without its newline and not
// consumed, when the read buffer can hold all of it and it is valid JSON.
// It reads no further than that line: a fixture on a pipe may send the
// next entry only after this one is served.
func (m *Replay) wholeLine() ([]byte, bool) {
	for seen := 0; ; {
		buf, _ := m.r.Peek(m.r.Buffered())
		if i := bytes.IndexByte(buf[seen:], '\n'); i >= 0 {
			line := buf[:seen+i]
			return line, jsonenc.Valid(line)
		}
		if len(buf) == m.r.Size() {
			return nil, false // longer than the buffer: it streams
		}
		seen = len(buf)
		if _, err := m.r.Peek(len(buf) + 1); err != nil { // one read more
			return nil, false
		}
	}
}

// usualEntry returns the members of the entry line when each is one of
// entry's keys with a value of its kind: a string, or chunks' array.
func usualEntry(line []byte) (jsonenc.Members, bool) {
	ms, ok := jsonenc.Scan(line)
	if !ok {
		return nil, false
	}
	for _, mb := range ms {
		switch mb.Key {
		case "expect", "stop", "error":
			ok = mb.Value[0] == '"'
		case "chunks":
			ok = mb.Value[0] == '['
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return ms, true
}

// entryMembers serves an entry read in place, as entry does.
func (m *Replay) entryMembers(ctx context.Context, ms jsonenc.Members, req *Request, out Sink) (acp.StopReason, error) {
	var stop acp.StopReason
	var failure string
	var sawCall bool
	for _, mb := range ms {
		var err error
		var str string
		if mb.Key != "chunks" {
			str, _ = jsonenc.ReadString(mb.Value) // a string: usualEntry checked
		}
		switch mb.Key {
		case "expect":
			err = m.checkExpect(str, req)
		case "chunks":
			elems, _ := jsonenc.Elements(mb.Value)
			var n int
			var call bool
			n, call, err = m.chunkList(ctx, elems, out)
			sawCall = sawCall || call
			if err != nil {
				err = fmt.Errorf("chunks[%d]: %w", n, err)
			}
		case "stop":
			stop, err = checkStop(acp.StopReason(str))
		case "error":
			failure = str
		}
		if err != nil {
			return "", err
		}
	}
	return m.entryEnd(failure, stop, sawCall)
}

// chunkList streams the chunks of an entry read in place and reports
// whether they held a tool call.
func (m *Replay) chunkList(ctx context.Context, elems iter.Seq[json.RawMessage], out Sink) (n int, call bool, err error) {
	var text []byte // a text chunk's text, its buffer reused
	for raw := range elems {
		if call, err = serveChunk(ctx, raw, &text, out, call); err != nil {
			return n, call, err
		}
		n++
	}
	return n, call, nil
}

// Position is how many entries have been served.
func (m *Replay) Position() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served
}

// AdvanceTo skips entries until n have been served: a session loaded in a
// new process continues the fixture where it stopped. Within one process
// the fixture only moves forward.
func (m *Replay) AdvanceTo(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.openLocked(); err != nil {
		return err
	}
	for m.served < n {
		if err := m.skipToEntry(); err != nil {
			return err
		}
		_, err := m.r.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = m.r.ReadSlice('\n')
		}
		m.line++
		m.served++
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *Replay) openLocked() error {
	if m.r != nil {
		return nil
	}
	f, err := os.Open(m.path)
	if err != nil {
		return err
	}
	m.f, m.r = f, bufio.NewReaderSize(f, 64<<10)
	return nil
}

// skipToEntry consumes blank and comment lines up to the next entry.
func (m *Replay) skipToEntry() error {
	for {
		i := 0
		for {
			b, err := m.r.Peek(i + 1)
			if err != nil {
				return err // io.EOF: no entry left
			}
			c := b[i]
			if c == ' ' || c == '\t' || c == '\r' {
				i++
				continue
			}
			if c != '\n' && c != '#' {
				return nil
			}
			break
		}
		_, err := m.r.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = m.r.ReadSlice('\n')
		}
		m.line++
		if err != nil {
			return err
		}
	}
}

// entry streams one entry.
func (m *Replay) entry(ctx context.Context, dec *json.Decoder, req *Request, out Sink) (acp.StopReason, error) {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("an entry must be a JSON object")
	}
	var stop acp.StopReason
	var failure string
	var sawCall bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch key := t.(string); key {
		case "expect":
			if err := m.expect(dec, req); err != nil {
				return "", err
			}
		case "chunks":
			n, call, err := m.chunks(ctx, dec, out)
			sawCall = sawCall || call
			if err != nil {
				return "", fmt.Errorf("chunks[%d]: %w", n, err)
			}
		case "stop":
			if stop, err = decodeStop(dec); err != nil {
				return "", err
			}
		case "error":
			if err := dec.Decode(&failure); err != nil {
				return "", fmt.Errorf("error: %v", err)
			}
		default:
			return "", fmt.Errorf("unknown key %q (the keys are expect, chunks, stop, error)", key)
		}
	}
	return m.entryEnd(failure, stop, sawCall)
}

// entryEnd is how an entry ends: its error, its stop, or the stop its
// chunks imply.
func (m *Replay) entryEnd(failure string, stop acp.StopReason, sawCall bool) (acp.StopReason, error) {
	if failure != "" {
		return "", Errorf("model call failed: %s (replayed from %s line %d)", failure, m.path, m.line)
	}
	return cmp.Or(stop, defaultStop(sawCall)), nil
}

// defaultStop is the stop reason of an entry that names none.
func defaultStop(sawCall bool) acp.StopReason {
	if sawCall {
		return acp.StopToolUse
	}
	return acp.StopEndTurn
}

// expect checks the entry's expect (next in dec) against the newest
// message of the conversation: the recording must not have diverged.
func (m *Replay) expect(dec *json.Decoder, req *Request) error {
	var want string
	if err := dec.Decode(&want); err != nil {
		return fmt.Errorf("expect: %v", err)
	}
	return m.checkExpect(want, req)
}

// checkExpect checks that the newest message contains want.
func (m *Replay) checkExpect(want string, req *Request) error {
	want = fromPlaceholders(want, req.Roots)
	if got := req.Conv.Newest(); !strings.Contains(got, want) {
		return Errorf(
			"replay fixture %s line %d (entry %d) expected the newest message to contain %q, but it was %q; the conversation has diverged from the recording",
			m.path, m.line, m.served, want, clip.Marked(got, 400))
	}
	return nil
}

// decodeStop reads the entry's stop reason, next in dec.
func decodeStop(dec *json.Decoder) (acp.StopReason, error) {
	var stop acp.StopReason
	if err := dec.Decode(&stop); err != nil {
		return "", fmt.Errorf("stop: %v", err)
	}
	return checkStop(stop)
}

// checkStop refuses a stop reason that a model does not give.
func checkStop(stop acp.StopReason) (acp.StopReason, error) {
	switch stop {
	case acp.StopEndTurn, acp.StopToolUse, acp.StopMaxTokens, acp.StopRefusal:
		return stop, nil
	}
	return "", fmt.Errorf("stop %q is not one of end_turn, tool_use, max_tokens, refusal", stop)
}

// chunks streams the chunks array and reports whether it held a tool call.
func (m *Replay) chunks(ctx context.Context, dec *json.Decoder, out Sink) (int, bool, error) {
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, false, fmt.Errorf("chunks must be an array")
	}
	var call bool
	var raw json.RawMessage // one chunk's JSON, its buffer reused
	var text []byte         // a text chunk's text, its buffer reused
	n := 0
	for ; dec.More(); n++ {
		raw = raw[:0]
		if err := ctx.Err(); err != nil {
			return n, call, err
		}
		if err := dec.Decode(&raw); err != nil {
			return n, call, err
		}
		var err error
		if call, err = serveChunk(ctx, raw, &text, out, call); err != nil {
			return n, call, err
		}
	}
	_, err := dec.Token()
	return n, call, err
}

// serveChunk streams the chunk raw to out, text through the reused buffer
// text; call becomes true at a tool call.
func serveChunk(ctx context.Context, raw []byte, text *[]byte, out Sink, call bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return call, err
	}
	if lent, err := lendText(raw, text, out); lent || err != nil {
		return call, err
	}
	isCall, err := chunk(ctx, raw, out)
	return call || isCall, err
}

// chunk streams one chunk other than plain text (raw, its JSON) to out and
// reports whether it was a tool call.
func chunk(ctx context.Context, raw []byte, out Sink) (call bool, err error) {
	var c Chunk
	if tc, ok := toolCallChunk(raw); ok {
		c.ToolCall = &tc
	} else if err := json.Unmarshal(raw, &c); err != nil {
		return false, err
	}
	if !c.one() {
		return false, fmt.Errorf("a chunk has exactly one of text, thought, toolCall, usage, delayMs")
	}
	switch {
	case c.Text != nil:
		return false, out.TextChunk(*c.Text)
	case c.Thought != nil:
		return false, out.ThoughtChunk(*c.Thought)
	case c.ToolCall != nil:
		if c.ToolCall.ID == "" || c.ToolCall.Name == "" {
			return false, fmt.Errorf("toolCall needs id and name")
		}
		if len(c.ToolCall.Input) == 0 {
			c.ToolCall.Input = json.RawMessage("{}")
		}
		out.ToolCall(*c.ToolCall)
		return true, nil
	case c.Usage != nil:
		out.AddUsage(*c.Usage)
		return false, nil
	}
	return false, sleep(ctx, out, time.Duration(*c.DelayMs)*time.Millisecond)
}

// toolCallChunk reads raw, a valid chunk, in place when it is a tool call
// of the usual shape, {"toolCall":{"id":"…","name":"…","input":…}} (keys
// spelled exactly, each once); ok is false otherwise, for encoding/json to
// read and explain.
func toolCallChunk(raw []byte) (tc ToolCall, ok bool) {
	ms, ok := jsonenc.Scan(raw)
	if !ok || len(ms) != 1 || ms[0].Key != "toolCall" {
		return tc, false
	}
	call, ok := jsonenc.Scan(ms[0].Value)
	if !ok || len(call) > 3 {
		return tc, false
	}
	var seen [3]bool // id, name, input
	for _, m := range call {
		k := slices.Index([]string{"id", "name", "input"}, m.Key)
		if k < 0 || seen[k] || (k < 2 && m.Value[0] != '"') {
			return tc, false
		}
		seen[k] = true
		switch k {
		case 0:
			tc.ID, _ = jsonenc.ReadString(m.Value)
		case 1:
			tc.Name, _ = jsonenc.ReadString(m.Value)
		default:
			tc.Input = bytes.Clone(m.Value)
		}
	}
	return tc, true
}

// one reports whether the chunk has exactly one of its members.
func (c *Chunk) one() bool {
	set := 0
	for _, ok := range []bool{c.Text != nil, c.Thought != nil, c.ToolCall != nil, c.Usage != nil, c.DelayMs != nil} {
		if ok {
			set++
		}
	}
	return set == 1
}

// lendText streams raw when it is a text or thought chunk, the common one,
// decoded into buf without allocating: its text is lent to the sink for
// the call (the Sink's contract). lent is false for any other chunk.
func lendText(raw []byte, buf *[]byte, out Sink) (lent bool, err error) {
	thought, str, ok := textChunk(raw)
	if !ok {
		return false, nil
	}
	*buf, _ = jsonenc.AppendStringValue((*buf)[:0], str)
	s := unsafe.String(unsafe.SliceData(*buf), len(*buf))
	if thought {
		return true, out.ThoughtChunk(s)
	}
	return true, out.TextChunk(s)
}

// textChunk reports whether raw (a valid JSON value) is {"text": STRING}
// or {"thought": STRING} and no more, and returns the string token.
func textChunk(raw []byte) (thought bool, str []byte, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false, nil, false
	}
	i = skipSpace(raw, i+1)
	switch {
	case bytes.HasPrefix(raw[i:], []byte(`"text"`)):
		i += len(`"text"`)
	case bytes.HasPrefix(raw[i:], []byte(`"thought"`)):
		thought = true
		i += len(`"thought"`)
	default:
		return false, nil, false
	}
	if i = skipSpace(raw, i); i >= len(raw) || raw[i] != ':' {
		return false, nil, false
	}
	start := skipSpace(raw, i+1)
	if start >= len(raw) || raw[start] != '"' {
		return false, nil, false
	}
	end := start + 1
	for end < len(raw) && raw[end] != '"' {
		if raw[end] == '\\' {
			end++
		}
		end++
	}
	end++ // past the closing quote
	if i = skipSpace(raw, end); i != len(raw)-1 || raw[i] != '}' {
		return false, nil, false
	}
	return thought, raw[start:end], true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// sleep flushes the stream and waits for d or for ctx to end.
func sleep(ctx context.Context, out Sink, d time.Duration) error {
	if err := out.Pause(); err != nil {
		return err
	}
	return waitFor(ctx, d)
}

// waitFor waits for d or for ctx to end.
func waitFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lineReader reads from r up to and including the next newline, then EOF.
type lineReader struct {
	r    *bufio.Reader
	done bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if l.r.Buffered() == 0 {
		if _, err := l.r.Peek(1); err != nil {
			l.done = true
			return 0, io.EOF
		}
	}
	buf, _ := l.r.Peek(min(l.r.Buffered(), len(p)))
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i+1]
		l.done = true
	}
	n := copy(p, buf)
	l.r.Discard(n)
	return n, nil
}

// drain consumes the rest of the line (after an error or a cancel).
func (l *lineReader) drain() {
	var buf [4096]byte
	for !l.done {
		l.Read(buf[:])
	}
}

// clip shortens s for an error message.
// plural is "1 entry", "2 entries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// A recording holds no absolute path of the session's roots, so that it
// replays from any directory: --record writes them as placeholders, {cwd}
// for the cwd and {dir1}, {dir2}... for the additional directories, and
// replay puts the session's own roots back before it compares.

// rootPlaceholder is the placeholder of roots[i].
func rootPlaceholder(i int) string {
	if i == 0 {
		return "{cwd}"
	}
	return fmt.Sprintf("{dir%d}", i)
}

// toPlaceholders replaces the roots in text, the longest first (a root may
// lie inside another).
func toPlaceholders(text string, roots []string) string {
	order := make([]int, len(roots))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return len(roots[b]) - len(roots[a]) })
	for _, i := range order {
		text = strings.ReplaceAll(text, roots[i], rootPlaceholder(i))
	}
	return text
}

func fromPlaceholders(text string, roots []string) string {
	for i, r := range roots {
		text = strings.ReplaceAll(text, rootPlaceholder(i), r)
	}
	return text
}

// RecordedExpect is what --record writes as an entry's expect: the newest
// message's start, roots as placeholders, never a placeholder cut in two.
func RecordedExpect(newest string, roots []string) string {
	e := clip.Cut(toPlaceholders(newest, roots), 200)
	if i := strings.LastIndexByte(e, '{'); i >= 0 && !strings.Contains(e[i:], "}") {
		e = e[:i]
	}
	return e
}
