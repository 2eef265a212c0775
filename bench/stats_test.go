package bench

import (
	"math"
	"testing"
	"unsafe"

	"github.com/safetensors-go/safetensors"
)

// BenchmarkStats computes Tensor.Stats of a 1 GiB F32 tensor held in memory
// and, in alternating rounds, sums the same bytes as float32 in a plain loop,
// the ceiling the issue sets. The metrics are each side's fastest round and
// their ratio ("x", sum time / stats time, 1 = as fast as the plain sum).
// With -short the tensor is 64 MiB.
func BenchmarkStats(b *testing.B) {
	size := 1 << 30
	if testing.Short() {
		size = 64 << 20
	}
	data := make([]byte, size)
	vals := unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), size/4)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i))) * 0.02
	}
	t := safetensors.Tensor{Name: "w", DType: safetensors.F32, Shape: []uint64{uint64(len(vals))}, Data: data}
	var sink float32
	race(b, size, []string{"stats", "sum"}, func() {
		s, err := t.Stats()
		if err != nil {
			b.Fatal(err)
		}
		sink += float32(s.Mean)
	}, func() {
		var s float32
		for _, v := range vals {
			s += v
		}
		sink += s
	})
	_ = sink
}
