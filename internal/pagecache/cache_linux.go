//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pagecache

import (
	"math"
	"os"
	"syscall"
	"unsafe"
)

// OpenDirect opens the named file for reading with direct I/O (O_DIRECT),
// which reads around the page cache, each read Aligned; the file system
// may refuse it.
func OpenDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
}

// posix_fadvise's advice on Linux.
const (
	posixFadvRandom   = 1
	posixFadvDontNeed = 4
)

// Drop asks the kernel to drop the cached pages that hold bytes [off,
// off+n) of f (posix_fadvise POSIX_FADV_DONTNEED), the whole pages at both
// ends included: the kernel keeps a page the range covers only in part.
// It is a hint, and its failure is ignored.
func Drop(f *os.File, off, n int64) {
	page := int64(os.Getpagesize())
	b, e := off&^(page-1), off+n
	if e%page != 0 {
		e += page - e%page
	}
	syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(b), uintptr(e-b), posixFadvDontNeed, 0, 0)
}

// NoReadahead asks the kernel not to read ahead of the reads made through
// f (posix_fadvise POSIX_FADV_RANDOM), so that a read through the cache
// brings into it only the pages it asks for, which the caller then drops.
// It is a hint, and its failure is ignored.
func NoReadahead(f *os.File) {
	syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, posixFadvRandom, 0, 0)
}

// A Probe tells which pages of a file are in the page cache without
// reading any, and without starting a readahead: with cachestat(2)
// (Linux 6.5 and later), which counts a range's cached pages folio by
// folio, or else with mincore(2) on a read-only mapping of the file that
// is never touched, which looks up each page (2 GiB take 40 ms). Cached
// may be called from several goroutines at once.
type Probe struct {
	f    *os.File
	m    []byte // the mapping for mincore, or nil for cachestat
	page int64
}

// sysCachestat is cachestat's number, the same on every architecture.
const sysCachestat = 451

// cachestatRange and cachestat are the kernel's struct cachestat_range and
// struct cachestat.
type (
	cachestatRange struct{ off, len uint64 }
	cachestat      struct{ cache, dirty, writeback, evicted, recentlyEvicted uint64 }
)

// NewProbe returns a Probe of f, the file at path, which info describes:
// one that asks with cachestat(2) where the kernel has it, else one that
// asks with mincore(2). It returns nil where the kernel would not tell
// which pages of the file are cached: it tells only a process that owns
// the file or may open it for writing. The Probe reads through f, which
// must stay open until the Probe's Close.
func NewProbe(f *os.File, path string, info os.FileInfo) *Probe {
	return newProbe(f, path, info, false)
}

// NewMincoreProbe is NewProbe asking with mincore(2) even where the kernel
// has cachestat(2), so that tests can check both ways.
func NewMincoreProbe(f *os.File, path string, info os.FileInfo) *Probe {
	return newProbe(f, path, info, true)
}

func newProbe(f *os.File, path string, info os.FileInfo, mincore bool) *Probe {
	size := info.Size()
	if size <= 0 || size > math.MaxInt {
		return nil
	}
	p := &Probe{f: f, page: int64(os.Getpagesize())}
	if !mincore {
		if _, err := p.cachestat(0, 1); err == nil {
			return p
		}
		// ENOSYS before Linux 6.5 or under a seccomp filter; EPERM where
		// mincore would not tell either.
	}
	if !mincoreTells(path, info) {
		return nil
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	p.m = m
	return p
}

// accessWrite is access(2)'s W_OK.
const accessWrite = 2

// mincoreTells reports whether mincore tells a process which pages of the
// file at path are cached: since Linux 5.0, only one that owns the file or
// may open it for writing learns it; to others it says that every page
// is. (cachestat refuses them since Linux 6.14.)
func mincoreTells(path string, info os.FileInfo) bool {
	euid := os.Geteuid()
	if st, ok := info.Sys().(*syscall.Stat_t); ok && (euid == 0 || st.Uid == uint32(euid)) {
		return true
	}
	return syscall.Access(path, accessWrite) == nil
}

// cachestat returns how many of the pages that hold bytes [off, off+n)
// are cached.
func (p *Probe) cachestat(off, n int64) (int64, error) {
	r := cachestatRange{off: uint64(off), len: uint64(n)}
	var c cachestat
	_, _, errno := syscall.Syscall6(sysCachestat, p.f.Fd(), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&c)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int64(c.cache), nil
}

// Cached reports whether every page that holds bytes [off, off+n) of the
// file is in the page cache, and whether some page is. A range outside
// the file, or a failing probe, counts as none.
func (p *Probe) Cached(off, n int64) (all, some bool) {
	if n <= 0 || off < 0 {
		return false, false
	}
	b, e := off&^(p.page-1), off+n
	pages := (e - b + p.page - 1) / p.page
	if p.m == nil {
		c, err := p.cachestat(off, n)
		if err != nil {
			return false, false
		}
		return c == pages, c > 0
	}
	if off > int64(len(p.m))-n {
		return false, false
	}
	vec := make([]byte, pages)
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&p.m[b])), uintptr(e-b), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return false, false
	}
	all = true
	for _, v := range vec {
		if v&1 != 0 {
			some = true
		} else {
			all = false
		}
	}
	return all, some
}

// Mapped reports whether the Probe maps the file (to ask with mincore),
// until Close.
func (p *Probe) Mapped() bool { return p.m != nil }

// Close unmaps the file, if the Probe mapped it; it does not close the
// file. The Probe must not be used after Close.
func (p *Probe) Close() {
	if p.m != nil {
		syscall.Munmap(p.m)
		p.m = nil
	}
}

// hugePage is the size of a transparent huge page on the architectures
// this file is built for.
const hugePage = 2 << 20

// AdviseHugePages asks the kernel to back the new memory b with huge pages
// (madvise MADV_HUGEPAGE), so that filling it takes one page fault each 2
// MiB rather than each 4 KiB: most of the cost of reading a file into new
// memory. It is a hint, for the whole huge pages inside b, and its failure
// is ignored.
func AdviseHugePages(b []byte) {
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
