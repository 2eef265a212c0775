//go:build !linux

package mmap

// Sequential advises the system that b, a mapping of Map, will be read in
// order; here it does nothing.
func Sequential(b []byte) {}
