//go:build unix

// scenario_signal_unix_test.go checks that `scenario run` and `scenario
// serve` end on a signal.

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that SIGTERM stops a long --repeat run: it exits 1, says it was
// stopped, and writes --json with the runs so far.
func TestScenario_runStopsOnSignal(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "runs.json")
	cmd := scenarioRun(binary(t), "--repeat", "100000", "--json", out, "fixtures/busy_turn.txtar")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	for seen := 0; seen < 2 && lines.Scan(); { // the warm-up run, then a counted one
		if strings.HasPrefix(lines.Text(), "ok ") {
			seen++
		}
	}
	go func() {
		for lines.Scan() {
		}
	}()
	assert.Equal(t, 1, exitOnSignal(t, cmd, stderr.String))
	assert.Contains(t, stderr.String(), "acpbridge scenario run: stopped by a signal after")
	b, err := os.ReadFile(out)
	require.NoError(t, err, "--json written with what ran")
	var cmp struct {
		Scenarios []struct {
			Results []struct{ Runs []json.RawMessage }
		}
	}
	require.NoError(t, json.Unmarshal(b, &cmp))
	require.Len(t, cmp.Scenarios, 1)
	assert.NotEmpty(t, cmp.Scenarios[0].Results[0].Runs)
}

// Verify that SIGTERM stops `scenario serve` waiting on a silent client:
// it exits 1 and says it was stopped.
func TestScenario_serveStopsOnSignal(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary(t), "scenario", "serve", "--timeout", "10m", "--report", filepath.Join(t.TempDir(), "r.txt"), "fixtures/busy_turn.txtar")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	// The file's first line: its answer on stdout says serve plays (and
	// catches signals) before the signal is sent, while it waits for the
	// client's next line.
	_, err = stdin.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n"))
	require.NoError(t, err)
	answer, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, answer, `"id":0`)
	assert.Equal(t, 1, exitOnSignal(t, cmd, stderr.String))
	assert.Contains(t, stderr.String(), "stopped by a signal")
}

// exitOnSignal sends cmd SIGTERM and returns its exit status, failing the
// test (with its stderr) if it does not end.
func exitOnSignal(t *testing.T, cmd *exec.Cmd, stderr func() string) int {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(hang):
		cmd.Process.Kill()
		t.Fatalf("%s did not end on SIGTERM; stderr: %s", strings.Join(cmd.Args, " "), stderr())
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}
