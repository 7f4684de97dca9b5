// explore_windows.go: on Windows a walk reads a directory and opens its
// files through the directory's os.Root.

package tools

import (
	"io"
	"io/fs"
	"os"
)

// dirHandle is nothing more than the Root on Windows.
type dirHandle struct{ root *os.Root }

// openDirHandle opens root's directory and reads its entries.
func openDirHandle(root *os.Root) (dirHandle, []fs.DirEntry, error) {
	d, err := root.Open(".")
	if err != nil {
		return dirHandle{}, nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	return dirHandle{root}, entries, err
}

func (h dirHandle) valid() bool { return h.root != nil }

func (dirHandle) close() {}

// open opens the directory's file name for reading when it is a regular
// file, and returns its size.
func (h dirHandle) open(name string) (io.ReadCloser, int64, error) {
	return openRegularSize(h.root, name)
}
