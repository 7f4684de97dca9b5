// fifo_windows_test.go: Windows has no FIFOs in the file system, so the
// tests that need one skip there, and a process's events go to a file that
// is read as it grows.

package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mkfifo(t *testing.T, path string) {
	t.Skip("Windows has no FIFOs in the file system")
}

// eventsPipe makes a file for a process's events (ACPBRIDGE_EVENTS) and
// copies what is appended to it into into, until the test ends.
func eventsPipe(t testing.TB, into io.Writer) string {
	path := filepath.Join(t.TempDir(), "events")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			io.Copy(into, f) // what was appended since
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond): // a file gives no signal when it grows
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		f.Close()
	})
	return path
}
