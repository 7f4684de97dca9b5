// scenario_linux_test.go tests what a comparison reads of an agent's
// processes from /proc: the program a wrapper script started.

package main

import (
	"acpbridge/internal/shellword"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
	out, err := exec.Command(bin, "scenario", "run", "--agent", "acpbridge="+bin, "--agent", "wrapped=sh "+wrapper,
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
