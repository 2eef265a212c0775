//go:build unix

package mmap

import (
	"os"
	"syscall"
)

// Supported reports whether Map maps files on this platform.
const Supported = true

func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
