//go:build slow

package safetensors

import (
	"runtime"
	"sync"
	"testing"
)

// TestF32To16Exhaustive converts every float32 bit pattern with both
// functions and both roundings, compares each result with the references
// (and with x448/float16 for F16 with rounding to nearest), and the bulk
// paths with the scalar ones.
func TestF32To16Exhaustive(t *testing.T) {
	const chunk = 1 << 16
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	next := make(chan uint32)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := make([]uint32, chunk)
			f16, bf16, b, fs := make([]uint16, chunk), make([]uint16, chunk), make([]byte, 2*chunk), make([]float32, chunk)
			for start := range next {
				for i := range xs {
					xs[i] = start + uint32(i)
				}
				checkF32To16(t, xs, f16, bf16, b, fs)
			}
		}()
	}
	for start := uint64(0); start < 1<<32; start += chunk {
		next <- uint32(start)
	}
	close(next)
	wg.Wait()
}
