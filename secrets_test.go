// secrets_test.go checks that the API key appears in no log, trace or
// error, even when the server echoes it, and that the trace file is 0600.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify the key stays out of stderr (at debug level), the trace, the
// recording and every message the client gets.
func TestSecrets_keyNeverShown(t *testing.T) {
	echo := filepath.Join("fixtures/openai", "echo_key.json")
	require.NoError(t, os.WriteFile(echo, []byte(`{"error":{"message":"Incorrect API key provided: `+testKey+`"}}`), 0o644))
	t.Cleanup(func() { os.Remove(echo) })
	f := newFakeOpenAI(t, fakeReply{status: 401, file: "echo_key.json"}, fakeReply{file: "text.sse"})
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	ta := startOpenAI(t, f, "--trace", trace, "--record", rec, "--log-level", "debug")
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, "Incorrect API key provided: [OPENAI_API_KEY]")
	ta.turnUpdates(3, sid, "again")
	ta.close()
	assert.Equal(t, "Bearer "+testKey, f.request(0).auth, "the key does reach the server")

	for _, l := range ta.got {
		assert.NotContains(t, string(l), testKey, "a message to the client")
	}
	assert.NotContains(t, ta.stderr.String(), testKey, "stderr")
	for _, path := range []string{trace, rec, filepath.Join(ta.state, "sessions", sid+".jsonl")} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.NotContains(t, string(b), testKey, path)
	}
	b, _ := os.ReadFile(trace)
	assert.True(t, strings.Count(string(b), "\n") > 5, "the trace holds the messages")
	fi, err := os.Stat(trace)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "trace file mode")
	fi, err = os.Stat(filepath.Join(ta.state, "sessions"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "state directory mode")
}
