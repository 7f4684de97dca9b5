// gone_linux_test.go waits for a process to end through a pidfd, for the
// process tests that run on Linux.

package main

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// assertGone waits (bounded) until pid has ended: a pidfd becomes
// readable when its process terminates, zombie or reaped.
func assertGone(t *testing.T, pid int, what string) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // no such process: gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 5000)
	for err == unix.EINTR {
		n, err = unix.Poll(fds, 5000)
	}
	if err != nil || n == 0 {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("%s (pid %d) outlived acpbridge", what, pid)
	}
}
