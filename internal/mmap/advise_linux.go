package mmap

import "syscall"

// Sequential advises the system that b, a mapping of Map, will be read in
// order: it reads ahead further, and drops what was read sooner.
func Sequential(b []byte) {
	if len(b) > 0 {
		_ = syscall.Madvise(b, syscall.MADV_SEQUENTIAL) // advice: nothing to do if refused
	}
}
