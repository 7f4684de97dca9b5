//go:build unix

// gone_unix_test.go tells whether a process still exists.

package main

import (
	"errors"
	"syscall"
)

func processGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
