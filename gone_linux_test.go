// gone_linux_test.go waits for a process to end through a pidfd, for the
// process tests that run on Linux.

package main

import (
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// assertGone waits (bounded) until pid has ended: a pidfd becomes
// readable when its process terminates, zombie or reaped.
func assertGone(t *testing.T, pid int, what string) {
	t.Helper()
	if !awaitExit(pid, 5*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("%s (pid %d) outlived acpbridge", what, pid)
	}
}

// awaitExit waits up to d for pid to end (zombie or reaped) and reports
// whether it has: its pidfd becomes readable when it terminates.
func awaitExit(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return true // no such process: gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d.Milliseconds()))
	for err == unix.EINTR {
		n, err = unix.Poll(fds, int(d.Milliseconds()))
	}
	return err == nil && n > 0
}
