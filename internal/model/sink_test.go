// sink_test.go checks that a failure of the session's own (the Sink: its
// store could not write, as on a full disk) comes back from a model as it
// is, never wrapped as a failed model call (1005).

package model

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creachadair/jrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errDiskFull stands for the store's error on a full disk.
var errDiskFull = errors.New("writing session s: no space left on device")

// fullSink is a Sink whose store fills up once text has streamed: its
// next pause (the write of what streamed) fails.
type fullSink struct {
	events
	streamed bool
}

func (f *fullSink) TextChunk(s string) error {
	f.streamed = true
	return f.events.TextChunk(s)
}

func (f *fullSink) Pause() error {
	if f.streamed {
		return errDiskFull
	}
	return nil
}

// Verify that the replay model and the OpenAI-compatible one pass the
// Sink's failure up as it is: the storage error, which the agent answers
// with its own code, not a model error naming the fixture or the endpoint.
func TestSinkFailureIsNotTheModels(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"chunks":[{"text":"one"},{"delayMs":1},{"text":"two"}]}`+"\n"), 0o644))
	replay, err := NewReplay(path)
	require.NoError(t, err)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"choices":[{"delta":{"content":"one"}}]}` + "\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	openai, err := NewOpenAI(srv.URL+"/v1", nil, []string{"m"}, "m", slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	for name, m := range map[string]Model{"replay": replay, "openai": openai} {
		conv := NewConversation(m)
		conv.Add(Message{Role: "user", Text: "hi"})
		sink := &fullSink{}
		_, err := m.Complete(context.Background(), &Request{Conv: conv}, sink)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, errDiskFull, "%s: the sink's own error", name)
		var rpc *jrpc2.Error
		assert.False(t, errors.As(err, &rpc), "%s: not a model error: %v", name, err)
		assert.False(t, strings.Contains(err.Error(), "replay fixture"), "%s: %v", name, err)
	}
}
