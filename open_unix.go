//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// openRegular opens the named file for reading, and refuses anything but a
// regular file without blocking: opening a FIFO waits for a writer, so the
// file is opened non-blocking, checked, and only then made blocking again.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return checkRegular(f, path)
}

// openRegularIn is openRegular of a file inside root.
func openRegularIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return checkRegular(f, name)
}

// checkRegular returns f, made blocking, if it is a regular file; else it
// closes it and returns an error naming path.
func checkRegular(f *os.File, path string) (*os.File, error) {
	if err := isRegular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), false) })
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}
