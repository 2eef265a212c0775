package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/require"
)

// ctKernelFormats are the layouts of BenchmarkDequantizeCompressedKernel,
// those of the bench module's BenchmarkDequantizeCompressed: the format,
// the config group's weight arguments, and the tensors of a weight of
// rows rows of 4096 values.
var ctKernelFormats = []struct {
	name, format, weights string
	tensors               func(w string, rows uint64) []safetensors.TensorSpec
}{
	{"int8-channel", formatInt, `{"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w, DType: safetensors.I8, Shape: []uint64{rows, 4096}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 1}}}
		}},
	{"int4-group128", formatPacked, `{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.I32, Shape: []uint64{rows, 512}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 32}},
				{Name: w + "_shape", DType: safetensors.I64, Shape: []uint64{2}}}
		}},
	{"int4-group128-asym", formatPacked, `{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": false}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.I32, Shape: []uint64{rows, 512}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 32}},
				{Name: w + "_zero_point", DType: safetensors.I32, Shape: []uint64{(rows*4 + 31) / 32, 32}},
				{Name: w + "_shape", DType: safetensors.I64, Shape: []uint64{2}}}
		}},
	{"fp8-channel", formatFloat, `{"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w, DType: safetensors.F8_E4M3, Shape: []uint64{rows, 4096}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 1}}}
		}},
	{"nvfp4", formatNVFP4, `{"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.U8, Shape: []uint64{rows, 2048}},
				{Name: w + "_scale", DType: safetensors.F8_E4M3, Shape: []uint64{rows, 256}},
				{Name: w + "_global_scale", DType: safetensors.F32, Shape: []uint64{1}}}
		}},
	{"mxfp4", formatMXFP4, `{"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.U8, Shape: []uint64{rows, 2048}},
				{Name: w + "_scale", DType: safetensors.U8, Shape: []uint64{rows, 128}}}
		}},
	{"mxfp6", formatMXFP6, `{"num_bits": 6, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.U8, Shape: []uint64{rows, 3072}},
				{Name: w + "_scale", DType: safetensors.U8, Shape: []uint64{rows, 128}}}
		}},
	{"mxfp8", formatMXFP8, `{"num_bits": 8, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w, DType: safetensors.F8_E4M3, Shape: []uint64{rows, 4096}},
				{Name: w + "_scale", DType: safetensors.U8, Shape: []uint64{rows, 128}}}
		}},
}

// BenchmarkDequantizeCompressedKernel measures the dequantization of one
// chunk of a compressed-tensors weight of each format (256 rows of 4096
// values, the chunk Convert gives such a weight) from a mapped file into
// the reused memory of a slot, to BF16 and F32: the CPU Convert spends a
// value, beside the reads and writes. The values are those of the bench
// module's BenchmarkDequantizeCompressed: every code, scales of about
// 0.01, E8M0 exponents of about 2^0.
func BenchmarkDequantizeCompressedKernel(b *testing.B) {
	const rows = 256
	for _, f := range ctKernelFormats {
		dir := b.TempDir()
		config := fmt.Sprintf(`{"model_type": "llama", "quantization_config": {"quant_method": "compressed-tensors", "format": %q,
  "config_groups": {"group_0": {"targets": ["Linear"], "format": %q, "weights": %s}}}}`, f.format, f.format, f.weights)
		require.NoError(b, os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o666))
		var ts []safetensors.Tensor
		for _, s := range f.tensors("model.layers.0.mlp.up_proj.weight", rows) {
			n := numElements(s.Shape) * uint64(s.DType.Bits()) / 8
			data := make([]byte, n)
			for i := range data {
				switch {
				case s.DType == safetensors.BF16:
					data[i] = [2]byte{0x23, 0x3c}[i%2]
				case s.DType == safetensors.F8_E4M3 && s.Shape[1] != 4096:
					data[i] = 0x30
				case s.DType == safetensors.U8 && s.Shape[1] == 128:
					data[i] = byte(0x7a + i%10)
				case s.DType == safetensors.F8_E4M3:
					data[i] = byte(i*7) &^ 0x80 % 0x7e
				default:
					data[i] = byte(i*7 + i>>8)
				}
			}
			switch s.DType {
			case safetensors.I64:
				binary.LittleEndian.PutUint64(data, rows)
				binary.LittleEndian.PutUint64(data[8:], 4096)
			case safetensors.F32:
				binary.LittleEndian.PutUint32(data, 0x3f800000)
			}
			ts = append(ts, safetensors.Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: data})
		}
		require.NoError(b, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil))
		for _, to := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
			b.Run(f.name+"/"+to.String(), func(b *testing.B) {
				ctx := context.Background()
				c, err := Open(ctx, dir)
				require.NoError(b, err)
				defer c.Close()
				q, err := c.Quantization(ctx)
				require.NoError(b, err)
				plan, err := planDequantization(c, q, to, true)
				require.NoError(b, err)
				require.Len(b, q.Weights, 1)
				cv := &converter{ctx: ctx, to: to, ck: c, plan: plan}
				chunk := &dequantChunk{w: &q.Weights[0], r0: 0, r1: rows}
				var m convertSlot
				b.SetBytes(int64(rows * 4096 * to.Bits() / 8))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := cv.dequantCompressed(&m, chunk, to); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*4096), "ns/value")
			})
		}
	}
}

