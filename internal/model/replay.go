// replay.go holds the replay model (--model replay:PATH): a JSON Lines
// fixture whose Nth entry answers the process's Nth model call.
//
// The file is not read at start-up. Each call reads the next entry from
// where the last one ended, and an entry's chunks are decoded and streamed
// one at a time (encoding/json's Decoder, the one reader of an entry), so an
// entry of any length streams in constant memory. `expect` is checked where
// it stands in the line: before any chunk when it comes first, as --record
// writes it.
//
// Where a session continues: a new session takes the next entry this
// process has not served. Each call keeps, through Sink.KeepState, the
// fixture's absolute path, the entries consumed with this call, and a
// SHA-256 of the entries before it (and, once served, one through it); a
// session opened again (in any process)
// with that fixture, whose consumed entries are unchanged, continues after
// them (an entry appended to the file keeps the position), and with another
// fixture, or the file rewritten, starts at its first entry.

package model

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creachadair/jrpc2"

	"acpbridge/internal/acp"
	"acpbridge/internal/clip"
)

// Replay is the replay model.
type Replay struct {
	path string // absolute

	mu     sync.Mutex // protects the fields below
	r      *bufio.Reader
	f      *os.File
	line   int       // lines read so far
	served int       // entries consumed so far
	high   int       // the most entries this process has served
	sum    hash.Hash // SHA-256 of the entries consumed so far
}

// replayState is what a session keeps of the replay (Sink.KeepState).
type replayState struct {
	Fixture string `json:"fixture"` // the absolute path
	Entry   int    `json:"entry"`   // entries consumed, the call's own included
	Before  string `json:"before"`  // SHA-256 (hex) of the entries before the call's
	// Through is the SHA-256 of the entries up to the call's own included,
	// kept once it has been served: a rewrite of that entry is noticed too.
	// A session whose last state lacks it (the process died mid-call)
	// is checked by Before.
	Through string `json:"through,omitempty"`
}

// Chunk is one element of an entry's chunks: exactly one key is set.
type Chunk struct {
	Text     *string   `json:"text,omitempty"`
	Thought  *string   `json:"thought,omitempty"`
	ToolCall *ToolCall `json:"toolCall,omitempty"`
	Usage    *Usage    `json:"usage,omitempty"`
	DelayMs  *int64    `json:"delayMs,omitempty"`
}

// NewReplay is the replay model of the fixture at path, which must exist;
// it is read on the first call.
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
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("replay fixture %s is not a regular file (%v); give a .jsonl file", path, fi.Mode().Type())
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return &Replay{path: path, sum: sha256.New()}, nil
}

func (m *Replay) NeedsHistory() bool  { return false }
func (m *Replay) Models() []string    { return []string{m.DefaultName()} }
func (m *Replay) DefaultName() string { return "replay:" + filepath.Base(m.path) }

func (m *Replay) Complete(ctx context.Context, req *Request, sink Sink) (acp.StopReason, error) {
	out := &watched{Sink: sink} // a failure of the session's own is said as its own
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
	st0 := replayState{Fixture: m.path, Entry: m.served + 1, Before: hex.EncodeToString(m.sum.Sum(nil))}
	state, _ := json.Marshal(st0)
	if err := out.KeepState(state); err != nil {
		return "", err
	}
	m.line++
	stop, err := m.serve(ctx, req, out)
	through, _ := json.Marshal(replayState{Fixture: m.path, Entry: m.served, Before: st0.Before, Through: hex.EncodeToString(m.sum.Sum(nil))})
	if kerr := out.KeepState(through); kerr != nil && err == nil {
		err = kerr
	}
	if err != nil && ctx.Err() == nil {
		if out.err != nil {
			return "", out.err
		}
		if rerr := (*jrpc2.Error)(nil); errors.As(err, &rerr) {
			return "", err
		}
		return "", Errorf("replay fixture %s line %d: %v", m.path, m.line, err)
	}
	return stop, err
}

// serve serves the entry that starts the reader's next line, consuming
// the line (whatever happens to the call) into the position and the sum.
func (m *Replay) serve(ctx context.Context, req *Request, out Sink) (acp.StopReason, error) {
	lr := &lineReader{r: m.r, sum: m.sum}
	defer func() {
		lr.drain()
		m.served++
		m.high = max(m.high, m.served)
	}()
	return m.entry(ctx, json.NewDecoder(lr), req, out)
}

