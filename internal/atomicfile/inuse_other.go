//go:build !windows

package atomicfile

// inUse reports false: a rename replaces a file that is open or mapped,
// which keeps its data for the processes that have it.
func inUse(error) bool { return false }