// dequantPaths runs f with the AVX2 kernels off (the pure-Go loops), and
// on where they run.
func dequantPaths(t *testing.T, f func(t *testing.T)) {
	defer func(v bool) { useDequantAVX2 = v }(useDequantAVX2)
	paths := []bool{false}
	if useDequantAVX2 {
		paths = append(paths, true)
	}
	for _, fast := range paths {
		useDequantAVX2 = fast
		t.Run(map[bool]string{false: "go", true: "avx2"}[fast], f)
	}
}

// TestCompressedTables compares ctTable, a table of each code's result
// (on vector units for a BF16 scale, where they run), with ctValue, each
// value computed alone, for every code of every table ctCodes gives,
// scales that round, are zero, negative, overflow to Inf, give
// subnormals, or are Inf or NaN, zero points at the ends of the range,
// each dtype of the arithmetic and output.
func TestCompressedTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var tables [][]float32
	for bits := 1; bits <= 8; bits++ {
		tables = append(tables, ctCodes(&QuantizedWeight{Bits: bits}, safetensors.I32))
	}
	tables = append(tables, ctCodes(&QuantizedWeight{}, safetensors.I8), ctCodes(&QuantizedWeight{}, safetensors.F8_E4M3),
		ctCodes(&QuantizedWeight{format: formatMXFP6}, safetensors.U8), ctCodes(&QuantizedWeight{format: formatNVFP4}, safetensors.U8))
	scales := []float32{0.00995, 1, -0.5, 0, float32(math.Copysign(0, -1)), 1e-38, 1e-42, 0x1p-133, 3e38, 0x1.fep127,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0x1.01p0, 0x1.0101p-3, 65504, 6e-8}
	for range 20 {
		scales = append(scales, math.Float32frombits(rng.Uint32()))
	}
	dequantPaths(t, func(t *testing.T) {
		for _, codes := range tables {
			n := len(codes)
			zeros := []float32{0, -float32(n / 2), float32(n/2 - 1), float32(rng.IntN(n) - n/2)}
			if n == 256 && codes[0] != -128 { // F8_E4M3: zero points of I8
				zeros = []float32{0, -128, 127, 3}
			}
			for _, wd := range []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32} {
				for _, to := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
					for _, nvfp4 := range []bool{false, true} {
						for _, s := range scales {
							for zi, z := range zeros {
								hasZero := zi > 0
								if nvfp4 && hasZero {
									continue
								}
								got := make([]uint32, n)
								ctTable(got, codes, s, z, hasZero, nvfp4, wd, to)
								for c, q := range codes {
									want := outBits(ctValue(q, s, z, hasZero, nvfp4, wd), to)
									if got[c] != want {
										t.Fatalf("%d codes, scale %g (%#x), zero %g, %v to %v, nvfp4 %v: code %d (%g): %#x, not %#x",
											n, s, math.Float32bits(s), z, wd, to, nvfp4, c, q, got[c], want)
									}
								}
							}
						}
					}
				}
			}
		}
	})
}

