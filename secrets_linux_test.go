// secrets_linux_test.go checks, on the binary, that a command acpbridge
// runs cannot read the key from acpbridge's own environment.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that a model-run command reading /proc/$PPID/environ (the
// environment acpbridge started with, which holds the key) is refused:
// acpbridge is not dumpable. As root, which may read any process's, the
// agent runs as nobody, as a user's agent runs as the user; the command's
// output reaches the client, so the key would show there.
func TestSecrets_environUnreadable(t *testing.T) {
	t.Parallel()
	command := `if cat /proc/$PPID/environ >/dev/null 2>&1; then echo readable; else echo unreadable; fi; cat /proc/$PPID/environ 2>/dev/null | tr '\0' '\n' | grep -c OPENAI_API_KEY`
	dir, err := os.MkdirTemp("", "acpbridge-environ")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	fixture := filepath.Join(dir, "replay.jsonl")
	require.NoError(t, os.WriteFile(fixture, []byte(fmt.Sprintf(
		`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q}}}]}`+"\n"+`{"chunks":[{"text":"Done."}]}`+"\n", command)), 0o644))
	p := startProcessWith(t, nil, func(cmd *exec.Cmd, ta *testAgent) {
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey)
		if os.Geteuid() != 0 {
			return
		}
		// nobody needs the binary, the cwd and the state directory. The
		// binary's own directory is opened to it (a copy could be busy:
		// a parallel test's fork holds the copy's write descriptor until
		// its exec, and exec fails with ETXTBSY).
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(binary(t)), 0o755))
		ta.cwd, ta.state = filepath.Join(dir, "cwd"), filepath.Join(dir, "state")
		for _, d := range []string{ta.cwd, ta.state} {
			require.NoError(t, os.Mkdir(d, 0o777))
			require.NoError(t, os.Chown(d, 65534, 65534))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}, "--model", "replay:"+fixture)
	sid := p.newSession()
	p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	p.send(prompt(3, sid, "read acpbridge's environment"))
	ups, r := p.updatesUntil(3)
	require.Nil(t, r.Error)
	out := strings.Join(ups, "\n")
	assert.Contains(t, out, `Output:\nunreadable\n0\n`, "the command could not read it")
	p.close()
	for _, l := range p.got {
		assert.NotContains(t, string(l), testKey)
	}
}
