//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package safetensors

import (
	"os"
	"syscall"
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
