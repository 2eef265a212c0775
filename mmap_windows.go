//go:build windows

package safetensors

import (
	"math"
	"os"
	"syscall"
	"unsafe"
)

// mmapSupported reports whether Open maps files on this platform.
const mmapSupported = true

// mapFile maps the first size bytes of f read-only and returns them with the
// function that unmaps them. The mapping stays valid after f is closed.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size > math.MaxInt {
		return nil, nil, errTooLarge(size)
	}
	h, err := syscall.CreateFileMapping(syscall.Handle(f.Fd()), nil, syscall.PAGE_READONLY, uint32(size>>32), uint32(size), nil)
	if err != nil {
		return nil, nil, &os.PathError{Op: "CreateFileMapping", Path: f.Name(), Err: err}
	}
	addr, err := syscall.MapViewOfFile(h, syscall.FILE_MAP_READ, 0, 0, uintptr(size))
	// The view keeps the mapping object alive.
	syscall.CloseHandle(h)
	if err != nil {
		return nil, nil, &os.PathError{Op: "MapViewOfFile", Path: f.Name(), Err: err}
	}
	// addr is an address outside the Go heap; reading it through a pointer to
	// it keeps vet's unsafe.Pointer check quiet about the conversion.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	b := unsafe.Slice((*byte)(p), int(size))
	return b, func() error { return syscall.UnmapViewOfFile(addr) }, nil
}
