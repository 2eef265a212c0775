//go:build linux

package pagecache

import (
	"os"
	"syscall"
)

// AdviseWillNeed asks the kernel to start reading bytes [off, end) of the
// mapping m into memory (madvise MADV_WILLNEED), for the whole pages that
// hold them. m starts on a page boundary, and 0 <= off, end <= len(m).
func AdviseWillNeed(m []byte, off, end int) error {
	if off >= end {
		return nil
	}
	off -= off % os.Getpagesize()
	return syscall.Madvise(m[off:end], syscall.MADV_WILLNEED)
}
