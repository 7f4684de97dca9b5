// signin_pty_linux_test.go runs acpbridge setup as an editor's terminal
// sign-in does: in a pseudo-terminal, answering its questions as a user
// types them.

package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"acpbridge/internal/signin"
)

// terminal is a command in a pseudo-terminal, and what its screen shows.
type terminal struct {
	t    *testing.T
	tty  *os.File // the terminal's controlling side
	cmd  *exec.Cmd
	mu   sync.Mutex
	seen bytes.Buffer
	more chan struct{} // a signal whenever output arrives
}

func startTerminal(t *testing.T, env []string, args ...string) *terminal {
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	tty, err := pty.Start(cmd)
	require.NoError(t, err)
	term := &terminal{t: t, tty: tty, cmd: cmd, more: make(chan struct{}, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			term.mu.Lock()
			term.seen.Write(buf[:n])
			term.mu.Unlock()
			select {
			case term.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); tty.Close() })
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.seen.String()
}

// await waits until the screen shows s.
func (term *terminal) await(s string) {
	term.t.Helper()
	deadline := time.After(hang)
	for !strings.Contains(term.screen(), s) {
		select {
		case <-term.more:
		case <-deadline:
			term.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, term.screen())
		}
	}
}

// answer waits for prompt, then types text and Enter.
func (term *terminal) answer(prompt, text string) {
	term.t.Helper()
	term.await(prompt)
	_, err := io.WriteString(term.tty, text+"\r")
	require.NoError(term.t, err)
}

func (term *terminal) exit() int {
	term.cmd.Wait()
	return term.cmd.ProcessState.ExitCode()
}

// Verify acpbridge setup in a terminal, as the editor's sign-in runs it
// (the registry entry's args, then setup): it asks for the endpoint, the
// key without echoing it, and the model from the endpoint's list; it
// stores the three 0600. A refused key exits non-zero with the endpoint's
// words and stores nothing; Ctrl-C at the key leaves the terminal echoing.
func TestSetup_terminal(t *testing.T) {
	t.Parallel()
	const key = "sk-typed-5e6f7a8b9c"
	_, endpoint := keyedOpenAI(t, key)
	config := t.TempDir()
	file := filepath.Join(config, "acpbridge", signin.FileName)

	term := startTerminal(t, signInEnv(config), "--fanout", "setup")
	term.answer("Endpoint [https://api.openai.com/v1]: ", endpoint)
	term.answer("API key (not shown", "sk-wrong-typed")
	assert.Equal(t, 1, term.exit())
	term.await("refused the key (401 Unauthorized): Incorrect API key provided") // what it wrote before its end, read
	assert.NotContains(t, term.screen(), "sk-wrong-typed", "the key is not echoed")
	_, err := os.Stat(file)
	assert.True(t, os.IsNotExist(err), "nothing stored")

	term = startTerminal(t, signInEnv(config), "setup")
	term.answer("Endpoint [", endpoint)
	term.answer("API key (not shown", key)
	term.await("gpt-4.1-mini") // the endpoint's list, numbered
	term.answer("Model (a number or a name): ", "2")
	require.Equal(t, 0, term.exit(), term.screen())
	term.await("Signed in: " + endpoint + " with the model gpt-4.1-mini")
	assert.NotContains(t, term.screen(), key, "the key is not echoed")
	got, err := signin.Load(file)
	require.NoError(t, err)
	assert.Equal(t, signin.Stored{Endpoint: endpoint, Model: "gpt-4.1-mini", Key: key}, got)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// Ctrl-C while the key is asked: nothing stored, the terminal echoes
	// again (a shell after it shows what is typed).
	term = startTerminal(t, signInEnv(t.TempDir()), "setup")
	term.answer("Endpoint [", endpoint)
	term.await("API key (not shown")
	require.NoError(t, term.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 130, term.exit())
	term.await("stopped; nothing was stored")
	tios, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	assert.NotZero(t, tios.Lflag&unix.ECHO, "the terminal echoes again")
}
