package safetensors

import (
	"math"
	"os"

	"github.com/safetensors-go/safetensors/internal/mmap"
)

// mmapSupported reports whether Open maps files on this platform (not on
// js, wasip1 and plan9, where Open reads the data section into memory).
const mmapSupported = mmap.Supported

// mapFile maps the first size bytes of f read-only and returns them with the
// function that unmaps them. The mapping stays valid after f is closed.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size > math.MaxInt {
		return nil, nil, errTooLarge(size)
	}
	return mmap.Map(f, size)
}
