//go:build !linux

package pagecache

// AdviseWillNeed would ask the system to read bytes [off, end) of the
// mapping m into memory; outside Linux the standard library offers no
// madvise, and it does nothing.
func AdviseWillNeed(m []byte, off, end int) error { return nil }