// Resume readies the fixture for a session: state is what the session's
// last call kept, or nil for a new session (see the file's comment).
func (m *Replay) Resume(state json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var st replayState
	if state == nil {
		return m.moveTo(m.high)
	}
	if json.Unmarshal(state, &st) != nil || st.Fixture != m.path || st.Entry < 1 {
		return m.moveTo(0) // another fixture: from its first entry
	}
	if err := m.moveTo(st.Entry - 1); err != nil {
		return m.moveTo(0)
	}
	if hex.EncodeToString(m.sum.Sum(nil)) != st.Before {
		return m.moveTo(0) // the entries it consumed have changed
	}
	if err := m.moveTo(st.Entry); err != nil {
		return m.moveTo(0)
	}
	if st.Through != "" && hex.EncodeToString(m.sum.Sum(nil)) != st.Through {
		return m.moveTo(0) // the entry its last call consumed has changed
	}
	return nil
}

// Seek makes the next call serve the fixture's entry n+1 (n entries
// consumed): a server that hands entries to several conversations, each
// served by a Replay of its own, moves each to the entry it chose.
func (m *Replay) Seek(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.moveTo(n)
}

// Entries is each entry's expect and tool call ids, in order, read from
// the fixture as it is now.
func (m *Replay) Entries() ([]EntryInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.moveTo(0); err != nil {
		return nil, err
	}
	var out []EntryInfo
	for {
		if err := m.skipToEntry(); err != nil {
			if errors.Is(err, io.EOF) {
				return out, m.moveTo(0)
			}
			return nil, err
		}
		m.line++
		lr := &lineReader{r: m.r, sum: m.sum}
		var e struct {
			Expect string `json:"expect"`
			Chunks []struct {
				Text     string `json:"text"`
				ToolCall *struct {
					ID string `json:"id"`
				} `json:"toolCall"`
			} `json:"chunks"`
		}
		err := json.NewDecoder(lr).Decode(&e)
		lr.drain()
		m.served++
		if err != nil {
			return nil, fmt.Errorf("replay fixture %s line %d: %v", m.path, m.line, err)
		}
		info := EntryInfo{Expect: e.Expect}
		var text strings.Builder
		for _, c := range e.Chunks {
			text.WriteString(c.Text)
			if c.ToolCall != nil {
				info.Calls = append(info.Calls, c.ToolCall.ID)
			}
		}
		info.Text = text.String()
		out = append(out, info)
	}
}

// EntryInfo is what Entries tells of an entry.
type EntryInfo struct {
	Expect string   // "" for none
	Calls  []string // the ids of its tool calls
	Text   string   // its text chunks, joined
}

// Matches reports whether an entry's expect (with its root placeholders)
// is met by the request's newest message, as a call checks it.
func Matches(expect string, req *Request) bool {
	return strings.Contains(req.Conv.Newest(), fromPlaceholders(expect, req.Roots))
}

// moveTo makes n the number of entries consumed, reading the fixture again
// from its start to go back.
func (m *Replay) moveTo(n int) error {
	if n < m.served && m.f != nil {
		m.f.Close()
		m.f, m.r, m.line, m.served = nil, nil, 0, 0
		m.sum.Reset()
	}
	if err := m.openLocked(); err != nil {
		return err
	}
	for m.served < n {
		if err := m.skipToEntry(); err != nil {
			return err
		}
		m.line++
		lr := &lineReader{r: m.r, sum: m.sum}
		lr.drain()
		m.served++
	}
	return nil
}

func (m *Replay) openLocked() error {
	if m.r != nil {
		return nil
	}
	// Without waiting: a FIFO swapped in for the fixture must not hold
	// the session's step until a writer comes.
	f, err := os.OpenFile(m.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("replay fixture %s is no longer a regular file; give a .jsonl file", m.path)
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
	if req.Matched {
		return nil
	}
	return m.checkExpect(want, req)
}

// checkExpect checks that the newest message contains want.
func (m *Replay) checkExpect(want string, req *Request) error {
	if !Matches(want, req) {
		return Errorf(
			"replay fixture %s line %d (entry %d) expected the newest message to contain %q, but it was %q; the conversation has diverged from the recording",
			m.path, m.line, m.served+1, fromPlaceholders(want, req.Roots), clip.Marked(req.Conv.Newest(), 400))
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
	n := 0
	for ; dec.More(); n++ {
		if err := ctx.Err(); err != nil {
			return n, call, err
		}
		var c Chunk
		if err := dec.Decode(&c); err != nil {
			return n, call, err
		}
		isCall, err := c.serve(ctx, out)
		call = call || isCall
		if err != nil {
			return n, call, err
		}
	}
	_, err := dec.Token()
	return n, call, err
}

// serve streams the chunk to out and reports whether it was a tool call.
func (c *Chunk) serve(ctx context.Context, out Sink) (call bool, err error) {
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

// lineReader reads from r up to and including the next newline, then EOF;
// what it reads is added to sum.
type lineReader struct {
	r    *bufio.Reader
	sum  hash.Hash
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
	l.sum.Write(p[:n])
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
