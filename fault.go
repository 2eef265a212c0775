package safetensors

import (
	"errors"
	"fmt"
	"os"
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
// offset of the missing bytes (on linux/s390x, that of their page, which is
// all its kernel reports; under an emulator that reports no usable address,
// such as qemu-user for s390x, the file's new size instead). Where a function of this package reads
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
			if msg, ok := faultMessage(a.Addr()); ok {
				if name == "" {
					return errorf(ErrFileChanged, "%s", msg)
				}
				return tensorErrorf(name, ErrFileChanged, "%s", msg)
			}
		}
	}
	panic(r)
}

// faultMessage says which mapped file lost the bytes at addr, the address
// of a fault, and reports whether one did. The address is exact on Linux
// (amd64, arm64, 386), macOS and Windows; on linux/s390x the kernel gives
// only the page of the fault (the translation-exception address, whose low
// 12 bits it clears), which still lies in the mapping. Where the address
// lies in no mapping (qemu-user's s390x emulation gives one whose two
// 32-bit halves are swapped, and other emulators may give another), the
// file is found by its size instead: a mapped file now shorter than its
// mapping is one whose missing pages fault.
func faultMessage(addr uintptr) (string, bool) {
	if mf, ok := mappedAt(addr); ok {
		return fmt.Sprintf("%s: the bytes at file offset %d are gone", mf.path, addr-mf.start), true
	}
	if addr < minFaultAddr {
		return "", false // a nil pointer, not a mapping
	}
	mappings.Lock()
	defer mappings.Unlock()
	for _, mf := range mappings.m {
		info, err := os.Stat(mf.path)
		if err != nil {
			continue // removed: its pages stay until unmapped
		}
		if size := uint64(info.Size()); size < uint64(mf.end-mf.start) {
			return fmt.Sprintf("%s: the file is now %d bytes, %d were mapped: the bytes past offset %d are gone", mf.path, size, mf.end-mf.start, size), true
		}
	}
	return "", false
}

// minFaultAddr is where faults stop being nil pointer dereferences: the
// runtime treats a fault below it as one.
const minFaultAddr = 0x1000

// GuardFaults calls fn and returns its error. If fn, on the calling
// goroutine, touches memory of a file mapped by Open that is gone because
// the file was truncated while mapped, GuardFaults returns an error wrapping
// ErrFileChanged that names the file and the offset, where the program would
// otherwise die of SIGBUS. Any other panic goes on. Goroutines that fn starts
// are not guarded: each calls GuardFaults itself. While no file is mapped it
// costs one atomic load. It is for code that reads a tensor's Data itself;
// the package's own functions guard themselves.
//
// It does so on Linux (amd64, arm64, 386 and s390x, natively or under
// qemu-user), macOS and the other Unix systems, where the fault is SIGBUS,
// and on Windows, where it is EXCEPTION_IN_PAGE_ERROR; Windows refuses to
// truncate a file while it is mapped, so there the fault comes only from a
// file whose storage fails, such as one on a network share that goes away,
// which has not shrunk: it is reported when its address is exact, as
// Windows gives it. On js, wasip1 and plan9 Open maps nothing, and nothing
// faults.
func GuardFaults(fn func() error) (err error) {
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), ""); e != nil {
			err = e
		}
	}()
	return fn()
}
