// store.go holds the session store under --state-dir: every session is
// three files in <state-dir>/sessions/.
//
//	<id>.jsonl  the log: one JSON record a line, appended at message
//	            granularity; records collect in a buffer that is written
//	            whenever the agent waits (on the client, the model, a
//	            command) and synced at the end of each turn and on close
//	<id>.json   the info session/list reads (cwd, title, times), replaced
//	            atomically at the end of each turn
//	<id>.lock   holds the owning process's pid; the owner keeps an flock on
//	            it, which the kernel releases when the process dies
//
// Loading drops a torn last record (a crash mid-write: it has no newline at
// its end) with a warning and truncates it away; any other record that is
// not valid, and a log whose first line is not its session record, fail
// the load with the file and line, and the file is left untouched. A load reads the log
// twice: once to check it and rebuild the session's state, then to replay
// it, so no history is held in memory.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"acpbridge/internal/acp"
)

// Record types of the log.
const (
	recSession    = "session"     // the first line
	recConfig     = "config"      // mode or model changed
	recRule       = "rule"        // an "always" permission answer
	recUser       = "user"        // a prompt
	recAgent      = "agent"       // (part of) an agent message
	recThought    = "thought"     // (part of) a thought
	recToolCall   = "tool_call"   // a tool call the model made, as announced
	recToolResult = "tool_result" // its final status, content and result
	recTurnEnd    = "turn_end"    // a turn ended
	recReplay     = "replay"      // with --model replay: the fixture entries used so far
	recPlan       = "plan"        // the plan's entries, as update_plan set them
)

const storeVersion = 1

// record is one line of a session log. Each type uses some of the fields.
type record struct {
	Type string `json:"type"`

	V         int      `json:"v,omitempty"`
	SessionID string   `json:"sessionId,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	Dirs      []string `json:"additionalDirectories,omitempty"`
	CreatedAt string   `json:"createdAt,omitempty"`

	Mode  string `json:"mode,omitempty"`
	Model string `json:"model,omitempty"`

	Tool  string `json:"tool,omitempty"`
	Allow *bool  `json:"allow,omitempty"`

	MessageID string            `json:"messageId,omitempty"`
	Blocks    []json.RawMessage `json:"blocks,omitempty"`
	Text      string            `json:"text,omitempty"`
	Notice    bool              `json:"notice,omitempty"` // an agent message for the user only

	ToolCallID string          `json:"toolCallId,omitempty"`
	Call       *toolCall       `json:"call,omitempty"`
	Title      string          `json:"title,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	Locations  json.RawMessage `json:"locations,omitempty"`
	Status     string          `json:"status,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	RawOutput  json.RawMessage `json:"rawOutput,omitempty"`
	Result     string          `json:"result,omitempty"`
	// ResultIsContent says the result is the text of Content's one text
	// block, stored there only.
	ResultIsContent bool `json:"resultIsContent,omitempty"`

	StopReason  string `json:"stopReason,omitempty"`
	Usage       *usage `json:"usage,omitempty"`
	Error       string `json:"error,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	ReplayPos   int    `json:"replayPos,omitempty"` // replay fixture entries used so far

	Plan json.RawMessage `json:"plan,omitempty"` // the plan's entries
}

// infoFile is <id>.json.
type infoFile struct {
	SessionID string   `json:"sessionId"`
	Cwd       string   `json:"cwd"`
	Dirs      []string `json:"additionalDirectories,omitempty"`
	Title     string   `json:"title,omitempty"`
	CreatedAt string   `json:"createdAt"`
	UpdatedAt string   `json:"updatedAt"`
}

type store struct {
	dir string // <state-dir>/sessions
	log *slog.Logger
}

// stamp formats a time for the wire and the store.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseStamp(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func (st *store) path(id, ext string) string { return filepath.Join(st.dir, id+ext) }

// storeError reports a failed store operation to the client.
func storeError(op string, err error) error {
	return acp.Errorf(acp.CodeStoreFailed, "%s: %v; check that the state directory (--state-dir) exists, is writable and has space", op, err)
}

// validID reports whether id can name files in the store: 1 to 128
// letters, digits, '_', '-' and '.', not starting with '.'.
func validID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func (st *store) errNotFound(id string) error {
	return acp.Errorf(acp.CodeResourceNotFound, "session %s not found in %s; session/list shows the sessions there", id, st.dir).
		WithData(map[string]string{"sessionId": id})
}

