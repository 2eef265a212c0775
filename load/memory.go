package load

import (
	"runtime"
	"sync"
	"weak"

	"github.com/safetensors-go/safetensors/internal/pagecache"
)

// memory is the memory of a load of its own (a Loader with no Buffer),
// held by the load while it runs. On 64-bit Linux it is an anonymous
// mapping, outside the Go heap, whose pages the kernel zeroes as they are
// first written, on the goroutines that read into them; memory of the Go
// heap that was used before is zeroed whole by the allocation, on one
// goroutine, before the load can start (70 of a load's 250 ms with
// HashFiles on 16 cores, of 544 MiB). Elsewhere it is memory of the Go
// heap.
type memory struct {
	b []byte
}

// spare is the memory of the last load that ended, for the next load:
// memory once used costs the next load no page faults (nor the zeroing of
// new memory), which are a tenth of a load's time with HashFiles. It is
// held weakly: the garbage collector reclaims it at its next cycle unless
// a load took it. One slot under a lock, not a sync.Pool: a pool keeps
// what a goroutine puts in a slot of its processor's that a goroutine on
// another processor cannot take, so the next load, its goroutine moved,
// would allocate anew while the spare memory sat idle.
//
// A mapping whose memory the collector reclaimed has its pages given back
// to the system and joins free, to be mapped to the next load that it can
// hold: its address space is kept, never unmapped, so that a slice of it
// that a caller kept past its load reads zeros, or a later load's bytes,
// as memory of the Go heap would, and never faults. What is kept is the
// address space of the largest loads that ran at once, not memory.
var spare struct {
	mu   sync.Mutex
	mem  weak.Pointer[memory]
	free [][]byte
}

// takeMemory returns at least n bytes of memory for a load: the
// spare memory (of any contents: a load reads into it before handing
// anything over) when it is large enough, else the smallest free mapping
// that is, else new memory, advised to be backed by huge pages.
func takeMemory(n int) *memory {
	spare.mu.Lock()
	if m := spare.mem.Value(); m != nil && len(m.b) >= n {
		spare.mem = weak.Pointer[memory]{}
		spare.mu.Unlock()
		return m
	}
	var b []byte
	k := -1
	for i, f := range spare.free {
		if len(f) >= n && (k < 0 || len(f) < len(spare.free[k])) {
			k = i
		}
	}
	if k >= 0 {
		b = spare.free[k]
		spare.free = append(spare.free[:k], spare.free[k+1:]...)
	}
	spare.mu.Unlock()
	if b == nil {
		if b = mapMemory(n); b == nil {
			b = make([]byte, n)
			pagecache.AdviseHugePages(b)
			return &memory{b: b}
		}
		pagecache.AdviseHugePages(b)
	}
	m := &memory{b: b}
	runtime.AddCleanup(m, freeMapping, b)
	return m
}

// freeMapping gives the pages of a mapping whose memory the collector
// reclaimed back to the system, and keeps its address space for the next
// load.
func freeMapping(b []byte) {
	dropPages(b)
	spare.mu.Lock()
	spare.free = append(spare.free, b)
	spare.mu.Unlock()
}

// putMemory makes m the spare memory, unless the spare is larger.
func putMemory(m *memory) {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if s := spare.mem.Value(); s == nil || len(s.b) < len(m.b) {
		spare.mem = weak.Make(m)
	}
}
