//go:build unix

// explore_unix.go: on Unix a walk reads a directory's entries with their
// types from getdents (reading through os.Root costs a stat for each) and
// opens its files with openat on the directory's descriptor, read with
// plain read(2) (an os.File opened non-blocking costs a poller
// registration each): the syscalls a search makes for a file are those
// ripgrep makes. Names are single path components from the directory
// itself, opened with O_NOFOLLOW, so nothing leaves the workspace.

package tools

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// dirHandle is a directory of the walk, held open outside its Root.
type dirHandle struct {
	f  *os.File // a duplicate of the directory's descriptor
	fd int
}

// openDirHandle opens root's directory and reads its entries.
func openDirHandle(root *os.Root) (dirHandle, []fs.DirEntry, error) {
	d, err := root.Open(".")
	if err != nil {
		return dirHandle{}, nil, err
	}
	defer d.Close()
	// Duplicated close-on-exec at once: a command started meanwhile must
	// not inherit it.
	fd, err := unix.FcntlInt(d.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return dirHandle{}, nil, err
	}
	h := dirHandle{f: os.NewFile(uintptr(fd), d.Name()), fd: fd}
	entries, err := h.f.ReadDir(-1) // types from getdents; fstatat on the descriptor only where it gives none
	if err != nil {
		h.close()
		return dirHandle{}, nil, err
	}
	return h, entries, nil
}

func (h dirHandle) valid() bool { return h.f != nil }

func (h dirHandle) close() {
	if h.f != nil {
		h.f.Close()
	}
}

// open opens the directory's file name for reading when it is a regular
// file, never waiting in the open (a FIFO put there since the listing is
// refused, not opened for good), and returns its size.
func (h dirHandle) open(name string) (io.ReadCloser, int64, error) {
	fd, err := unix.Openat(h.fd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("%s is not a regular file", name)
	}
	return rawFile(fd), st.Size, nil
}

// rawFile is an open file read with read(2).
type rawFile int

func (f rawFile) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f rawFile) Close() error { return unix.Close(int(f)) }
