// Package mmap maps files read-only: the one mapping of the module, for
// the root package's Reader and for hashing files in place.
package mmap

import (
	"fmt"
	"math"
	"os"
)

// Map maps the first size bytes of f read-only and shared, and returns
// them with the function that unmaps them. The mapping stays valid after
// f is closed. Where Supported is false it returns an error.
func Map(f *os.File, size int64) ([]byte, func() error, error) {
	if size > math.MaxInt {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: fmt.Errorf("%d bytes do not fit in this platform's address space", size)}
	}
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	return mapFile(f, int(size))
}
