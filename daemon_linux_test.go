// daemon_linux_test.go checks, on the binary, that a command stopped early
// takes with it the daemon it detached.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that a command that times out takes with it what it detached with
// setsid (re-parented to acpbridge, its subreaper, and so no longer below
// the command): the daemon is gone once the tool call has failed, while
// acpbridge still runs.
func TestDaemon_endedWithItsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "acpbridge-daemon-"+filepath.Base(dir))
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(sleep, marker)) // a link, not a copy: a copy's write descriptor, held by a parallel test's fork, makes exec fail (ETXTBSY)
	command := fmt.Sprintf(`(setsid %q 300 &); sleep 100`, marker)
	fixture := writeFixture(t,
		fmt.Sprintf(`{"chunks":[{"toolCall":{"id":"c1","name":"run_command","input":{"command":%q,"timeout_ms":500}}}]}`, command),
		`{"chunks":[{"text":"It timed out."}]}`)
	p := startProcess(t, nil, "--model", "replay:"+fixture)
	sid := p.newSession()
	p.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":%q,"modeId":"bypass"}}`, sid))
	p.send(prompt(3, sid, "start it"))
	ups, r := p.updatesUntil(3)
	require.Nil(t, r.Error)
	require.Contains(t, strings.Join(ups, "\n"), "timed out")
	ps, err := exec.Command("ps", "-eo", "args").Output()
	require.NoError(t, err)
	assert.NotContains(t, string(ps), marker, "the daemon outlived its command")
	p.close()
}
