// secrets_test.go checks that the API key appears in no log, trace or
// error, even when the server echoes it, and that the trace file is 0600.

package main

import (
	"fmt"
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

// Verify that a command the model runs does not inherit the provider's
// key (a model that runs `printenv OPENAI_API_KEY` would put it into the
// client's messages, the log and a recording), that --pass-env passes it
// on purpose (its output is redacted all the same), and that other
// variables pass.
func TestSecrets_commandsGetNoKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("ACPBRIDGE_TEST_OTHER", "visible")
	command := `echo "key length=${#OPENAI_API_KEY} other=$ACPBRIDGE_TEST_OTHER"`
	fixture := writeFixture(t,
		fmt.Sprintf(`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q}}}]}`, command),
		`{"chunks":[{"text":"Ran."}]}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "key length=0 other=visible"},
		{[]string{"--pass-env", "OPENAI_API_KEY"}, fmt.Sprintf("key length=%d other=visible", len(testKey))},
	} {
		ta := startAgent(t, append([]string{"--model", "replay:" + fixture}, c.args...)...)
		sid := ta.newSession()
		ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
		ta.send(prompt(3, sid, "run it"))
		ups, r := ta.updatesUntil(3)
		require.Nil(t, r.Error)
		assert.Contains(t, strings.Join(ups, "\n"), c.want, "with %v", c.args)
		ta.close()
	}
}

// Verify that a prompt with more content blocks than --max-prompt-blocks
// is refused with -32602 naming the flag, and the session serves on.
func TestSecrets_promptBlocksCapped(t *testing.T) {
	ta := startAgent(t, "--model", "replay:"+writeFixture(t, `{"chunks":[{"text":"ok"}]}`), "--max-prompt-blocks", "3")
	sid := ta.newSession()
	blocks := strings.Repeat(`{"type":"text","text":"x"},`, 4)
	r := decodeResponse(t, ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[%s]}}`, sid, strings.TrimSuffix(blocks, ","))))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32602, r.Error.Code)
	assert.Contains(t, r.Error.Message, "has 4 content blocks; acpbridge takes at most 3 in one prompt (--max-prompt-blocks)")
	_, r = ta.turnUpdates(3, sid, "one block")
	assert.Nil(t, r.Error)
}

// Verify that the key's value is redacted from what a tool returns before
// it goes anywhere: a command that prints a file holding the key shows
// [OPENAI_API_KEY] to the client, the session log, the trace, the
// recording and the next model request (the fixture's expect checks it).
func TestSecrets_toolOutputRedacted(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", testKey)
	fixture := writeFixture(t,
		`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":"cat .env"}}}]}`,
		`{"expect":"KEY=[OPENAI_API_KEY]","chunks":[{"text":"Read it."}]}`)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	ta := startAgent(t, "--model", "replay:"+fixture, "--trace", trace, "--record", rec)
	require.NoError(t, os.WriteFile(filepath.Join(ta.cwd, ".env"), []byte("KEY="+testKey+"\n"), 0o600))
	sid := ta.newSession()
	ta.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	ta.send(prompt(3, sid, "read the env file"))
	ups, r := ta.updatesUntil(3)
	require.Nil(t, r.Error, "the model saw the redacted output (the fixture's expect)")
	assert.Contains(t, strings.Join(ups, "\n"), "KEY=[OPENAI_API_KEY]", "the client sees the placeholder")
	ta.close()
	for _, l := range ta.got {
		assert.NotContains(t, string(l), testKey, "a message to the client")
	}
	for _, path := range []string{trace, rec, filepath.Join(ta.state, "sessions", sid+".jsonl")} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.NotContains(t, string(b), testKey, path)
	}
}

// Verify that a server's error echoing the key where the message is
// clipped shows none of the key: it is redacted before the clip.
func TestSecrets_keyAcrossTheClip(t *testing.T) {
	echo := filepath.Join("fixtures/openai", "echo_key_long.json")
	require.NoError(t, os.WriteFile(echo, []byte(`{"error":{"message":"`+strings.Repeat("x", 480)+testKey+`"}}`), 0o644))
	t.Cleanup(func() { os.Remove(echo) })
	f := newFakeOpenAI(t, fakeReply{status: 401, file: "echo_key_long.json"})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	_, r := ta.turnUpdates(2, sid, "hi")
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, strings.Repeat("x", 400), "the server's message, clipped")
	assert.NotContains(t, r.Error.Message, testKey[:8], "no part of the key")
	ta.close()
	for _, l := range ta.got {
		assert.NotContains(t, string(l), testKey[:8], "a message to the client")
	}
}
