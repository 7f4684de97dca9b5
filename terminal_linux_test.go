// terminal_linux_test.go checks what acpbridge says when typed at a shell.

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Verify that with stdin a terminal acpbridge says on stderr, in one line,
// what it is and who starts it, writes nothing to stdout, and exits 0 at
// the terminal's end of input (Ctrl-D).
func TestTerminal_hint(t *testing.T) {
	t.Parallel()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer master.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer tty.Close()

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary(t), "--state-dir", t.TempDir())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, &stderr
	require.NoError(t, cmd.Start())
	_, err = master.Write([]byte{4}) // Ctrl-D: the end of input
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), "exit status; stderr:\n%s", stderr.String())
	assert.Empty(t, stdout.String(), "stdout is the protocol's")
	assert.Contains(t, stderr.String(), "acpbridge speaks ACP (JSON-RPC, one message a line) on stdin and stdout: an editor (Zed's agent_servers) or acpx starts it; see its README")
}
