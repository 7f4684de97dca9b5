// scenario_linux_test.go tests what a comparison reads of an agent's
// processes from /proc: the program a wrapper script started.

package main

import (
	"acpbridge/internal/shellword"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that a comparison records the program an agent's wrapper script
// started, hashed, beside the wrapper's own file: the multi-session agent
// run through `sh wrapper.sh`, which does not exec it.
func TestScenario_wrappedProgramHashed(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	agent := buildMultiAgent(t, filepath.Join(dir, "multi"))
	wrapper := filepath.Join(dir, "wrapper.sh")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\n"+shellword.Quote(agent)+" \"$@\"\nexit $?\n"), 0o755))
	jsonPath := filepath.Join(dir, "runs.json")
	out, err := scenarioRun(bin, "--agent", "acpbridge="+bin, "--agent", "wrapped=sh "+wrapper,
		"--json", jsonPath, "testdata/scenarios/compare_text.txtar").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var got struct {
		Agents []struct {
			Name, Path, SHA256 string
			Program            *struct{ Path, SHA256 string }
		}
	}
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	require.Len(t, got.Agents, 2)
	assert.Nil(t, got.Agents[0].Program, "acpbridge ran itself")
	w := got.Agents[1]
	assert.Equal(t, wrapper, w.Path, "the wrapper, as the command names it")
	require.NotNil(t, w.Program, "the program the wrapper started")
	assert.Equal(t, agent, w.Program.Path)
	exe, err := os.ReadFile(agent)
	require.NoError(t, err)
	sum := sha256.Sum256(exe)
	assert.Equal(t, hex.EncodeToString(sum[:]), w.Program.SHA256)
}

// Verify that `scenario run --threads 2` is bounded against an agent that
// writes for sessions no thread opened: 50,000 updates of 4.8 KB (240 MB)
// at each prompt. The run ends by itself, failing the first thread with
// what the agent wrote for no thread, and its peak RSS stays under
// 150 MiB (what is held of such lines is bounded in total, by bytes); a
// SIGTERM in the middle of the flood ends it at once.
func TestScenario_threadsFloodOfUnknownSessions(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	agent := buildMultiAgent(t, filepath.Join(dir, "multi"))
	// Bounds, not durations: on a loaded machine 240 MB through the
	// multiplexer takes a while, and the run used to hang past them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(begun string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "scenario", "run", "--threads", "2", "--timeout", "2m", "--agent", "multi="+agent, "testdata/scenarios/compare_text.txtar")
		cmd.Env = append(os.Environ(), "MULTIAGENT_FLOOD=50000", "MULTIAGENT_FLOOD_BEGUN="+begun)
		return cmd
	}
	cmd := run("")
	var buf0 bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf0, &buf0
	require.NoError(t, cmd.Start())
	// The run's own peak (VmHWM), read while it runs: its rusage would
	// also count the test process's pages, which a child started with
	// vfork shares until its exec.
	peak := make(chan int)
	go func() {
		hwm := 0
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
			if err != nil || strings.Contains(string(b), "State:\tZ") {
				peak <- hwm
				return
			}
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
					n, _ := strconv.Atoi(strings.Fields(v)[0])
					hwm = max(hwm, n)
				}
			}
			time.Sleep(10 * time.Millisecond) // sampling, not waiting on an event: the peak only grows
		}
	}()
	rss := <-peak
	err := cmd.Wait()
	out := buf0.Bytes()
	require.Error(t, err, "%s", out)
	require.NoError(t, ctx.Err(), "the run ended by itself, within its --timeout")
	assert.Equal(t, 1, cmd.ProcessState.ExitCode(), "%s", out)
	assert.Contains(t, string(out), `"sessionId":"ghost-`, "the first thread's run says what the agent wrote for no thread")
	assert.Contains(t, string(out), "1 passed, 1 failed", "the other thread passes")
	assert.Positive(t, rss, "the run's peak was read")
	assert.Less(t, rss, 150<<10, "the run's peak RSS (KiB) with 240 MB of updates for no thread")

	begun := filepath.Join(dir, "flooding")
	cmd = run(begun)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { _, err := os.Stat(begun); return err == nil }, 3*time.Minute, 10*time.Millisecond, "the agent began its flood")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(hang):
		cmd.Process.Kill()
		t.Fatalf("SIGTERM did not end the run in %v:\n%s", hang, buf.String())
	}
	assert.Contains(t, buf.String(), "stopped by a signal")
}
