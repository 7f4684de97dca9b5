//go:build unix

// file_unix.go: the store's files and the session lock on Unix (flock,
// which the kernel drops when the holder dies).

package store

import (
	"errors"
	"os"
	"syscall"
)

// openFile opens a file of the store (mode 0600 when it creates it) as a
// plain blocking file: os.OpenFile would try, and fail, to register a
// regular file with the netpoller, five system calls a file.
// A link is refused (O_NOFOLLOW): the store never follows one. An open
// to write never waits and takes a regular file only: a FIFO put where a
// log was would otherwise hold the session's step until a reader came.
func openFile(path string, flag int) (*os.File, error) {
	writing := flag&(syscall.O_WRONLY|syscall.O_RDWR) != 0
	nonblock := 0
	if writing {
		nonblock = syscall.O_NONBLOCK
	}
	fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|nonblock, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		err = ErrLink
	}
	if err == nil && writing {
		var st syscall.Stat_t
		if err = syscall.Fstat(fd, &st); err == nil && st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			err = errNotRegular
		}
		if err == nil {
			err = syscall.SetNonblock(fd, false)
		}
		if err != nil {
			syscall.Close(fd)
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

var errNotRegular = errors.New("not a regular file; remove it")

// replaceFile renames tmp over path, atomically.
func replaceFile(tmp, path string) error { return os.Rename(tmp, path) }

// lockFile takes f's exclusive lock without waiting; held says that
// another process has it.
func lockFile(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
