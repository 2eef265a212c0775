//go:build slow

package dataset

import (
	"runtime"
	"sync"
	"testing"
)

// TestSparkEncodingAll compares the package's F16 and BF16 encodings with
// the references for all 2^32 float32 bit patterns.
func TestSparkEncodingAll(t *testing.T) {
	const total = 1 << 32
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	bad := make([]uint32, workers)
	failed := make([]bool, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := uint64(w)*total/uint64(workers), uint64(w+1)*total/uint64(workers)
			b, ok := checkEncodings(lo, hi)
			bad[w], failed[w] = b, !ok
		}()
	}
	wg.Wait()
	for w := range workers {
		if failed[w] {
			t.Errorf("float32 %#08x: F16 %#04x, want %#04x; BF16 %#04x, want %#04x", bad[w],
				sparkF16(bad[w]), refSparkF16(bad[w]), sparkBF16(bad[w]), refSparkBF16(bad[w]))
		}
	}
}
