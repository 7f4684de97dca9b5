// main_test.go tests the command line: flags, their errors, and --trace.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify what each command line does: status, stdout, stderr. --help and
// --version print to stdout (acpbridge --help | less); errors to stderr.
func TestMain_flags(t *testing.T) {
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{[]string{"--version"}, 0, "acpbridge " + version, ""},
		{[]string{"--help"}, 0, "-state-dir DIR", ""},
		{[]string{"-h"}, 0, "Usage: acpbridge [flags]", ""},
		{[]string{"--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"--log-level", "loud"}, 2, "", "--log-level"},
		{[]string{"--max-turn-requests", "0"}, 2, "", "--max-turn-requests must be at least 1"},
		{[]string{"--trace", "/no/such/dir/trace"}, 2, "", "--trace"},
		{[]string{"--record", "/no/such/dir/rec"}, 2, "", "--record"},
	} {
		var stdout, stderr bytes.Buffer
		caught := make(chan struct{})
		close(caught)
		status := run(context.Background(), caught, nil, c.args, strings.NewReader(""), &stdout, &stderr)
		assert.Equal(t, c.status, status, "%v: status", c.args)
		if c.stdout == "" {
			assert.Empty(t, stdout.String(), "%v: stdout", c.args)
		} else {
			assert.Contains(t, stdout.String(), c.stdout, "%v: stdout", c.args)
		}
		assert.Contains(t, stderr.String(), c.stderr, "%v: stderr", c.args)
	}
}

// Verify that a model spec acpbridge cannot use does not stop it before
// initialize: it serves, session/new works, and each prompt is answered
// with an error saying what is wrong and how to fix it; EOF exits 0.
func TestMain_modelErrorWaits(t *testing.T) {
	for _, c := range []struct {
		spec   []string
		phrase string
	}{
		{[]string{"--model", "gpt-4"}, "use replay:PATH or openai:MODEL"},
		{[]string{"--model", "claude:x"}, `unknown model kind "claude"`},
		{[]string{"--model", "replay:fx/missing.jsonl"}, "fx/missing.jsonl does not exist"},
		{[]string{"--model", "openai:m", "--base-url", "localhost:11434"}, "not an http or https URL"},
	} {
		ta := startAgent(t, c.spec...)
		sid := ta.newSession()
		r := decodeResponse(t, ta.call(prompt(2, sid, "hi")))
		require.NotNil(t, r.Error, "%v", c.spec)
		assert.Equal(t, 1004, r.Error.Code)
		assert.Contains(t, r.Error.Message, c.phrase)
		assert.Contains(t, r.Error.Message, "Fix --model")
		ta.close()
	}
}

// Verify that the environment gives what the flags give.
func TestMain_environment(t *testing.T) {
	state := t.TempDir()
	t.Setenv("ACPBRIDGE_STATE_DIR", state)
	t.Setenv("ACPBRIDGE_MODEL", "replay:fixtures/hello.jsonl")
	t.Setenv("OPENAI_BASE_URL", "http://localhost:1/v1")
	a, _, code := setup(nil, &bytes.Buffer{}, &bytes.Buffer{})
	require.NotNil(t, a, "status %d", code)
	assert.Equal(t, filepath.Join(state, "sessions"), a.store.Dir)
	assert.Equal(t, "replay:hello.jsonl", a.model.DefaultName())
	assert.Equal(t, "http://localhost:1/v1", a.cfg.baseURL)
}

// Verify --trace: one JSON line per message, in and out, with its time,
// the process's pid, its direction and the message itself.
func TestMain_trace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	ta := startAgent(t, "--trace", trace)
	ta.call(initLine)
	ta.send(`not json`)
	ta.await(`{"id":null}`)
	ta.close()
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	var dirs []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Time string
			Pid  int
			Dir  string
			Msg  json.RawMessage
		}
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		assert.NotEmpty(t, e.Time)
		assert.Equal(t, os.Getpid(), e.Pid, "the pid tells apart processes sharing a trace file")
		dirs = append(dirs, e.Dir+" "+string(e.Msg)[:min(30, len(e.Msg))])
	}
	assert.Equal(t, []string{
		`in {"jsonrpc":"2.0","id":0,"metho`,
		`out {"jsonrpc":"2.0","id":0,"resul`,
		`in "not json"`,
		`out {"jsonrpc":"2.0","id":null,"er`,
	}, dirs)
}
