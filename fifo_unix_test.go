//go:build unix

// fifo_unix_test.go makes the FIFOs that tests put where a file is expected.

package main

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o600))
}
