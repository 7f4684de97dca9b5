// replay_test.go checks that an entry read in place (the usual one, whole
// in the read buffer) is served exactly as one streamed through
// json.Decoder (a long one, or one of an unusual shape) is.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// events is a Sink that writes down what it is given.
type events struct{ got []string }

func (e *events) TextChunk(s string) error    { e.got = append(e.got, "text "+s); return nil }
func (e *events) ThoughtChunk(s string) error { e.got = append(e.got, "thought "+s); return nil }
func (e *events) ToolCall(tc ToolCall) {
	e.got = append(e.got, fmt.Sprintf("call %s %s %s", tc.ID, tc.Name, tc.Input))
}
func (e *events) AddUsage(u Usage) { e.got = append(e.got, fmt.Sprintf("usage %+v", u)) }
func (e *events) Pause() error     { return nil }

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

func TestReplay_inPlaceAsStreamed(t *testing.T) {
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
		`{"chunks":[{"text":"t"}],"chunks":[{"text":"again"}]}`,
		`[1]`,
	}
	// The same entries, each longer than the read buffer: white space
	// after its first byte sends it through json.Decoder.
	long := make([]string, len(entries))
	for i, e := range entries {
		long[i] = e[:1] + strings.Repeat(" ", 70_000) + e[1:]
	}
	fast, slow := serveAll(t, entries), serveAll(t, long)
	for i := range entries {
		assert.Equal(t, slow[i], fast[i], "entry %d: %s", i, entries[i])
	}
	assert.Contains(t, fast[0], `"text Hello" "thought hm \"q\" é" "text a\nb"`)
	assert.Contains(t, fast[1], `call c1 read_file {\"path\":\"f.txt\"}`)
}

// Whatever valid chunk it is given, toolCallChunk declines it or reads
// what json.Unmarshal reads.
func FuzzToolCallChunk(f *testing.F) {
	for _, s := range []string{`{"toolCall":{"id":"c1","name":"read_file","input":{"path":"f.txt"}}}`,
		`{"toolCall":{"name":"n","id":"\u0063","input" : [ 1 ] }}`, `{"toolCall":{"ID":"c","name":"n"}}`,
		`{"toolCall":{"id":"c","id":"d"}}`, `{"toolCall":{"id":1}}`, `{"toolCall":null}`, `{"text":"t"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		tc, ok := toolCallChunk([]byte(s))
		if !ok {
			return
		}
		var want Chunk
		require.NoError(t, json.Unmarshal([]byte(s), &want), "%s: read in place, but encoding/json fails", s)
		require.NotNil(t, want.ToolCall, s)
		assert.Equal(t, Chunk{ToolCall: want.ToolCall}, want, s)
		assert.Equal(t, *want.ToolCall, tc, s)
	})
}

// Verify that an entry is served as soon as its line has arrived, even in
// pieces: a fixture on a pipe (replay:<(…), a FIFO a harness feeds) that
// stays open gets the end of its next entry only after the one before it
// was served, and is closed only after that one was.
func TestReplay_pipeServesEachLineAsItComes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, path)
	served := []chan struct{}{make(chan struct{}), make(chan struct{})}
	wrote := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			wrote <- err
			return
		}
		defer f.Close()
		second := `{"chunks":[{"text":"second"}]}` + "\n"
		_, err = f.WriteString(`{"chunks":[{"text":"first"}]}` + "\n" + second[:10])
		if err == nil {
			<-served[0]
			_, err = f.WriteString(second[10:])
		}
		wrote <- err
		<-served[1] // the pipe stays open until the second entry was served
	}()
	m, err := NewReplay(path)
	require.NoError(t, err)
	conv := NewConversation(m)
	for i, want := range []string{"text first", "text second"} {
		var e events
		done := make(chan error, 1)
		go func() {
			_, err := m.Complete(context.Background(), &Request{Conv: conv}, &e)
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatalf("serving %q waited for more than its line", want)
		}
		assert.Equal(t, []string{want}, e.got)
		close(served[i])
	}
	require.NoError(t, <-wrote)
}
