//go:build unix

package safetensors

import (
	"math"
	"os"
	"syscall"
)

// mmapSupported reports whether Open maps files on this platform.
const mmapSupported = true

// mapFile maps the first size bytes of f read-only and returns them with the
// function that unmaps them. The mapping stays valid after f is closed.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size > math.MaxInt {
		return nil, nil, errTooLarge(size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
