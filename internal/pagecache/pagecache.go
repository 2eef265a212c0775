// Package pagecache is what the Loader asks of the operating system: which
// pages of a file the page cache holds (cachestat(2), or mincore(2) on a
// mapping that is never touched), dropping them (posix_fadvise
// POSIX_FADV_DONTNEED), reading a file without readahead
// (POSIX_FADV_RANDOM) or around the cache (direct I/O, O_DIRECT, and its
// alignment), and advice about memory (madvise MADV_HUGEPAGE and
// MADV_WILLNEED); and what the writers ask of it (atomicfile): to start
// writing a file's dirty pages to disk as it is written (sync_file_range
// SYNC_FILE_RANGE_WRITE).
//
// The advice and the drops are hints, whose failure is ignored (but for
// AdviseWillNeed's, which Reader.Prefetch reports); a Probe never reads a
// file's data, and a failing one says that nothing is cached. Where the
// system, or the standard library on it, offers none of these calls (on
// Linux, all of them but MADV_WILLNEED need a 64-bit architecture; every
// other system has none), the functions do nothing, OpenDirect fails and
// NewProbe returns nil.
package pagecache

import "unsafe"

// BlockSize is the alignment of direct I/O: the offset in the file, the
// length and the memory address of a read with a file from OpenDirect are
// multiples of it.
const BlockSize = 4096

// Phase returns the address of p's first byte modulo BlockSize: 0 for
// memory a direct read may start at.
func Phase(p []byte) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(p))) % BlockSize)
}

// Aligned reports whether p may be read with direct I/O at offset off of
// a file: off, len(p) and p's address are multiples of BlockSize.
func Aligned(p []byte, off int64) bool {
	return off%BlockSize == 0 && len(p)%BlockSize == 0 && Phase(p) == 0
}
