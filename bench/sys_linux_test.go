//go:build linux

package bench

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for huge pages to back b (madvise MADV_HUGEPAGE), as the
// library does for the memory it reads files into; the kernel rounds it to
// whole pages, or refuses: a hint.
func adviseHuge(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }

// dropFileCache writes f's dirty pages and drops its pages from the page
// cache.
func dropFileCache(f *os.File) {
	unix.Fdatasync(int(f.Fd()))
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// cachedFraction returns the fraction of the pages of f in the page cache,
// as mincore tells.
func cachedFraction(b *testing.B, f *os.File) float64 {
	info, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		b.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return float64(n) / float64(len(vec))
}
