//go:build unix

// fifo_unix_test.go makes the FIFOs that tests put where a file is
// expected, and the one a process writes its events to.

package main

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o600))
}

// eventsPipe makes a FIFO for a process's events (ACPBRIDGE_EVENTS) and
// copies what its writers write to into, until the test ends. The test
// holds it open for writing too, so it never reads an end while the
// processes (a router's children among them) come and go.
func eventsPipe(t testing.TB, into io.Writer) string {
	path := filepath.Join(t.TempDir(), "events")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(into, f)
	}()
	t.Cleanup(func() {
		f.Close()
		<-done
	})
	return path
}
