package bench

import (
	"context"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/check"
	"github.com/safetensors-go/safetensors/quant"
)

// memSource is a safetensors.TensorSource of tensors held in memory.
type memSource []safetensors.Tensor

func (m memSource) Names() []string {
	names := make([]string, len(m))
	for i, t := range m {
		names[i] = t.Name
	}
	return names
}

func (m memSource) TensorContext(_ context.Context, name string) (safetensors.Tensor, error) {
	for _, t := range m {
		if t.Name == name {
			return t, nil
		}
	}
	return safetensors.Tensor{}, safetensors.ErrTensorNotFound
}

// weights returns n [rows, cols] tensors of dtype d holding small non-zero
// values, like a model's projections.
func weights(d safetensors.DType, n, rows, cols int) memSource {
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i)))*0.02 + 0.001
	}
	out := make(memSource, n)
	for i := range out {
		t, err := safetensors.TensorFromFloat32s("model.layers."+string(rune('a'+i))+".mlp.up_proj.weight", d, []uint64{uint64(rows), uint64(cols)}, vals, safetensors.RoundNearestEven)
		if err != nil {
			panic(err)
		}
		out[i] = t
	}
	return out
}

// parallelSum sums the values of the tensors as float32 on GOMAXPROCS
// goroutines, each a contiguous share of each tensor: the plain parallel
// pass over the same bytes that check and quantize are measured against.
func parallelSum(ts memSource) float32 {
	workers := runtime.GOMAXPROCS(0)
	sums := make([]float32, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s float32
			for _, t := range ts {
				n := len(t.Data) / (t.DType.Bits() / 8)
				lo, hi := n*w/workers, n*(w+1)/workers
				switch t.DType {
				case safetensors.F32:
					v, _ := safetensors.View[float32](t)
					for _, x := range v[lo:hi] {
						s += x
					}
				case safetensors.BF16:
					v, _ := safetensors.View[uint16](t)
					for _, x := range v[lo:hi] {
						s += math.Float32frombits(uint32(x) << 16)
					}
				}
			}
			sums[w] = s
		}()
	}
	wg.Wait()
	var s float32
	for _, x := range sums {
		s += x
	}
	return s
}

// parallelNarrow reads the values of the one tensor of ts on GOMAXPROCS
// goroutines, each a contiguous share, as parallelSum does, and writes one
// byte per value (its top byte) into a new slice: the least a quantization
// to int8 must do, a ceiling for quantize.
func parallelNarrow(ts memSource) []byte {
	t := ts[0]
	size := t.DType.Bits() / 8
	out := make([]byte, len(t.Data)/size)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := len(out)*w/workers, len(out)*(w+1)/workers
			o := out[lo:hi]
			switch t.DType {
			case safetensors.F32:
				v, _ := safetensors.View[float32](t)
				for i, x := range v[lo:hi] {
					o[i] = byte(math.Float32bits(x) >> 24)
				}
			case safetensors.BF16:
				v, _ := safetensors.View[uint16](t)
				for i, x := range v[lo:hi] {
					o[i] = byte(x >> 8)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// race times the sides in alternating rounds, each side's fastest round
// kept, and reports each side's GB/s over size bytes and the ratio of the
// first side's speed to the last's ("x": 1 = as fast as the plain sum).
func race(b *testing.B, size int, names []string, sides ...func()) {
	best := make([]time.Duration, len(sides))
	round := 0
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for k := range sides {
			i := (k + round) % len(sides)
			start := time.Now()
			sides[i]()
			if d := time.Since(start); best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
		round++
	}
	for i, name := range names {
		b.ReportMetric(float64(size)/best[i].Seconds()/1e9, name+"-GB/s")
	}
	b.ReportMetric(best[len(best)-1].Seconds()/best[0].Seconds(), "x")
}

// BenchmarkCheck runs check.Run (NaN, Inf, zeros, magnitude, structure) over
// 1 GiB of weights, 16 tensors, against the parallel float32 sum of the same
// bytes. With -short, 64 MiB.
func BenchmarkCheck(b *testing.B) {
	for _, d := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		b.Run(d.String(), func(b *testing.B) {
			size := 1 << 30
			if testing.Short() {
				size = 64 << 20
			}
			cols := 4096
			rows := size / 16 / cols / (d.Bits() / 8)
			ts := weights(d, 16, rows, cols)
			var sink float32
			race(b, size, []string{"check", "sum"},
				func() {
					r, err := check.Run(context.Background(), ts)
					if err != nil || len(r.Findings) != 0 {
						b.Fatal(err, r.Findings)
					}
				},
				func() { sink += parallelSum(ts) })
			_ = sink
		})
	}
}

// BenchmarkQuantize quantizes BF16 and F32 [rows, 4096] weights with
// compressed-tensors' rule, per channel and per tensor, against the
// parallel float32 sum of the same bytes ("x" is quantize's speed over the
// sum's), with the same goroutines (GOMAXPROCS). "narrow" is a ceiling: the
// same goroutines reading the values and writing one byte each into a new
// slice. The weights total 256 MiB (16 MiB with -short).
func BenchmarkQuantize(b *testing.B) {
	for _, d := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
		for _, s := range []quant.Strategy{quant.PerChannel, quant.PerTensor} {
			b.Run(d.String()+"/"+s.String(), func(b *testing.B) {
				size := 256 << 20
				if testing.Short() {
					size = 16 << 20
				}
				cols := 4096
				ts := weights(d, 1, size/cols/(d.Bits()/8), cols)
				var sink float32
				race(b, size, []string{"quantize", "narrow", "sum"},
					func() {
						q, _, err := quant.CompressWeight(ts[0], s)
						if err != nil {
							b.Fatal(err)
						}
						sink += float32(q.Data[0])
					},
					func() { sink += float32(parallelNarrow(ts)[1]) },
					func() { sink += parallelSum(ts) })
				_ = sink
			})
		}
	}
}

// BenchmarkQuantizeValidator quantizes 256 MiB of F32 values (16 MiB with
// -short) with the validator's per-tensor rule, quant.Quantize, against the
// parallel float32 sum of the same bytes and the narrow ceiling.
func BenchmarkQuantizeValidator(b *testing.B) {
	size := 256 << 20
	if testing.Short() {
		size = 16 << 20
	}
	ts := weights(safetensors.F32, 1, size/4/4096, 4096)
	x, err := safetensors.View[float32](ts[0])
	if err != nil {
		b.Fatal(err)
	}
	q := make([]int8, len(x))
	var sink float32
	race(b, size, []string{"quantize", "narrow", "sum"},
		func() {
			var err error
			if q, _, err = quant.Quantize(q, x); err != nil {
				b.Fatal(err)
			}
			sink += float32(q[0])
		},
		func() { sink += float32(parallelNarrow(ts)[1]) },
		func() { sink += parallelSum(ts) })
	_ = sink
}
