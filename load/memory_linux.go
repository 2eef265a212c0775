package load

import (
	"math/bits"
	"syscall"
)

// mapMemory returns n bytes of an anonymous private mapping, or nil where
// there is none: on a 32-bit system, whose address space the free mappings
// would hold, or if the system refuses.
func mapMemory(n int) []byte {
	if bits.UintSize < 64 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// dropPages gives the pages of mapping b back to the system: it reads
// zeros from then on, each page faulted in anew when written.
func dropPages(b []byte) {
	_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
}
