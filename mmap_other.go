//go:build !unix && !windows

package safetensors

import "os"

// mmapSupported reports whether Open maps files on this platform: not here
// (js, wasip1, plan9), where Open reads the data section into memory.
const mmapSupported = false

// mapFile is not called where mmapSupported is false.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	panic("safetensors: no mmap on this platform")
}
