// store_test.go checks the session log on its own: a log of any bytes
// loads or fails with a store error, a session's lock is exclusive, and a
// record round-trips.

package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newStore(t *testing.T) *Store {
	return &Store{Dir: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// FuzzLoad loads an arbitrary session log: no panic; either a store error
// or a session whose records read back, the log cut to its valid part.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"type":"session","v":1,"sessionId":"s","cwd":"/","createdAt":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"type":"user","messageId":"m","blocks":[{"type":"text","text":"hi"}]}` + "\n" +
		`{"type":"tool_call","toolCallId":"c","call":{"id":"1","name":"read_file","input":{}}}` + "\n" +
		`{"type":"tool_result","toolCallId":"c","call":{"id":"1","name":"read_file","input":{}},"status":"completed","result":"x"}` + "\n" +
		`{"type":"turn_end","stopReason":"refusal"}` + "\n" + `{"type":"rule","tool":"x","allow":true}` + "\n" + `{"type":"agent","text":"to`))
	f.Add([]byte(`{"type":"session","v":1,"sessionId":"s","cwd":"/","createdAt":"x"}` + "\n" + `{"type":"modelState","state":{"entry":1}}` + "\n"))
	f.Add([]byte("\n\n{}"))
	f.Fuzz(func(t *testing.T, log []byte) {
		st := newStore(t)
		require.NoError(t, os.WriteFile(st.Path("sess_f", ".jsonl"), log, 0o600))
		h, file, err := st.Open(context.Background(), "sess_f", func(Record) {})
		if err != nil {
			var serr *Error
			require.True(t, errors.As(err, &serr), "a store error: %v", err)
			return
		}
		defer file.Close()
		require.NoError(t, file.Replay(h.Good, func(Record) error { return nil }))
		fi, err := os.Stat(st.Path("sess_f", ".jsonl"))
		require.NoError(t, err)
		assert.Equal(t, h.Good, fi.Size(), "the log was cut to its valid part")
	})
}

// Verify that a session's lock is exclusive (a second open fails with the
// holder's pid) and free again once the file is closed.
func TestStore_lockIsExclusive(t *testing.T) {
	st := newStore(t)
	f, err := st.Create(Info{SessionID: "sess_a", Cwd: "/", CreatedAt: Stamp(time.Now())})
	require.NoError(t, err)
	_, _, err = st.Open(context.Background(), "sess_a", func(Record) {})
	var locked *LockedError
	require.ErrorAs(t, err, &locked)
	assert.Equal(t, os.Getpid(), locked.PID)
	require.NoError(t, f.Close())
	_, g, err := st.Open(context.Background(), "sess_a", func(Record) {})
	require.NoError(t, err)
	g.Close()
}

// Verify that what is appended reads back, the model's state as it was
// kept.
func TestStore_recordsRoundTrip(t *testing.T) {
	st := newStore(t)
	f, err := st.Create(Info{SessionID: "sess_r", Cwd: "/", CreatedAt: Stamp(time.Now())})
	require.NoError(t, err)
	allow := true
	require.NoError(t, f.Append(Record{Type: RecRule, Tool: "run_command", Allow: &allow}))
	require.NoError(t, f.Append(Record{Type: RecModelState, ModelState: []byte(`{"opaque":[1,2]}`)}))
	require.NoError(t, f.AppendNow(Record{Type: RecTurnEnd, StopReason: "end_turn", Title: "t"}))
	require.NoError(t, f.Close())
	h, g, err := st.Open(context.Background(), "sess_r", func(Record) {})
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, map[string]bool{"run_command": true}, h.Rules)
	assert.JSONEq(t, `{"opaque":[1,2]}`, string(h.ModelState))
	assert.Equal(t, "t", h.Title)
}

// Verify that a session whose lock or log is a symbolic link to a file
// outside the state directory is refused with a store error naming the
// link, and that the link's target is neither truncated nor written.
func TestStore_linksAreNotFollowed(t *testing.T) {
	for _, ext := range []string{".lock", ".jsonl"} {
		t.Run(ext, func(t *testing.T) {
			st := newStore(t)
			f, err := st.Create(Info{SessionID: "sess_l", Cwd: "/", CreatedAt: Stamp(time.Now())})
			require.NoError(t, err)
			require.NoError(t, f.Close())
			outside := filepath.Join(t.TempDir(), "precious")
			require.NoError(t, os.WriteFile(outside, []byte("keep me\n"), 0o600))
			if ext == ".jsonl" {
				b, err := os.ReadFile(st.Path("sess_l", ext))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(outside, b, 0o600))
			}
			before, _ := os.ReadFile(outside)
			require.NoError(t, os.Remove(st.Path("sess_l", ext)))
			require.NoError(t, os.Symlink(outside, st.Path("sess_l", ext)))
			_, g, err := st.Open(context.Background(), "sess_l", func(Record) {})
			if g != nil {
				g.Append(Record{Type: RecAgent, Text: "written through a link"})
				g.Close()
			}
			var serr *Error
			require.ErrorAs(t, err, &serr)
			assert.Contains(t, err.Error(), "symbolic link")
			after, _ := os.ReadFile(outside)
			assert.Equal(t, string(before), string(after), "the link's target is untouched")
		})
	}
}
