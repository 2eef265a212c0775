//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package pagecache

import (
	"errors"
	"os"
)

// OpenDirect would open the named file for reading with direct I/O; here
// the standard library offers none, and it fails.
func OpenDirect(path string) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: path, Err: errors.ErrUnsupported}
}

// Drop would drop the cached pages of bytes [off, off+n) of f; here the
// standard library offers no posix_fadvise, and it does nothing.
func Drop(f *os.File, off, n int64) {}

// NoReadahead would ask the system not to read ahead of the reads made
// through f; here it does nothing.
func NoReadahead(f *os.File) {}

// A Probe would tell which pages of a file are in the page cache; here
// there is none, and NewProbe returns nil.
type Probe struct{}

// NewProbe returns nil: no way here to tell which pages of a file are
// cached.
func NewProbe(f *os.File, path string, info os.FileInfo) *Probe { return nil }

// NewMincoreProbe returns nil, as NewProbe does.
func NewMincoreProbe(f *os.File, path string, info os.FileInfo) *Probe { return nil }

// Cached reports no page cached.
func (p *Probe) Cached(off, n int64) (all, some bool) { return false, false }

// Mapped reports no mapping.
func (p *Probe) Mapped() bool { return false }

// Close does nothing.
func (p *Probe) Close() {}

// AdviseHugePages would ask the system for huge pages to back b; here it
// does nothing.
func AdviseHugePages(b []byte) {}
