// main_test.go tests the command line: flags, their errors, and --trace.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
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
		{[]string{"--help"}, 0, "\n  --state-dir DIR\n", ""},
		{[]string{"--help"}, 0, "  --spares N\n    \twith --fanout: N children kept started for the next threads (default 2, or 1 with -- CMD)\n", ""},
		{[]string{"--spares", "-1"}, 2, "", `"-1" is not a count`},
		{[]string{"--help"}, 0, "acpbridge scenario serve", ""},
		{[]string{"help"}, 0, "Usage: acpbridge [flags]", ""},
		{[]string{"-h"}, 0, "Usage: acpbridge [flags]", ""},
		{[]string{"--bogus"}, 2, "", "acpbridge: flag provided but not defined: --bogus; see acpbridge --help\n"},
		{[]string{"extra"}, 2, "", `unexpected argument "extra"; see acpbridge --help`},
		{[]string{"--log-level", "loud"}, 2, "", "--log-level"},
		{[]string{"--max-turn-requests", "0"}, 2, "", "--max-turn-requests must be at least 1"},
		{[]string{"--trace", "/no/such/dir/trace"}, 2, "", "--trace"},
		{[]string{"--record", "/no/such/dir/rec"}, 2, "", "--record"},
		{[]string{"--fanout", "--model", "openai:m", "--record", "r.jsonl", "--spares", "1", "--", "some-agent", "--model", "x"}, 2, "",
			"acpbridge: --model, --record: acpbridge's own agent's, which --fanout -- CMD does not run"},
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
		if c.status == 2 {
			assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: a usage error is one line", c.args)
		}
	}
}

// Verify every subcommand's help: usage on stdout, every flag once with
// its default once, as it is typed (--name), status 0.
func TestMain_subcommandHelp(t *testing.T) {
	for _, args := range [][]string{{"scenario", "--help"}, {"scenario", "help"}, {"scenario", "run", "--help"}, {"scenario", "serve", "--help"}, {"scenario", "record", "--help"}, {"setup", "--help"}, {"--fanout", "setup", "--help"}} {
		var stdout, stderr bytes.Buffer
		caught := make(chan struct{})
		close(caught)
		status := run(context.Background(), caught, nil, args, strings.NewReader(""), &stdout, &stderr)
		assert.Equal(t, 0, status, "%v", args)
		assert.Contains(t, stdout.String(), "Usage:", "%v", args)
		assert.Empty(t, stderr.String(), "%v", args)
		assert.NotContains(t, stdout.String(), "\n  -t", "%v: single-dash flags", args)
		for _, l := range strings.Split(stdout.String(), "\n") {
			assert.LessOrEqual(t, strings.Count(l, "(default "), 1, "%v: %q", args, l)
		}
	}
	var stdout, stderr bytes.Buffer
	caught := make(chan struct{})
	close(caught)
	status := run(context.Background(), caught, nil, []string{"scenario", "run", "--bogus"}, strings.NewReader(""), &stdout, &stderr)
	assert.Equal(t, 2, status)
	assert.Equal(t, "acpbridge scenario run: flag provided but not defined: --bogus; see acpbridge scenario run --help\n", stderr.String())
}

// Verify the version of a VCS build names its commit.
func TestMain_versionNamesTheCommit(t *testing.T) {
	out, err := exec.Command(binary(t), "--version").Output()
	require.NoError(t, err)
	rev, gerr := exec.Command("git", "rev-parse", "HEAD").Output()
	if gerr != nil { // not a git checkout (a source archive): it says so
		assert.Contains(t, string(out), "no commit stamped")
		return
	}
	assert.Contains(t, string(out), "acpbridge "+version+" (commit "+string(rev[:12])+", ")

	// Stamping turned off in a checkout is not said to be a build outside
	// one.
	bin := filepath.Join(t.TempDir(), "acpbridge")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := build.CombinedOutput()
	require.NoError(t, err, "%s", b)
	out, err = exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "(no commit stamped: built outside a git checkout, or with -buildvcs=false)")
}

// Verify the misconfigurations said on stderr at start, each naming what
// to fix, while the process still serves.
func TestMain_misconfigurationAtStart(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--model", "gpt-4.1-mini"}, "use --model openai:gpt-4.1-mini"},
		{[]string{"--model", "openai:m", "--base-url", "localhost:11434/v1"}, `--base-url \"localhost:11434/v1\" is not an http or https URL`},
		{[]string{"--model", "openai:m"}, "not signed in: sessions will ask the editor to sign in"},
	} {
		ta := startAgent(t, c.args...)
		ta.call(initLine)
		assert.Contains(t, ta.stderr.String(), c.says, "%v", c.args)
		ta.close()
	}
}

// Verify that a model spec acpbridge cannot use does not stop it before
// initialize: it serves, session/new works, and each prompt is answered
// with an error saying what is wrong and how to fix it; EOF exits 0.
func TestMain_modelErrorWaits(t *testing.T) {
	for _, c := range []struct {
		spec        []string
		phrase, fix string
	}{
		{[]string{"--model", "gpt-4"}, "use --model openai:gpt-4", "Fix --model"},
		{[]string{"--model", "claude:x"}, `unknown model kind "claude"`, "Fix --model"},
		{[]string{"--model", "replay:fx/missing.jsonl"}, "fx/missing.jsonl does not exist", "Fix --model"},
		{[]string{"--model", "openai:m", "--base-url", "localhost:11434"}, "not an http or https URL", "Fix --base-url"},
	} {
		ta := startAgent(t, c.spec...)
		sid := ta.newSession()
		r := decodeResponse(t, ta.call(prompt(2, sid, "hi")))
		require.NotNil(t, r.Error, "%v", c.spec)
		assert.Equal(t, 1004, r.Error.Code)
		assert.Contains(t, r.Error.Message, c.phrase)
		assert.Contains(t, r.Error.Message, c.fix)
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

// Verify that --fanout builds no single-session agent: the router serves
// no session, so it neither opens --record's file nor asks the model's
// server anything; its children do. The plain agent, given the same
// flags, opens the file at its start.
func TestMain_fanoutBuildsNoAgent(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	flags := func(rec string) []string {
		return []string{"--model", "openai:gpt-test", "--base-url", srv.URL + "/v1", "--record", rec}
	}
	rec := filepath.Join(t.TempDir(), "router.jsonl")
	router := startProcess(t, nil, append([]string{"--fanout", "--spares", "0"}, flags(rec)...)...)
	router.call(initLine)
	router.close()
	_, err := os.Stat(rec)
	assert.True(t, os.IsNotExist(err), "--record's file is the children's to open")
	assert.Zero(t, asked.Load(), "the router asks the model's server nothing")

	rec = filepath.Join(t.TempDir(), "agent.jsonl")
	agent := startProcess(t, nil, flags(rec)...)
	agent.call(initLine)
	agent.close()
	assert.FileExists(t, rec, "the agent opens --record's file at its start")
}
