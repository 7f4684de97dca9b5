// trace.go holds --trace: every protocol message, in and out, appended to
// a JSON Lines file.

package channel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Tracer writes every protocol message, in and out, to a JSON Lines file:
// {"time":..., "pid":..., "dir":"in"|"out", "msg":<the message>}. The pid
// tells apart the processes that share one file (acpx runs several). The
// --fanout router adds what it says to a child on its own account:
// {"time":..., "pid":..., "child":..., "dir":"to-child"|"from-child", "msg":...}.
type Tracer struct {
	pid int
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	buf []byte
}

// OpenTrace creates (or empties) the --trace file at path.
func OpenTrace(path string) (*Tracer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening trace file: %w", err)
	}
	return &Tracer{pid: os.Getpid(), f: f, w: bufio.NewWriter(f)}, nil
}

func (t *Tracer) in(msg []byte) {
	t.write("in", func(b []byte) []byte { return append(b, msg...) })
}

func (t *Tracer) out(appendMsg func([]byte) []byte) { t.write("out", appendMsg) }

// Child records a message the --fanout router exchanged with its child
// process child on its own account (reopening a thread's session), not the
// client's: dir is "to-child" or "from-child". A nil Tracer records
// nothing.
func (t *Tracer) Child(dir string, child int, msg []byte) {
	if t == nil {
		return
	}
	t.writeFor(dir, child, func(b []byte) []byte { return append(b, msg...) })
}

func (t *Tracer) write(dir string, appendMsg func([]byte) []byte) { t.writeFor(dir, 0, appendMsg) }

// writeFor writes one record; child, when not 0, is the child process the
// message went to or came from.
func (t *Tracer) writeFor(dir string, child int, appendMsg func([]byte) []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := append(t.buf[:0], `{"time":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","pid":`...)
	b = strconv.AppendInt(b, int64(t.pid), 10)
	if child != 0 {
		b = append(b, `,"child":`...)
		b = strconv.AppendInt(b, int64(child), 10)
	}
	b = append(b, `,"dir":"`...)
	b = append(b, dir...)
	b = append(b, `","msg":`...)
	start := len(b)
	b = appendMsg(b)
	if !json.Valid(b[start:]) {
		// Not JSON (a malformed input line): keep it as a string.
		q, _ := json.Marshal(string(b[start:]))
		b = append(b[:start], q...)
	}
	b = append(b, "}\n"...)
	t.buf = b
	t.w.Write(b)
	t.w.Flush()
}

func (t *Tracer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.Flush()
	return t.f.Close()
}