// info is what <id>.json holds for s.
func (st *store) info(s *SessionRecord) infoFile {
	return infoFile{SessionID: s.id, Cwd: s.cwd, Dirs: s.roots[1:], Title: s.title,
		CreatedAt: stamp(s.created), UpdatedAt: stamp(s.updated)}
}

// create makes the files of a new session and locks it.
func (st *store) create(s *SessionRecord) (*sessionFile, error) {
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return nil, storeError("creating the state directory "+st.dir, err)
	}
	lock, err := st.lock(s.id)
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(st.path(s.id, ".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		unlock(lock)
		return nil, storeError("creating session "+s.id, err)
	}
	f := &sessionFile{st: st, id: s.id, log: log, lock: lock}
	head := record{Type: recSession, V: storeVersion, SessionID: s.id, Cwd: s.cwd, Dirs: s.roots[1:], CreatedAt: stamp(s.created)}
	if err := f.appendNow(head); err != nil {
		f.close()
		os.Remove(st.path(s.id, ".jsonl"))
		return nil, err
	}
	if err := f.writeInfo(st.info(s)); err != nil {
		f.close()
		os.Remove(st.path(s.id, ".jsonl"))
		return nil, err
	}
	return f, nil
}

// lock takes the session's lock or says which process holds it.
func (st *store) lock(id string) (*os.File, error) {
	f, err := os.OpenFile(st.path(id, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, storeError("opening the lock of session "+id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b))
			return nil, acp.Errorf(acp.CodeSessionLocked,
				"session %s is open in another acpbridge process (pid %s); close it there or end that process, then try again", id, pid).
				WithData(map[string]any{"sessionId": id, "pid": atoiOr(pid)})
		}
		return nil, storeError("locking session "+id, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func unlock(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// history is the state of a session read back from its log.
type history struct {
	title, mode, model string
	rules              map[string]bool
	created, updated   time.Time
	good               int64 // the length of the log's valid part
	replayPos          int   // replay fixture entries the session had used
}

// open locks a stored session, checks its log, rebuilds its state and feeds
// its conversation to conv. It gives up, unlocked, when ctx ends while it
// reads.
func (st *store) open(ctx context.Context, id string, conv *conversation) (*history, *sessionFile, error) {
	if !validID(id) {
		return nil, nil, st.errNotFound(id)
	}
	path := st.path(id, ".jsonl")
	if _, err := os.Stat(path); err != nil {
		return nil, nil, st.errNotFound(id)
	}
	lock, err := st.lock(id)
	if err != nil {
		return nil, nil, err
	}
	h, size, err := st.read(ctx, path, conv)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		unlock(lock)
		return nil, nil, err
	}
	if h.good < size {
		st.log.Warn("dropping a torn record at the end of the session log (the process was killed mid-write)",
			"file", path, "bytes", size-h.good)
		if err := os.Truncate(path, h.good); err != nil {
			unlock(lock)
			return nil, nil, storeError("truncating the torn end of "+path, err)
		}
	}
	log, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		unlock(lock)
		return nil, nil, storeError("opening session "+id, err)
	}
	if fi, err := os.Stat(st.path(id, ".json")); err == nil {
		h.updated = fi.ModTime()
		var inf infoFile
		if b, err := os.ReadFile(st.path(id, ".json")); err == nil && json.Unmarshal(b, &inf) == nil && inf.UpdatedAt != "" {
			h.updated = parseStamp(inf.UpdatedAt)
		}
	}
	return h, &sessionFile{st: st, id: id, log: log, lock: lock}, nil
}

// read parses a log; h.good is the length of its valid prefix, size the
// length read.
// It stops with ctx's error when ctx ends, checking every 64 lines, so that
// close or EOF ends a long load at once.
func (st *store) read(ctx context.Context, path string, conv *conversation) (h *history, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, storeError("reading "+path, err)
	}
	defer f.Close()
	h = &history{rules: map[string]bool{}, mode: modeAsk}
	feed := newFeeder(conv)
	r := bufio.NewReaderSize(f, 64<<10)
	var pendingErr error // a bad line: fatal unless it is the last
	for line := 1; ; line++ {
		if line%64 == 0 && ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		b, rerr := r.ReadBytes('\n')
		if len(b) == 0 && rerr != nil {
			break
		}
		size += int64(len(b))
		if pendingErr != nil {
			return nil, 0, pendingErr
		}
		var rec record
		torn := !bytes.HasSuffix(b, []byte("\n"))
		if jerr := json.Unmarshal(b, &rec); jerr != nil || rec.Type == "" || torn {
			pendingErr = acp.Errorf(acp.CodeStoreFailed,
				"session log %s is corrupt at line %d (%s); the file was left untouched: repair or remove that line by hand",
				path, line, describeBad(jerr, b))
			if !torn {
				// A write cut short never ends with a newline: a whole
				// line that is no record is damage, not a torn write.
				return nil, 0, pendingErr
			}
			continue
		}
		if line == 1 && rec.Type != recSession {
			return nil, 0, acp.Errorf(acp.CodeStoreFailed,
				"session log %s does not start with its session record (line 1 is a %q record); the file was left untouched: restore its first line or remove the session", path, rec.Type)
		}
		h.good = size
		h.apply(rec)
		feed.add(rec)
		if rerr != nil {
			break
		}
	}
	if h.good == 0 {
		return nil, 0, acp.Errorf(acp.CodeStoreFailed, "session log %s is empty or has no valid first record; remove it", path)
	}
	feed.finish()
	return h, size, nil
}

