//go:build unix

// scenario_helper_unix_test.go checks that an agent's background helper
// holds neither `scenario run` nor outlives it.

package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that `scenario run --agent` whose agent leaves a helper in the
// background holding its stdout and stderr ends (the run waited on the
// pipes for ever) and that the helper does not outlive the run; and that
// a relative agent path that does not start says what it is relative to.
func TestScenario_agentHelperEnded(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "acpbridge-helper-"+filepath.Base(dir))
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(sleep, marker)) // a link, not a copy: a copy's write descriptor, held by a parallel test's fork, makes exec fail (ETXTBSY)
	toy := filepath.Join(dir, "toy.sh")
	require.NoError(t, os.WriteFile(toy, []byte("#!/bin/sh\n(\""+marker+"\" 300 &)\nexec \""+bin+"\" \"$@\"\n"), 0o755))
	out, err := scenarioRun(bin, "--agent", "toy=sh "+toy+" $FLAGS", "fixtures/plain_turn.txtar").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "1 passed, 0 failed")
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	assert.NotContains(t, string(ps), marker, "the helper was ended with the run")

	out, err = scenarioRun(bin, "--agent", "./no/such/agent", "fixtures/plain_turn.txtar").CombinedOutput()
	require.Error(t, err)
	assert.True(t, strings.Contains(string(out), "a relative command starts from the run's directory"), "%s", out)
}

// Verify that two `scenario record --append` runs that overlap do not lose
// a part in silence: the first writes FILE, the second finds FILE changed
// since it read it, keeps its part beside it and says so, exit 1.
func TestScenario_overlappingAppends(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "s.txtar")
	start := func() (*exec.Cmd, io.WriteCloser, *bufio.Reader, *bytes.Buffer) {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "scenario", "record", "--append", "--out", out, "--", bin, "--state-dir", filepath.Join(dir, "state"))
		cmd.Dir, cmd.Stderr = dir, &stderr
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		r := bufio.NewReader(stdout)
		_, err = io.WriteString(in, initLine+"\n")
		require.NoError(t, err)
		_, err = r.ReadBytes('\n') // the initialize answer: both recorders have read FILE
		require.NoError(t, err)
		return cmd, in, r, &stderr
	}
	a, aIn, _, aErr := start()
	b, bIn, _, bErr := start()
	aIn.Close()
	require.NoError(t, a.Wait(), "%s", aErr)
	assert.Contains(t, aErr.String(), "wrote "+out)
	bIn.Close()
	err := b.Wait()
	require.Error(t, err, "the second recorder")
	assert.Contains(t, bErr.String(), "changed while this recording ran")
	asides, _ := filepath.Glob(out + ".part-*")
	assert.Len(t, asides, 1, "its part is kept beside FILE")
}
