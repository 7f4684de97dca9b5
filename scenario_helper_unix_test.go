//go:build unix

// scenario_helper_unix_test.go checks that an agent's background helper
// holds neither `scenario run` nor outlives it.

package main

import (
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
	copyFile(t, sleep, marker, 0o755)
	toy := filepath.Join(dir, "toy.sh")
	require.NoError(t, os.WriteFile(toy, []byte("#!/bin/sh\n(\""+marker+"\" 300 &)\nexec \""+bin+"\" \"$@\"\n"), 0o755))
	out, err := exec.Command(bin, "scenario", "run", "--agent", "toy=sh "+toy+" $FLAGS", "fixtures/plain_turn.txtar").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "1 passed, 0 failed")
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	assert.NotContains(t, string(ps), marker, "the helper was ended with the run")

	out, err = exec.Command(bin, "scenario", "run", "--agent", "./no/such/agent", "fixtures/plain_turn.txtar").CombinedOutput()
	require.Error(t, err)
	assert.True(t, strings.Contains(string(out), "a relative command starts from the run's directory"), "%s", out)
}