// replay calls fn with every record of the first good bytes of the log,
// in order.
func (f *sessionFile) replay(good int64, fn func(record) error) error {
	path := f.st.path(f.id, ".jsonl")
	file, err := os.Open(path)
	if err != nil {
		return storeError("reading "+path, err)
	}
	defer file.Close()
	r := bufio.NewReaderSize(io.LimitReader(file, good), 64<<10)
	for {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			var rec record
			if jerr := json.Unmarshal(b, &rec); jerr != nil {
				return storeError("reading "+path, jerr)
			}
			if ferr := fn(rec); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return nil
		}
	}
}

// contentText is the text of the one text block of stored tool content.
func contentText(content json.RawMessage) string {
	var c []struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(content, &c) != nil || len(c) != 1 {
		return ""
	}
	return c[0].Content.Text
}

func describeBad(err error, b []byte) string {
	if err != nil {
		return "not a JSON record"
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		return "no newline at its end"
	}
	return "no record type"
}

// apply folds one record into h.
func (h *history) apply(rec record) {
	switch rec.Type {
	case recSession:
		h.created = parseStamp(rec.CreatedAt)
		h.updated = h.created
	case recConfig:
		if rec.Mode != "" {
			h.mode = rec.Mode
		}
		if rec.Model != "" {
			h.model = rec.Model
		}
	case recRule:
		if rec.Allow != nil {
			h.rules[rec.Tool] = *rec.Allow
		}
	case recTurnEnd:
		if rec.Title != "" {
			h.title = rec.Title
		}
	case recReplay:
		h.replayPos = rec.ReplayPos
	}
}

// feeder rebuilds the model-side conversation from records in order:
// turns that ended in refusal are left out, and a tool call with no
// recorded result gets one saying so.
type feeder struct {
	c       *conversation
	mark    int             // where the current turn began
	asst    *message        // the assistant message being built
	text    strings.Builder // its text: appended in parts, made a string once
	pending map[string]bool
	order   []string // model call ids of the current step, in order
}

func newFeeder(c *conversation) *feeder { return &feeder{c: c, pending: map[string]bool{}} }

func (f *feeder) flushAsst() {
	if f.asst != nil {
		f.asst.text = f.text.String()
		f.text.Reset()
		f.c.add(*f.asst)
		f.asst = nil
	}
}

// closeCalls answers the calls of the last step that have no result.
func (f *feeder) closeCalls() {
	f.flushAsst()
	for _, id := range f.order {
		if f.pending[id] {
			f.c.add(message{role: "tool", toolCallID: id, text: "The tool call was interrupted: acpbridge stopped before it finished. Its effects are unknown."})
		}
	}
	clear(f.pending)
	f.order = f.order[:0]
}

func (f *feeder) assistant() *message {
	if f.asst == nil {
		f.asst = &message{role: "assistant"}
	}
	return f.asst
}

