//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package safetensors

import (
	"os"
	"syscall"
	"unsafe"
)

// openDirect opens the named file for direct I/O (O_DIRECT), which reads
// around the page cache; the file system may refuse it.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
}

// posixFadvDontNeed is POSIX_FADV_DONTNEED on Linux.
const posixFadvDontNeed = 4

// dropCache asks the kernel to drop the cached pages of bytes [off,
// off+n) of f (posix_fadvise POSIX_FADV_DONTNEED); it is a hint, and its
// failure is ignored.
func dropCache(f *os.File, off, n int64) {
	syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), uintptr(n), posixFadvDontNeed, 0, 0)
}

// hugePage is the size of a transparent huge page on the architectures
// this file is built for.
const hugePage = 2 << 20

// adviseHugePages asks the kernel to back the new memory b with huge pages
// (madvise MADV_HUGEPAGE), so that filling it takes one page fault each 2
// MiB rather than each 4 KiB: most of the cost of reading a file into new
// memory. It is a hint, for the whole huge pages inside b.
func adviseHugePages(b []byte) {
	if len(b) < 2*hugePage {
		return
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := int((hugePage - addr%hugePage) % hugePage)
	end := start + (len(b)-start)/hugePage*hugePage
	if end > start {
		syscall.Madvise(b[start:end], syscall.MADV_HUGEPAGE)
	}
}