// TestCompressedLookups compares the lookups of a code a byte (bytes16,
// bytes32: AVX2 gathers where they run), two a byte (nibbles16,
// nibbles32: byte shuffles) and of the rows of groups of a scale each
// (ctRows: MXFP8's groups of 32 bytes, NVFP4's and MXFP4's of 16 and 32
// codes two a byte, MXFP6's of 32 codes in 24 bytes, a table for each
// scale), with each code looked up
// alone, on
// every code, random tables, and lengths that end in partial vectors.
func TestCompressedLookups(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var t256 [256]uint32
	var t16 [16]uint32
	tabs := make([]uint32, 256*256)
	dequantPaths(t, func(t *testing.T) {
		for _, size := range []int{2, 4} {
			mask := uint32(math.MaxUint32)
			if size == 2 {
				mask = 0xffff // BF16 bits: entries of 16 bits
			}
			for i := range t256 {
				t256[i] = rng.Uint32() & mask
			}
			for i := range t16 {
				t16[i] = rng.Uint32() & mask
			}
			for i := range tabs {
				tabs[i] = rng.Uint32() & mask
			}
			put := func(d []byte, x uint32) {
				if size == 2 {
					binary.LittleEndian.PutUint16(d, uint16(x))
				} else {
					binary.LittleEndian.PutUint32(d, x)
				}
			}
			for n := range 300 {
				src := make([]byte, n+1)[1:] // not aligned
				for i := range src {
					src[i] = byte(rng.Uint32())
					if n == 256 {
						src[i] = byte(i) // every code
					}
				}
				want, got := make([]byte, n*size), make([]byte, n*size+1)[1:]
				for i, b := range src {
					put(want[i*size:], t256[b])
				}
				if size == 2 {
					bytes16(got, src, &t256)
				} else {
					bytes32(got, src, &t256)
				}
				require.Equal(t, want, got, "bytes, %d of %d bytes", n, size)

				want, got = make([]byte, 2*n*size), make([]byte, 2*n*size+1)[1:]
				for i, b := range src {
					put(want[2*i*size:], t16[b&15])
					put(want[(2*i+1)*size:], t16[b>>4])
				}
				if size == 2 {
					nibbles16(got, src, &t16)
				} else {
					nibbles32(got, src, &t16)
				}
				require.Equal(t, want, got, "nibbles, %d of %d bytes", n, size)
			}
			// Rows of groups of 32 codes a byte, each of its E8M0 scale:
			// every scale, every code.
			for _, k := range []uint64{1, 3, 8, 256} {
				const rows = 3
				in := 32 * k
				src := make([]byte, rows*in)
				for i := range src {
					src[i] = byte(i*7 + i/256)
				}
				sc := make([]byte, rows*k)
				for i := range sc {
					sc[i] = byte(rng.Uint32())
					if k == 256 {
						sc[i] = byte(i)
					}
				}
				want, got := make([]byte, rows*in*uint64(size)), make([]byte, rows*in*uint64(size))
				for i, b := range src {
					put(want[i*size:], tabs[uint64(sc[uint64(i)/32])*256+uint64(b)])
				}
				ctRows(ctBytes, got, src, sc, rows, in, in, k, 32, tabs, nil, 256, uint64(size))
				require.Equal(t, want, got, "groups of 32 bytes, %d a row, %d bytes", k, size)
			}
			// Rows of groups of 32 codes of 6 bits, four in 3 bytes
			// (MXFP6), each of its scale: every scale, every code.
			for _, k := range []uint64{1, 3, 8, 256} {
				const rows = 3
				in := 32 * k
				src := make([]byte, rows*in/4*3)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				sc := make([]byte, rows*k)
				for i := range sc {
					sc[i] = byte(rng.Uint32())
					if k == 256 {
						sc[i] = byte(i)
					}
				}
				want, got := make([]byte, rows*in*uint64(size)), make([]byte, rows*in*uint64(size))
				for j := range rows * in {
					at := j / 4 * 3
					word := uint64(src[at]) | uint64(src[at+1])<<8 | uint64(src[at+2])<<16
					c := word >> (6 * (j % 4)) & 63
					put(want[j*uint64(size):], tabs[uint64(sc[j/32])*64+c])
				}
				ctRows(ctSixes, got, src, sc, rows, in/4*3, in, k, 32, tabs[:256*64], nil, 64, uint64(size))
				require.Equal(t, want, got, "groups of 32 codes of 6 bits, %d a row, %d bytes", k, size)
			}
			// Rows of groups of 16 and 32 codes two a byte (NVFP4, MXFP4),
			// each of its scale, through the tables for byte shuffles:
			// every scale, every byte, odd counts of groups.
			t16s := tabs[:256*16]
			var m convertSlot
			luts := m.nibbleLUTs(ctNibbles, t16s)
			for _, group := range []uint64{16, 32} {
				for _, k := range []uint64{1, 2, 3, 8, 256} {
					const rows = 3
					in := group * k
					src := make([]byte, rows*in/2)
					for i := range src {
						src[i] = byte(i*7 + i/256)
					}
					sc := make([]byte, rows*k)
					for i := range sc {
						sc[i] = byte(rng.Uint32())
						if k == 256 {
							sc[i] = byte(i)
						}
					}
					want, got := make([]byte, rows*in*uint64(size)), make([]byte, rows*in*uint64(size))
					for i, b := range src {
						for h, c := range [2]byte{b & 15, b >> 4} {
							j := uint64(2*i + h)
							put(want[j*uint64(size):], t16s[uint64(sc[j/group])*16+uint64(c)])
						}
					}
					ctRows(ctNibbles, got, src, sc, rows, in/2, in, k, group, t16s, luts, 16, uint64(size))
					require.Equal(t, want, got, "groups of %d codes two a byte, %d a row, %d bytes", group, k, size)
				}
			}
		}
	})
}
