//go:build !linux

package safetensors

// adviseWillNeed would ask the system to read bytes [off, end) of the
// mapping m into memory; outside Linux the standard library offers no
// madvise, and Prefetch does nothing.
func adviseWillNeed(m []byte, off, end int) error { return nil }