func (f *feeder) add(rec record) {
	switch rec.Type {
	case recUser:
		f.closeCalls()
		f.mark = f.c.mark()
		var blocks []acp.ContentBlock
		for _, b := range rec.Blocks {
			var cb acp.ContentBlock
			if json.Unmarshal(b, &cb) == nil && (cb.Type != "text" || cb.Text != nil) && (cb.Type != "resource" || cb.Resource != nil) {
				blocks = append(blocks, cb)
			}
		}
		f.c.add(message{role: "user", text: promptText(blocks)})
	case recAgent:
		if !rec.Notice {
			f.assistant()
			if f.c.full {
				f.text.WriteString(rec.Text)
			}
		}
	case recToolCall:
		if rec.Call != nil {
			m := f.assistant()
			m.toolCalls = append(m.toolCalls, *rec.Call)
			f.pending[rec.Call.ID] = true
			f.order = append(f.order, rec.Call.ID)
		}
	case recToolResult:
		f.flushAsst()
		if rec.Call != nil && f.pending[rec.Call.ID] {
			f.pending[rec.Call.ID] = false
			text := rec.Result
			if rec.ResultIsContent {
				text = contentText(rec.Content)
			}
			f.c.add(message{role: "tool", toolCallID: rec.Call.ID, text: text})
		}
	case recTurnEnd:
		f.closeCalls()
		if rec.StopReason == acp.StopRefusal {
			f.c.truncate(f.mark)
		}
	}
}

func (f *feeder) finish() { f.closeCalls() }

// sessionFile is an open, locked session log.
type sessionFile struct {
	st     *store
	id     string
	mu     sync.Mutex // protects buf and the writes
	log    *os.File
	lock   *os.File
	buf    []byte // records not yet written (the head of one may be written)
	failed error  // the first failed write since takeFailure
}

// append adds one record to the buffer; a full buffer is written at once.
func (f *sessionFile) append(r record) error {
	b, err := acp.Marshal(r)
	if err != nil {
		return storeError("encoding a record of session "+f.id, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(append(f.buf, b...), '\n')
	if len(f.buf) >= partBytes {
		return f.flushLocked()
	}
	return nil
}

// appendNow adds a record and writes it.
func (f *sessionFile) appendNow(r record) error {
	if err := f.append(r); err != nil {
		return err
	}
	return f.flush()
}

// flush writes the buffered records with one write(2).
func (f *sessionFile) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked()
}

// flushLocked writes the buffered records. What a failed write did not
// write stays buffered, to be written by the next flush that succeeds
// (a full disk that frees up loses nothing); a record never stands in the
// file half written unless the process dies meanwhile.
func (f *sessionFile) flushLocked() error {
	if len(f.buf) == 0 {
		return nil
	}
	n, err := f.log.Write(f.buf)
	f.buf = f.buf[:copy(f.buf, f.buf[n:])]
	if err != nil {
		err = storeError("writing session "+f.id, err)
		if f.failed == nil {
			f.failed = err
		}
		return err
	}
	return nil
}

// takeFailure returns the first write failure since the last call, even
// when a later write caught up: the turn it happened in reports it.
func (f *sessionFile) takeFailure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.failed
	f.failed = nil
	return err
}

// endTurn appends the turn's last record, writes, syncs, and updates the
// info file.
func (f *sessionFile) endTurn(r record, info infoFile) error {
	if err := f.appendNow(r); err != nil {
		return err
	}
	if err := f.log.Sync(); err != nil {
		return storeError("syncing session "+f.id, err)
	}
	return f.writeInfo(info)
}

// writeInfo replaces <id>.json atomically.
func (f *sessionFile) writeInfo(info infoFile) error {
	b, _ := json.Marshal(info)
	path := f.st.path(f.id, ".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return storeError("writing "+path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return storeError("writing "+path, err)
	}
	return nil
}

// close writes and syncs the log and releases the lock.
func (f *sessionFile) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.flushLocked()
	if serr := f.log.Sync(); err == nil {
		err = serr
	}
	if cerr := f.log.Close(); err == nil {
		err = cerr
	}
	unlock(f.lock)
	return err
}

// listPage is how many sessions session/list returns at a time.
const listPage = 50

// listCursor marks the last session of a page.
type listCursor struct {
	UpdatedAt string `json:"u"`
	SessionID string `json:"i"`
}

