//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package safetensors

import (
	"errors"
	"os"
)

// openDirect would open the named file for direct I/O; here the standard
// library offers none, and a Loader with NoCache reads through the cache.
func openDirect(path string) (*os.File, error) {
	return nil, errors.New("no direct I/O on this platform")
}

// dropCache would drop the cached pages of bytes [off, off+n) of f; here
// the standard library offers no posix_fadvise, and it does nothing.
func dropCache(f *os.File, off, n int64) {}

// noReadahead would ask the system not to read ahead of the reads made
// through f; here it does nothing.
func noReadahead(f *os.File) {}

// A cacheProbe would tell which pages of a file are cached; here there is
// none, and a Loader with NoCache reads as if no page were.
type cacheProbe struct{}

// testForceMincore would make probes use mincore.
var testForceMincore bool

// newCacheProbe returns nil: no probe on this platform.
func newCacheProbe(f *os.File, path string, info os.FileInfo) *cacheProbe { return nil }

// cached reports no page cached.
func (p *cacheProbe) cached(off, n int64) (all, some bool) { return false, false }

// mapped reports no mapping.
func (p *cacheProbe) mapped() bool { return false }

// close does nothing.
func (p *cacheProbe) close() {}

// adviseHugePages would ask the system for huge pages to back b; here it
// does nothing.
func adviseHugePages(b []byte) {}
