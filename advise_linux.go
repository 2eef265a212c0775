//go:build linux

package safetensors

import (
	"os"
	"syscall"
)

// adviseWillNeed asks the kernel to start reading bytes [off, end) of the
// mapping m into memory. m starts on a page boundary.
func adviseWillNeed(m []byte, off, end int) error {
	if off >= end {
		return nil
	}
	off -= off % os.Getpagesize()
	return syscall.Madvise(m[off:end], syscall.MADV_WILLNEED)
}
