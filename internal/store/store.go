// Package store holds the session store under --state-dir: every session is
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
package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"acpbridge/internal/jsonenc"
)

// Record types of the log.
const (
	recSession      = "session"       // the first line
	RecConfig       = "config"        // mode or model changed
	RecRule         = "rule"          // an "always" permission answer
	RecUser         = "user"          // a prompt
	RecAgent        = "agent"         // (part of) an agent message
	RecThought      = "thought"       // (part of) a thought
	RecToolCall     = "tool_call"     // a tool call the model made, as announced
	RecToolResult   = "tool_result"   // its final status, content and result
	RecTurnEnd      = "turn_end"      // a turn ended
	RecModelState   = "modelState"    // what the model needs to continue the session elsewhere (opaque)
	RecPlan         = "plan"          // the plan's entries, as update_plan set them
	RecUsage        = "usage"         // the context's fill after a model call (Used, Size, Cost)
	RecInstructions = "system_prompt" // the client's system prompt (PromptMode, Text)
)

const storeVersion = 1

// flushBytes is how much the log buffers before it writes without a pause.
const flushBytes = 64 << 10

// Record is one line of a session log. Each type uses some of the fields.
type Record struct {
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
	Call       *Call           `json:"call,omitempty"`
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

	StopReason  string          `json:"stopReason,omitempty"`
	Usage       *Usage          `json:"usage,omitempty"`
	Error       string          `json:"error,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
	ModelState  json.RawMessage `json:"state,omitempty"` // the model's own, not read here

	Plan json.RawMessage `json:"plan,omitempty"` // the plan's entries

	PromptMode string `json:"promptMode,omitempty"` // system_prompt: append or override

	Used int64    `json:"used,omitempty"` // usage: tokens in the context
	Size int64    `json:"size,omitempty"` // usage: the context budget
	Cost *float64 `json:"cost,omitempty"` // usage: the session's cost so far, USD, where the provider reports it
}

// Call is a tool call as the model made it; the root's model.ToolCall has
// the same shape.
type Call struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Usage is a turn's token use.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// Info is <id>.json.
type Info struct {
	SessionID string   `json:"sessionId"`
	Cwd       string   `json:"cwd"`
	Dirs      []string `json:"additionalDirectories,omitempty"`
	Title     string   `json:"title,omitempty"`
	CreatedAt string   `json:"createdAt"`
	UpdatedAt string   `json:"updatedAt"`
}

type Store struct {
	Dir string // <state-dir>/sessions
	Log *slog.Logger
}

// Stamp formats a time for the wire and the store.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseStamp(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Path is the path of session id's file with the extension ext (.jsonl,
// .json, .lock).
func (st *Store) Path(id, ext string) string { return filepath.Join(st.Dir, id+ext) }

// Errors. The store knows no protocol: the root gives each its code.

// Error is a store that could not be read or written, or a log that cannot
// be loaded as it is.
type Error struct {
	Msg string
	Err error // the cause, when there is one
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// NotFoundError is a session the store does not hold.
type NotFoundError struct{ ID, Dir string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("session %s not found in %s; session/list shows the sessions there", e.ID, e.Dir)
}

// LockedError is a session another process holds.
type LockedError struct {
	ID  string
	PID int // 0 when the lock file does not say
}

func (e *LockedError) Error() string {
	pid := "unknown"
	if e.PID != 0 {
		pid = strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("session %s is open in another acpbridge process (pid %s); close it there or end that process, then try again", e.ID, pid)
}

// ErrBadCursor is a list cursor this store did not make.
var ErrBadCursor = errors.New("not a cursor this agent returned")

// storeError reports a failed store operation.
func storeError(op string, err error) error {
	if errors.Is(err, ErrLink) {
		return &Error{Msg: fmt.Sprintf("%s: %v", op, err), Err: err}
	}
	return &Error{Msg: fmt.Sprintf("%s: %v; check that the state directory (--state-dir) exists, is writable and has space", op, err), Err: err}
}

// ErrLink is why a file of the store that is a symbolic link is refused: a
// shared, cloned or restored state directory must not make acpbridge read
// or write elsewhere.
var ErrLink = errors.New("it is a symbolic link, and acpbridge never follows links in its state directory; remove the link (or the session)")

// corrupt reports a log that cannot be loaded as it is.
func corrupt(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

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

func (st *Store) errNotFound(id string) error { return &NotFoundError{ID: id, Dir: st.Dir} }

// Create makes the files of a new session and locks it.
func (st *Store) Create(info Info) (*File, error) {
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		return nil, storeError("creating the state directory "+st.Dir, err)
	}
	id := info.SessionID
	lock, err := st.lock(id)
	if err != nil {
		return nil, err
	}
	log, err := openFile(st.Path(id, ".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND)
	if err != nil {
		unlock(lock)
		return nil, storeError("creating session "+id, err)
	}
	f := &File{st: st, id: id, log: log, lock: lock}
	head := Record{Type: recSession, V: storeVersion, SessionID: id, Cwd: info.Cwd, Dirs: info.Dirs, CreatedAt: info.CreatedAt}
	if err := f.AppendNow(head); err != nil {
		f.Close()
		os.Remove(st.Path(id, ".jsonl"))
		return nil, err
	}
	if err := f.WriteInfo(info); err != nil {
		f.Close()
		os.Remove(st.Path(id, ".jsonl"))
		return nil, err
	}
	return f, nil
}

// lock takes the session's lock or says which process holds it.
func (st *Store) lock(id string) (*os.File, error) {
	f, err := openFile(st.Path(id, ".lock"), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, storeError("opening the lock of session "+id, err)
	}
	if held, err := lockFile(f); err != nil || held {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if held {
			return nil, &LockedError{ID: id, PID: atoiOr(strings.TrimSpace(string(b)))}
		}
		return nil, storeError("locking session "+id, err)
	}
	// The pid only names the holder in another process's LockedError: a
	// lock whose pid cannot be written still locks.
	if err := f.Truncate(0); err != nil {
		st.Log.Warn("cannot write this process's pid into the session lock", "session", id, "err", err)
	} else if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		st.Log.Warn("cannot write this process's pid into the session lock", "session", id, "err", err)
	}
	return f, nil
}

func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func unlock(f *os.File) {
	unlockFile(f)
	f.Close()
}

// History is the state of a session read back from its log.
type History struct {
	Title, Mode, Model string
	Rules              map[string]bool
	Created, Updated   time.Time
	Usage              *Record         // the last usage record, or nil
	Good               int64           // the length of the log's valid part
	ModelState         json.RawMessage // the last the model asked to keep, or nil
	Instructions       *Record         // the last system_prompt record, or nil
}

// Open locks a stored session, checks its log, rebuilds its state and
// hands every good record to feed, in order. It gives up, unlocked, when
// ctx ends while it reads.
func (st *Store) Open(ctx context.Context, id string, feed func(Record)) (*History, *File, error) {
	if !validID(id) {
		return nil, nil, st.errNotFound(id)
	}
	path := st.Path(id, ".jsonl")
	if _, err := os.Stat(path); err != nil {
		return nil, nil, st.errNotFound(id)
	}
	lock, err := st.lock(id)
	if err != nil {
		return nil, nil, err
	}
	h, log, err := st.openLocked(ctx, id, path, feed)
	if err != nil {
		unlock(lock)
		return nil, nil, err
	}
	if t, ok := st.updated(id); ok {
		h.Updated = t
	}
	return h, &File{st: st, id: id, log: log, lock: lock}, nil
}

// openLocked reads the log at path (its lock held), drops a torn record at
// its end, and opens it for appending.
func (st *Store) openLocked(ctx context.Context, id, path string, feed func(Record)) (*History, *os.File, error) {
	h, size, err := st.read(ctx, path, feed)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, err
	}
	if h.Good < size {
		st.Log.Warn("dropping a torn record at the end of the session log (the process was killed mid-write)",
			"file", path, "bytes", size-h.Good)
		if err := os.Truncate(path, h.Good); err != nil {
			return nil, nil, storeError("truncating the torn end of "+path, err)
		}
	}
	log, err := openFile(path, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return nil, nil, storeError("opening session "+id, err)
	}
	return h, log, nil
}

// updated is when session id last changed: its info file's updatedAt, or
// the file's time; ok is false without an info file.
func (st *Store) updated(id string) (t time.Time, ok bool) {
	fi, err := os.Stat(st.Path(id, ".json"))
	if err != nil {
		return t, false
	}
	var inf Info
	if b, err := os.ReadFile(st.Path(id, ".json")); err == nil && json.Unmarshal(b, &inf) == nil && inf.UpdatedAt != "" {
		return parseStamp(inf.UpdatedAt), true
	}
	return fi.ModTime(), true
}

// read parses a log; h.good is the length of its valid prefix, size the
// length read.
// It stops with ctx's error when ctx ends, checking every 64 lines, so that
// close or EOF ends a long load at once.
func (st *Store) read(ctx context.Context, path string, feed func(Record)) (h *History, size int64, err error) {
	f, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return nil, 0, storeError("reading "+path, err)
	}
	defer f.Close()
	h = &History{Rules: map[string]bool{}}
	r := bufio.NewReaderSize(f, 64<<10)
	var pendingErr error // a torn line: fatal unless it is the last
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
		rec, torn, err := logRecord(path, line, b)
		if err != nil {
			if !torn {
				return nil, 0, err
			}
			pendingErr = err // fatal unless it is the last line
			continue
		}
		h.Good = size
		h.apply(rec)
		feed(rec)
		if rerr != nil {
			break
		}
	}
	if h.Good == 0 {
		return nil, 0, corrupt("session log %s is empty or has no valid first record; remove it", path)
	}
	return h, size, nil
}

// logRecord decodes line n (b) of the log at path. torn reports a line
// without its newline: a write cut short, which the last line may be; any
// other bad line is damage.
func logRecord(path string, n int, b []byte) (rec Record, torn bool, err error) {
	torn = !bytes.HasSuffix(b, []byte("\n"))
	if jerr := json.Unmarshal(b, &rec); jerr != nil || rec.Type == "" || torn {
		return rec, torn, corrupt(
			"session log %s is corrupt at line %d (%s); the file was left untouched: repair or remove that line by hand",
			path, n, describeBad(jerr, b))
	}
	if n == 1 && rec.Type != recSession {
		return rec, false, corrupt(
			"session log %s does not start with its session record (line 1 is a %q record); the file was left untouched: restore its first line or remove the session", path, rec.Type)
	}
	return rec, false, nil
}

// Replay calls fn with every record of the first good bytes of the log,
// in order.
func (f *File) Replay(good int64, fn func(Record) error) error {
	path := f.st.Path(f.id, ".jsonl")
	file, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return storeError("reading "+path, err)
	}
	defer file.Close()
	r := bufio.NewReaderSize(io.LimitReader(file, good), 64<<10)
	for {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			var rec Record
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
func (h *History) apply(rec Record) {
	switch rec.Type {
	case recSession:
		h.Created = parseStamp(rec.CreatedAt)
		h.Updated = h.Created
	case RecConfig:
		if rec.Mode != "" {
			h.Mode = rec.Mode
		}
		if rec.Model != "" {
			h.Model = rec.Model
		}
	case RecRule:
		if rec.Allow != nil {
			h.Rules[rec.Tool] = *rec.Allow
		}
	case RecTurnEnd:
		if rec.Title != "" {
			h.Title = rec.Title
		}
	case RecModelState:
		h.ModelState = rec.ModelState
	case RecUsage:
		h.Usage = &rec
	case RecInstructions:
		h.Instructions = &rec
	}
}

// File is an open, locked session log.
type File struct {
	st     *Store
	id     string
	mu     sync.Mutex // protects buf and the writes
	log    *os.File
	lock   *os.File
	buf    []byte // records not yet written (the head of one may be written)
	failed error  // the first failed write since TakeFailure
}

// Append adds one record to the buffer; a full buffer is written at once.
func (f *File) Append(r Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Every raw field is written as it is: acpbridge's own are compact JSON,
	// and a user record's blocks came from the client on one line of JSON,
	// decoded (so valid), with no line break outside their strings: the
	// record stays one line. A huge prompt is encoded once, into the buffer.
	b, err := jsonenc.AppendTrusted(f.buf, &r)
	if err != nil {
		return storeError("encoding a record of session "+f.id, err)
	}
	f.buf = append(b, '\n')
	if len(f.buf) >= flushBytes {
		return f.flushLocked()
	}
	return nil
}

// AppendNow adds a record and writes it.
func (f *File) AppendNow(r Record) error {
	if err := f.Append(r); err != nil {
		return err
	}
	return f.Flush()
}

// Flush writes the buffered records with one write(2).
func (f *File) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked()
}

// flushLocked writes the buffered records. What a failed write did not
// write stays buffered, to be written by the next flush that succeeds
// (a full disk that frees up loses nothing); a record never stands in the
// file half written unless the process dies meanwhile.
func (f *File) flushLocked() error {
	if len(f.buf) == 0 {
		return nil
	}
	n, err := f.log.Write(f.buf)
	f.buf = f.buf[:copy(f.buf, f.buf[n:])]
	if len(f.buf) == 0 && cap(f.buf) > 4*flushBytes {
		f.buf = nil // a huge record's buffer is not kept for the session's life
	}
	if err != nil {
		err = storeError("writing session "+f.id, err)
		if f.failed == nil {
			f.failed = err
		}
		return err
	}
	return nil
}

// SwapLog replaces the file the log writes to and returns the one it
// replaced: tests make writes fail with it, as a full disk would.
func (f *File) SwapLog(w *os.File) *os.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.log
	f.log = w
	return old
}

// TakeFailure returns the first write failure since the last call, even
// when a later write caught up: the turn it happened in reports it.
func (f *File) TakeFailure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.failed
	f.failed = nil
	return err
}

// EndTurn appends the turn's last record, writes, syncs, and updates the
// info file.
func (f *File) EndTurn(r Record, info Info) error {
	if err := f.AppendNow(r); err != nil {
		return err
	}
	if err := f.log.Sync(); err != nil {
		return storeError("syncing session "+f.id, err)
	}
	return f.WriteInfo(info)
}

// WriteInfo replaces <id>.json atomically.
func (f *File) WriteInfo(info Info) error {
	b, _ := json.Marshal(info)
	path := f.st.Path(f.id, ".json")
	tmp := path + ".tmp"
	if err := writeFile(tmp, append(b, '\n')); err != nil {
		return storeError("writing "+path, err)
	}
	if err := replaceFile(tmp, path); err != nil {
		return storeError("writing "+path, err)
	}
	return nil
}

// Close writes and syncs the log and releases the lock.
func (f *File) Close() error {
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

// ListPage is how many sessions session/list returns at a time.
const ListPage = 50

// listCursor marks the last session of a page.
type listCursor struct {
	UpdatedAt string `json:"u"`
	SessionID string `json:"i"`
}

// List returns the stored sessions, newest first, a page at a time.
// It returns the page and the cursor of the next one ("" at the end).
func (st *Store) List(cwd, cursor string) ([]Info, string, error) {
	after, err := decodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	all, err := st.infos(cwd)
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(all, func(a, b Info) int {
		switch {
		case listedBefore(keyOf(a), keyOf(b)):
			return -1
		case listedBefore(keyOf(b), keyOf(a)):
			return 1
		}
		return 0
	})
	page := []Info{}
	for _, inf := range all {
		if after != nil && !listedBefore(*after, keyOf(inf)) {
			continue
		}
		if len(page) == ListPage {
			last := page[len(page)-1]
			b, _ := json.Marshal(keyOf(last))
			return page, base64.RawURLEncoding.EncodeToString(b), nil
		}
		page = append(page, inf)
	}
	return page, "", nil
}

// decodeCursor reads a list cursor: nil for "", the first page.
func decodeCursor(cursor string) (*listCursor, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	var c listCursor
	if err != nil || json.Unmarshal(b, &c) != nil {
		return nil, ErrBadCursor
	}
	return &c, nil
}

// infos reads the info files of the sessions in cwd (all when it is ""),
// skipping, with a warning, those it cannot read.
func (st *Store) infos(cwd string) ([]Info, error) {
	entries, err := os.ReadDir(st.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, storeError("listing "+st.Dir, err)
	}
	var all []Info
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(st.Dir, name))
		var inf Info
		if err != nil || json.Unmarshal(b, &inf) != nil || inf.SessionID == "" {
			st.Log.Warn("skipping an unreadable session info file", "file", name, "err", err)
			continue
		}
		if cwd != "" && filepath.Clean(cwd) != inf.Cwd {
			continue
		}
		all = append(all, inf)
	}
	return all, nil
}

// keyOf is where a session is in the list.
func keyOf(i Info) listCursor { return listCursor{i.UpdatedAt, i.SessionID} }

// listedBefore orders the list: newest first, ties by id so that pages are
// stable.
func listedBefore(a, b listCursor) bool {
	ta, tb := parseStamp(a.UpdatedAt), parseStamp(b.UpdatedAt)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.SessionID < b.SessionID
}

// Remove deletes a stored session that no process holds. An unknown id is
// not an error.
func (st *Store) Remove(id string) error {
	if !validID(id) {
		return nil
	}
	if _, err := os.Stat(st.Path(id, ".jsonl")); err != nil {
		return nil
	}
	lock, err := st.lock(id)
	if err != nil {
		return err
	}
	for _, ext := range []string{".json", ".jsonl"} {
		if err := os.Remove(st.Path(id, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			unlock(lock)
			return storeError("deleting session "+id, err)
		}
	}
	unlock(lock) // Windows removes no file that is open
	os.Remove(st.Path(id, ".lock"))
	return nil
}

// writeFile is os.WriteFile through openFile.
func writeFile(path string, b []byte) error {
	f, err := openFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
