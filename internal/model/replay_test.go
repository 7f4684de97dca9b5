// replay_test.go checks what the replay model serves for each shape of
// entry, where a session continues in the fixture, and a fixture on a pipe.

package model

import (
	"acpbridge/internal/acp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creachadair/jrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// events is a Sink that writes down what it is given.
type events struct {
	got   []string
	calls []ToolCall
	state json.RawMessage // the last KeepState
}

func (e *events) TextChunk(s string) error    { e.got = append(e.got, "text "+s); return nil }
func (e *events) ThoughtChunk(s string) error { e.got = append(e.got, "thought "+s); return nil }
func (e *events) ToolCall(tc ToolCall) {
	e.calls = append(e.calls, tc)
	e.got = append(e.got, fmt.Sprintf("call %s %s %s", tc.ID, tc.Name, tc.Input))
}
func (e *events) Retrying(string) {}

func (e *events) AddUsage(u Usage) {
	e.got = append(e.got, fmt.Sprintf("usage {InputTokens:%d OutputTokens:%d}", u.InputTokens, u.OutputTokens))
}
func (e *events) Pause() error { return nil }
func (e *events) KeepState(s json.RawMessage) error {
	e.state = s
	return nil
}

// serveAll replays every entry of lines and writes down what each served.
func serveAll(t *testing.T, lines []string) []string {
	path := filepath.Join(t.TempDir(), "f.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	m, err := NewReplay(path)
	require.NoError(t, err)
	conv := NewConversation(m)
	conv.Add(Message{Role: "user", Text: "please read f.txt"})
	var out []string
	for i := range lines {
		var e events
		stop, err := m.Complete(context.Background(), &Request{Conv: conv}, &e)
		errText := ""
		if err != nil {
			errText = err.Error()
		}
		errText = strings.ReplaceAll(errText, path, "FIXTURE")
		out = append(out, fmt.Sprintf("entry %d: %q stop %q err %q", i, e.got, stop, errText))
	}
	return out
}

// Verify what each shape of entry serves, errors included, and that an
// entry longer than any read buffer is served the same.
func TestReplay_entries(t *testing.T) {
	entries := []string{
		`{"chunks":[{"text":"Hello"},{"thought":"hm \"q\" \u00e9"},{"text":"a\nb"}]}`,
		`{"expect":"read f.txt","chunks":[{"toolCall":{"id":"c1","name":"read_file","input":{"path":"f.txt"}}}]}`,
		`{"chunks":[{"toolCall":{"id":"c2","name":"list_directory"}},{"usage":{"inputTokens":3,"outputTokens":4}}],"stop":"end_turn"}`,
		`{"chunks":[{"text":"x","thought":"y"}]}`,
		`{"chunks":[{"text":"before"},{"toolCall":{"id":"","name":"n"}}]}`,
		`{"expect":"not in the conversation","chunks":[{"text":"never"}]}`,
		`{"chunks":[],"stop":"max_tokens"}`,
		`{"chunks":[{"text":"t"}],"stop":"sideways"}`,
		`{"error":"rate limited","chunks":[{"text":"t"}]}`,
		`{"chunks":[{"delayMs":0},{"text":"after a delay"}]}`,
		`{"chunks":[{"text":"t"}],"surprise":1}`,
		`{"chunks":{"text":"t"}}`,
		`{"expect":3}`,
		`[1]`,
	}
	got := serveAll(t, entries)
	for i, want := range []string{
		`["text Hello" "thought hm \"q\" é" "text a\nb"] stop "end_turn" err ""`,
		`["call c1 read_file {\"path\":\"f.txt\"}"] stop "tool_use" err ""`,
		`["call c2 list_directory {}" "usage {InputTokens:3 OutputTokens:4}"] stop "end_turn" err ""`,
		`replay fixture FIXTURE line 4: chunks[0]: a chunk has exactly one of text, thought, toolCall, usage, delayMs"`,
		`["text before"] stop "" err "[1005] replay fixture FIXTURE line 5: chunks[1]: toolCall needs id and name"`,
		`expected the newest message to contain \"not in the conversation\"`,
		`[] stop "max_tokens" err ""`,
		`stop \"sideways\" is not one of end_turn, tool_use, max_tokens, refusal`,
		`model call failed: rate limited (replayed from FIXTURE line 9)`,
		`["text after a delay"] stop "end_turn" err ""`,
		`unknown key \"surprise\" (the keys are expect, chunks, stop, error)`,
		`chunks[0]: chunks must be an array`,
		`expect: json: cannot unmarshal number into Go value of type string`,
		`an entry must be a JSON object`,
	} {
		assert.Contains(t, got[i], want, "entry %d: %s", i, entries[i])
	}
	// The same entries, each longer than any read buffer, serve the same.
	long := make([]string, len(entries))
	for i, e := range entries {
		long[i] = e[:1] + strings.Repeat(" ", 70_000) + e[1:]
	}
	assert.Equal(t, got, serveAll(t, long))
}

// Verify where a session continues: a new session takes the next entry
// the process has not served; a session opened again with the same
// fixture continues after the entries it consumed (also after an entry
// was appended, and in a process that served others since), and with
// another fixture or the consumed entries changed starts at entry 1.
func TestReplay_resume(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.jsonl")
	entry := func(s string) string { return `{"chunks":[{"text":"` + s + `"}]}` + "\n" }
	require.NoError(t, os.WriteFile(path, []byte(entry("one")+"# a comment\n"+entry("two")+entry("three")), 0o644))
	call := func(m *Replay) (string, json.RawMessage) {
		var e events
		_, err := m.Complete(context.Background(), &Request{Conv: &Conversation{}}, &e)
		require.NoError(t, err)
		require.Len(t, e.got, 1)
		return e.got[0], e.state
	}
	m, err := NewReplay(path)
	require.NoError(t, err)
	require.NoError(t, m.Resume(nil))
	got, afterOne := call(m)
	assert.Equal(t, "text one", got)
	got, afterTwo := call(m)
	assert.Equal(t, "text two", got)

	fresh := func() *Replay {
		m, err := NewReplay(path)
		require.NoError(t, err)
		return m
	}
	m2 := fresh()
	require.NoError(t, m2.Resume(afterOne))
	got, _ = call(m2)
	assert.Equal(t, "text two", got, "a session continues after the entries it consumed")
	require.NoError(t, m2.Resume(afterOne))
	got, _ = call(m2)
	assert.Equal(t, "text two", got, "an older session in the same process continues its own position")
	require.NoError(t, m2.Resume(nil))
	got, _ = call(m2)
	assert.Equal(t, "text three", got, "a new session takes the next entry the process has not served")

	require.NoError(t, os.WriteFile(path, []byte(entry("one")+entry("two")+entry("three")+entry("four")), 0o644))
	m3 := fresh()
	require.NoError(t, m3.Resume(afterTwo))
	got, _ = call(m3)
	assert.Equal(t, "text three", got, "an appended entry keeps the position")

	other := filepath.Join(dir, "other.jsonl")
	require.NoError(t, os.WriteFile(other, []byte(entry("another")), 0o644))
	m4, err := NewReplay(other)
	require.NoError(t, err)
	require.NoError(t, m4.Resume(afterTwo))
	got, _ = call(m4)
	assert.Equal(t, "text another", got, "another fixture starts at its first entry")

	require.NoError(t, os.WriteFile(path, []byte(entry("ONE")+entry("two")+entry("three")), 0o644))
	m5 := fresh()
	require.NoError(t, m5.Resume(afterTwo))
	got, _ = call(m5)
	assert.Equal(t, "text ONE", got, "a rewritten fixture starts at its first entry")

	m6 := fresh()
	require.NoError(t, m6.Resume(afterOne))
	got, _ = call(m6)
	assert.Equal(t, "text ONE", got, "a rewrite of the one entry a session consumed is noticed")
}

// Verify that a fixture that is not a regular file (a FIFO nobody writes)
// is refused at once, naming it, rather than read: reading it would hold
// the session's step until a writer came.
func TestReplay_fifoRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, path)
	_, err := NewReplay(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replay fixture "+path+" is not a regular file")
}

// FuzzReplay serves an arbitrary fixture: no panic, no hang (its delays
// end with the call's context), every stop is one a model gives, every
// failure is a model error (1005), every tool call's input is JSON, and
// calls after an error go on from the next entry.
func FuzzReplay(f *testing.F) {
	paths, _ := filepath.Glob("../../fixtures/*.jsonl")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("{\"chunks\":[{\"text\":\"a\"},{\"delayMs\":10}]}\n# c\n\n{\"chunks\":[{\"text\":\"a\",\"thought\":\"b\"}]}\n{\"expect\":\"x\",\"chunks\":[]}\n"))
	f.Add([]byte(`{"chunks":[{"toolCall":{"id":"1","name":"x","input":"not an object"}}],"stop":"refusal"}`))
	f.Fuzz(func(t *testing.T, fixture []byte) {
		path := filepath.Join(t.TempDir(), "f.jsonl")
		require.NoError(t, os.WriteFile(path, fixture, 0o644))
		m, err := NewReplay(path)
		require.NoError(t, err)
		require.NoError(t, m.Resume(nil))
		conv := &Conversation{}
		conv.Add(Message{Role: "user", Text: "hello"})
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			var e events
			stop, err := m.Complete(ctx, &Request{Conv: conv}, &e)
			cancel()
			if err == nil {
				assert.Contains(t, []acp.StopReason{acp.StopEndTurn, acp.StopToolUse, acp.StopMaxTokens, acp.StopRefusal}, stop)
			} else if !errors.Is(err, context.DeadlineExceeded) {
				var rerr *jrpc2.Error
				assert.True(t, errors.As(err, &rerr) && rerr.Code == acp.CodeModelFailed, "error %v", err)
			}
			for _, c := range e.calls {
				assert.True(t, json.Valid(c.Input), "a tool call's input is JSON: %s", c.Input)
			}
		}
	})
}
