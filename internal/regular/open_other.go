//go:build !windows

package regular

import "os"

// OpenFile is os.OpenFile. On Windows, a file opened for reading only is
// shared for deletion too, so that it can be renamed over and deleted
// while open, as here.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
