// events_test.go checks that an event is written as a JSON line beside the
// log record that carries it.

package events

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"testing"
)

// Verify that a record with an event name is written as a JSON line with
// the pid and its attributes, at debug level under an info log too, and
// still reaches the log as the log's level says; a record without one is
// not written.
func TestWrap(t *testing.T) {
	var log, ev bytes.Buffer
	l := slog.New(Wrap(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}), &ev)).With("conn", "c1")
	l.Debug("evicting a thread's process", Of("evicting"), "session", "s1")
	l.Info("plain")
	l.Info("session closed", Of("session_closed"), "session", "s2")
	want := fmt.Sprintf(`{"pid":%d,"conn":"c1","event":"evicting","session":"s1"}`+"\n"+`{"pid":%[1]d,"conn":"c1","event":"session_closed","session":"s2"}`+"\n", os.Getpid())
	if ev.String() != want {
		t.Errorf("events:\n%s\nwant:\n%s", ev.String(), want)
	}
	if bytes.Contains(log.Bytes(), []byte("evicting")) || !bytes.Contains(log.Bytes(), []byte("plain")) || !bytes.Contains(log.Bytes(), []byte("session closed")) {
		t.Errorf("the log, at info: %s", log.String())
	}
}