// list returns the stored sessions, newest first, a page at a time.
func (st *store) list(cwd, cursor string) (acp.ListResult, error) {
	var after *listCursor
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		var c listCursor
		if err != nil || json.Unmarshal(b, &c) != nil {
			return acp.ListResult{}, acp.InvalidParams("cursor", "not a cursor this agent returned")
		}
		after = &c
	}
	entries, err := os.ReadDir(st.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return acp.ListResult{}, storeError("listing "+st.dir, err)
	}
	var all []infoFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(st.dir, name))
		var inf infoFile
		if err != nil || json.Unmarshal(b, &inf) != nil || inf.SessionID == "" {
			st.log.Warn("skipping an unreadable session info file", "file", name, "err", err)
			continue
		}
		if cwd != "" && filepath.Clean(cwd) != inf.Cwd {
			continue
		}
		all = append(all, inf)
	}
	// Newest first; ties by id so that pages are stable.
	less := func(a, b listCursor) bool {
		ta, tb := parseStamp(a.UpdatedAt), parseStamp(b.UpdatedAt)
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
		return a.SessionID < b.SessionID
	}
	key := func(i infoFile) listCursor { return listCursor{i.UpdatedAt, i.SessionID} }
	slices.SortFunc(all, func(a, b infoFile) int {
		switch {
		case less(key(a), key(b)):
			return -1
		case less(key(b), key(a)):
			return 1
		}
		return 0
	})
	res := acp.ListResult{Sessions: []acp.SessionInfo{}}
	for _, inf := range all {
		if after != nil && !less(*after, key(inf)) {
			continue
		}
		if len(res.Sessions) == listPage {
			last := res.Sessions[len(res.Sessions)-1]
			b, _ := json.Marshal(listCursor{last.UpdatedAt, last.SessionID})
			res.NextCursor = base64.RawURLEncoding.EncodeToString(b)
			break
		}
		res.Sessions = append(res.Sessions, acp.SessionInfo{SessionID: inf.SessionID, Cwd: inf.Cwd,
			AdditionalDirectories: inf.Dirs, Title: inf.Title, UpdatedAt: inf.UpdatedAt})
	}
	return res, nil
}

// remove deletes a stored session that no process holds. An unknown id is
// not an error.
func (st *store) remove(id string) error {
	if !validID(id) {
		return nil
	}
	if _, err := os.Stat(st.path(id, ".jsonl")); err != nil {
		return nil
	}
	lock, err := st.lock(id)
	if err != nil {
		return err
	}
	defer unlock(lock)
	for _, ext := range []string{".json", ".jsonl"} {
		if err := os.Remove(st.path(id, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return storeError("deleting session "+id, err)
		}
	}
	os.Remove(st.path(id, ".lock"))
	return nil
}

// replayRecord sends one stored record as the session/update a client saw
// when it happened.
func (a *agent) replayRecord(sessionID string, rec record) error {
	switch rec.Type {
	case recUser:
		for _, b := range rec.Blocks {
			if err := a.out.NotifyJSON(sessionID, acp.UserMessageChunk{SessionUpdate: "user_message_chunk", Content: b, MessageID: rec.MessageID}); err != nil {
				return err
			}
		}
	case recAgent, recThought:
		kind := kindMessage
		if rec.Type == recThought {
			kind = kindThought
		}
		return a.out.Notify(acp.MethodSessionUpdate, acp.AppendChunkUpdate(nil, sessionID, kind, rec.MessageID, rec.Text))
	case recToolCall:
		return a.out.NotifyJSON(sessionID, acp.ToolCallUpdate{SessionUpdate: "tool_call", ToolCallID: rec.ToolCallID,
			Title: rec.Title, Kind: rec.Kind, Status: "pending", Locations: rec.Locations, RawInput: rawInput(rec.Call)})
	case recPlan:
		return a.out.NotifyJSON(sessionID, struct {
			SessionUpdate string          `json:"sessionUpdate"`
			Entries       json.RawMessage `json:"entries"`
		}{"plan", rec.Plan})
	case recToolResult:
		content := rec.Content
		if bytes.Contains(content, []byte(`"type":"terminal"`)) {
			// The terminal was released in the process that ran the
			// command: show its output, kept in the log, as text.
			content = acp.MustJSON([]acp.ToolContent{acp.TextOut(rec.Result)})
		}
		return a.out.NotifyJSON(sessionID, acp.ToolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: rec.ToolCallID,
			Status: rec.Status, Content: content, RawOutput: rec.RawOutput})
	}
	return nil
}

func rawInput(c *toolCall) json.RawMessage {
	if c == nil {
		return nil
	}
	return c.Input
}
