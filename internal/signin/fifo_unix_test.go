//go:build unix

// fifo_unix_test.go checks that a FIFO where the sign-in should be is
// refused at once, not opened (which would wait for a writer).

package signin

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that Load refuses a FIFO in the sign-in's place at once, saying
// what to do, instead of waiting for a writer (which would hold every
// session/new of the agent reading it).
func TestLoad_fifoRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, err := Load(path)
	assert.ErrorContains(t, err, "not a regular file")
	assert.ErrorContains(t, err, "run acpbridge setup again")
}
