//go:build !linux

package load

// mapMemory returns nil: a load's memory is of the Go heap here.
func mapMemory(n int) []byte { return nil }

// dropPages is never called here: there are no mappings.
func dropPages(b []byte) {}
