package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/require"
)

// mxfp4ExpertNaive is the kernel's rule written value by value, through
// the exact tables mxfp4BF16 and mxfp4F32.
func mxfp4ExpertNaive(out []byte, size, rows, width int, blocks []byte, bstride int, scales []byte, sstride int) {
	for r := range rows {
		for g := range width {
			e := scales[r*sstride+g]
			for k := range 16 {
				x := blocks[r*bstride+g*16+k]
				for h, code := range [2]byte{x & 15, x >> 4} {
					at := ((g*32+2*k+h)*rows + r) * size
					if size == 2 {
						binary.LittleEndian.PutUint16(out[at:], uint16(mxfp4BF16()[e][code]))
					} else {
						binary.LittleEndian.PutUint32(out[at:], mxfp4F32()[e][code])
					}
				}
			}
		}
	}
}

// TestMXFP4Kernel compares the kernel with the exact tables for every
// (scale, code) pair, extreme scales (subnormal results, overflows to
// Inf) included, BF16 and F32, at shapes whose rows fill no whole tile,
// and in the strided layout of a chunk of an expert's groups.
func TestMXFP4Kernel(t *testing.T) {
	// Each E8M0 scale beside each byte of two codes: 256 rows of one
	// group, row e of scale e holding 16 bytes, the 256 bytes over 16
	// groups.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ rows, groups, g0, width int }{
		{256, 16, 0, 16}, {1, 1, 0, 1}, {33, 3, 1, 2}, {95, 7, 2, 4}, {64, 5, 4, 1}, {300, 9, 0, 9},
	} {
		for _, size := range []int{2, 4} {
			t.Run(fmt.Sprintf("%dx%d[%d:%d]/%d", tc.rows, tc.groups, tc.g0, tc.g0+tc.width, size), func(t *testing.T) {
				blocks := make([]byte, tc.rows*tc.groups*16)
				scales := make([]byte, tc.rows*tc.groups)
				for i := range blocks {
					blocks[i] = byte(i) // every byte, in each row's 16
					if tc.rows != 256 {
						blocks[i] = byte(rng.Uint32())
					}
				}
				for i := range scales {
					scales[i] = byte(i / tc.groups) // scale = row: every scale
					if tc.rows != 256 {
						scales[i] = byte(rng.Uint32())
					}
				}
				if tc.rows == 256 { // each row's group g holds bytes 16g..16g+15
					for r := range 256 {
						for i := range 256 {
							blocks[r*256+i] = byte(i + r)
						}
					}
				}
				n := tc.rows * 32 * tc.width * size
				want, got := make([]byte, n), make([]byte, n)
				for i := range got {
					got[i] = 0xa5
				}
				b, s := blocks[tc.g0*16:], scales[tc.g0:]
				mxfp4ExpertNaive(want, size, tc.rows, tc.width, b, tc.groups*16, s, tc.groups)
				mxfp4Expert(got, size, tc.rows, tc.width, b, tc.groups*16, s, tc.groups)
				require.Equal(t, want, got)
			})
		}
	}
	// The F32 bits are the BF16 ones followed by 16 zeros: the kernel's
	// F32 rests on it.
	for e := range 256 {
		for c := range 16 {
			require.Equal(t, mxfp4BF16()[e][c]<<16, mxfp4F32()[e][c], "scale %d, code %d", e, c)
		}
	}
}

// BenchmarkMXFP4Kernel measures the kernel on a chunk of the shape that
// Convert gives gpt-oss's experts: 2048 rows, 16 groups (read
// contiguous, as ReadSlice gives them).
func BenchmarkMXFP4Kernel(b *testing.B) {
	const rows, width = 2048, 16
	blocks := make([]byte, rows*width*16)
	scales := make([]byte, rows*width)
	for i := range blocks {
		blocks[i] = byte(i * 7)
	}
	for i := range scales {
		scales[i] = byte(0x7a + i%10)
	}
	for _, size := range []int{2, 4} {
		b.Run(fmt.Sprint(size*8), func(b *testing.B) {
			out := make([]byte, rows*32*width*size)
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				mxfp4Expert(out, size, rows, width, blocks, width*16, scales, width)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*32*width), "ns/value")
		})
	}
}

// TestFP8Blocks compares fp8Blocks, a table of each block's 256
// products, with each value's product rounded alone, for both F8 dtypes,
// BF16 and F32, every code (NaNs and subnormals included) beside scales
// whose products round, overflow to Inf, fall to subnormals, or are NaN
// or Inf, in blocks cut by the chunk and the matrix's edges.
func TestFP8Blocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	scales := []float32{1, 0.0123, 3.7e-3, 1e-40, 1.5e-45, 2e35, 3.4e38, float32(math.Inf(1)), float32(math.NaN()), -0.5, 0}
	for _, d := range []safetensors.DType{safetensors.F8_E4M3, safetensors.F8_E5M2} {
		table := f8Values(d)
		for _, to := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
			const rows, cols, bo, bi = 100, 300, 32, 64 // blocks of 2048, partial at the edges
			scols := uint64((cols + bi - 1) / bi)
			data := make([]byte, rows*cols)
			for i := range data {
				data[i] = byte(i) // every code in every block
				if i%7 == 0 {
					data[i] = byte(rng.Uint32())
				}
			}
			sc := make([]float32, (rows+bo-1)/bo*scols)
			for i := range sc {
				sc[i] = scales[i%len(scales)] * float32(1+rng.Float64()/8)
			}
			for _, r := range [][2]uint64{{0, rows}, {5, 70}, {64, 65}} {
				var m convertSlot
				got := fp8Blocks(&m, data[r[0]*cols:], r[0], r[1], cols, bo, bi, scols, sc[r[0]/bo*scols:], table, to)
				var want []byte
				for i := r[0]; i < r[1]; i++ {
					for j := uint64(0); j < cols; j++ {
						p := table[data[i*cols+j]] * sc[(i/bo)*scols+j/bi]
						if to == safetensors.BF16 {
							want = append(want, safetensors.F32sToBF16Bytes(nil, []float32{p}, safetensors.RoundNearestEven)...)
						} else {
							want = binary.LittleEndian.AppendUint32(want, math.Float32bits(p))
						}
					}
				}
				require.Equal(t, want, got, "%v to %v, rows %v", d, to, r)
			}
		}
	}
}

// BenchmarkFP8Lookup measures the lookups of fp8Blocks, 1 Mi codes to
// BF16: the pure-Go loop, and the AVX2 gathers where they run.
func BenchmarkFP8Lookup(b *testing.B) {
	src := make([]byte, 1<<20)
	for i := range src {
		src[i] = byte(i * 7)
	}
	var lut16 [256]uint16
	var lut32 [256]uint32
	for i := range lut16 {
		lut16[i], lut32[i] = uint16(i*3), uint32(i*3)
	}
	dst := make([]byte, 2*len(src))
	for _, fast := range []bool{false, true} {
		b.Run(map[bool]string{false: "go", true: "fast"}[fast], func(b *testing.B) {
			b.SetBytes(int64(len(dst)))
			for b.Loop() {
				k := 0
				if fast {
					k = fp8LookupFast(dst, src, &lut32, 2)
				}
				fp8Lookup16(dst[2*k:], src[k:], &lut16)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(src)), "ns/value")
		})
	}
}
