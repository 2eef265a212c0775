package safetensors

import (
	"errors"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ErrFileChanged is returned when the bytes of a tensor mapped by Open are
// gone because the file was truncated (or, on some systems, removed) while
// it was mapped: by Stats, Float32s, AppendFloat32s, Values, Write and
// WriteFile, which read a tensor's Data. The error names the file and the
// offset of the missing bytes. Where a function of this package reads
// mapped memory, it makes the system's fault (SIGBUS) a Go panic with
// runtime/debug.SetPanicOnFault, for its own goroutine only, and turns it
// into this error; code that reads a tensor's Data itself can do the same,
// as the package example shows.
var ErrFileChanged = errors.New("safetensors: file truncated while mapped")

// mappedFile is a mapping made by Open, for naming the file of a fault.
type mappedFile struct {
	start, end uintptr
	path       string
}

// mappings holds the live mappings by start address; live counts them, so
// that guardFaults costs nothing when there are none.
var mappings struct {
	sync.Mutex
	m    map[uintptr]mappedFile
	live atomic.Int64
}

// trackMapping records that m maps the file at path until unmap is called,
// and returns the function to call instead of unmap.
func trackMapping(m []byte, path string, unmap func() error) func() error {
	if len(m) == 0 {
		return unmap
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	mappings.Lock()
	if mappings.m == nil {
		mappings.m = make(map[uintptr]mappedFile)
	}
	mappings.m[start] = mappedFile{start: start, end: start + uintptr(len(m)), path: path}
	mappings.live.Add(1)
	mappings.Unlock()
	return func() error {
		mappings.Lock()
		delete(mappings.m, start)
		mappings.live.Add(-1)
		mappings.Unlock()
		return unmap()
	}
}

// mappedAt returns the mapping that holds addr.
func mappedAt(addr uintptr) (mappedFile, bool) {
	mappings.Lock()
	defer mappings.Unlock()
	for _, mf := range mappings.m {
		if addr >= mf.start && addr < mf.end {
			return mf, true
		}
	}
	return mappedFile{}, false
}

// A faultGuard is the state that guardFaults saves: whether it turned
// faults into panics, and the setting it replaced.
type faultGuard uint8

const (
	guardOff    faultGuard = iota // nothing mapped: nothing changed
	guardWasOff                   // set; it was off before
	guardWasOn                    // set; it was on before
)

// guardFaults makes a fault of the calling goroutine on a bad address a
// panic rather than the end of the program, while any file is mapped, and
// returns what recoverFault needs to restore.
func guardFaults() faultGuard {
	if mappings.live.Load() == 0 {
		return guardOff
	}
	if debug.SetPanicOnFault(true) {
		return guardWasOn
	}
	return guardWasOff
}

// recoverFault ends what guardFaults began: it restores the setting,
// and, given what recover returned, returns nil if there was no panic, an
// error wrapping ErrFileChanged for the named tensor if the panic was a
// fault in a mapping of Open, or panics again with anything else. Use it
// as
//
//	old := guardFaults()
//	defer func() {
//		if e := recoverFault(old, recover(), name); e != nil {
//			err = e
//		}
//	}()
func recoverFault(old faultGuard, r any, name string) error {
	if old != guardOff {
		debug.SetPanicOnFault(old == guardWasOn)
	}
	if r == nil {
		return nil
	}
	if re, ok := r.(runtime.Error); ok {
		if a, ok := re.(interface{ Addr() uintptr }); ok {
			if mf, ok := mappedAt(a.Addr()); ok {
				if name == "" {
					return errorf(ErrFileChanged, "%s: the bytes at file offset %d are gone", mf.path, a.Addr()-mf.start)
				}
				return tensorErrorf(name, ErrFileChanged, "%s: the bytes at file offset %d are gone", mf.path, a.Addr()-mf.start)
			}
		}
	}
	panic(r)
}

// GuardFaults calls fn and returns its error. If fn, on the calling
// goroutine, touches memory of a file mapped by Open that is gone because
// the file was truncated while mapped, GuardFaults returns an error wrapping
// ErrFileChanged that names the file and the offset, where the program would
// otherwise die of SIGBUS. Any other panic goes on. Goroutines that fn starts
// are not guarded: each calls GuardFaults itself. While no file is mapped it
// costs one atomic load. It is for code that reads a tensor's Data itself;
// the package's own functions guard themselves.
func GuardFaults(fn func() error) (err error) {
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), ""); e != nil {
			err = e
		}
	}()
	return fn()
}
