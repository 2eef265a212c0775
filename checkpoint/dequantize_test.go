package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quantizedFixture is a folder of testdata/quantized, made by its make.py
// with the reference code (transformers' _dequantize_fp8_weight and
// convert_moe_packed_tensors), beside the reference's dequantization in
// want-BF16.safetensors and want-F32.safetensors.
func quantizedFixture(name string) string {
	return filepath.Join("..", "testdata", "quantized", name)
}

// quantizedDirs are the folders of testdata/quantized: one of each method.
var quantizedDirs = []string{"fp8", "fp8-64", "mxfp4", "ct-int", "ct-float", "ct-w4", "ct-w4-asym", "ct-w8", "ct-nvfp4",
	"ct-w3", "ct-naive", "ct-mxfp4", "ct-mxfp6", "ct-mxfp8", "ct-dense", "ct-mixed", "ct-fp8-block", "ct-int-block", "ct-mxfp4-inf", "mxfp4-tiles"}

// assertSameTensors asserts that the file got holds the tensors of the
// file want, bit for bit, and no others.
func assertSameTensors(t *testing.T, want, got string) {
	t.Helper()
	w, err := safetensors.Open(want)
	require.NoError(t, err)
	defer w.Close()
	g, err := safetensors.Open(got)
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, w.Names(), g.Names())
	for _, n := range w.Names() {
		wt, err := w.Tensor(n)
		require.NoError(t, err)
		gt, err := g.Tensor(n)
		if !assert.NoError(t, err) {
			continue
		}
		assert.Equal(t, wt.DType, gt.DType, n)
		assert.Equal(t, wt.Shape, gt.Shape, n)
		if !assert.True(t, string(wt.Data) == string(gt.Data), "%s: values differ from the reference's", n) {
			a, _ := wt.Float32s()
			b, _ := gt.Float32s()
			for i := range a {
				if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
					t.Logf("%s: first difference at %d: want %v, got %v", n, i, a[i], b[i])
					break
				}
			}
		}
	}
}

func TestQuantizationRecognised(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		dir, method string
		block       []uint64
		weights     int
		bits        float64 // bits per parameter, scales included
	}{
		// Bits: 8 times the bytes of values, scales, zero points and
		// shapes, over the values.
		{"fp8", MethodFP8, []uint64{128, 128}, 3, 8 * (45000 + 32768 + 910 + 4*(2*3+2*1+2*1)) / float64(45000+32768+910)},
		{"fp8-64", MethodFP8, []uint64{64, 64}, 2, 8 * (7000 + 195 + 4*(2*2+1*2)) / float64(7000+195)},
		{"mxfp4", MethodMXFP4, []uint64{1, 32}, 2, 4.25}, // 4 bits, and 8 a group of 32
		{"ct-int", MethodCompressedTensors, nil, 2, 8 * (1961 + 3072 + 2*(37+24)) / float64(1961+3072)},
		{"ct-float", MethodCompressedTensors, nil, 2, 8 * (1961 + 3072 + 2*(37+24)) / float64(1961+3072)},
		{"ct-w4", MethodCompressedTensors, []uint64{1, 128}, 2, 8 * (4*(40*32+24*16) + 2*(40*2+24) + 2*16) / float64(10240+3072)},
		{"ct-w4-asym", MethodCompressedTensors, []uint64{1, 128}, 2, 8 * (4*(40*32+24*16) + 4*(40*2+24) + 4*(5*2+3) + 2*16) / float64(10240+3072)},
		{"ct-w8", MethodCompressedTensors, nil, 2, 8 * (4*(37*14+24*32) + 2*(37+24) + 2*16) / float64(1961+3072)},
		{"ct-nvfp4", MethodCompressedTensors, []uint64{1, 16}, 2, 8 * (40*128 + 24*24 + 40*16 + 24*3 + 2*4) / float64(10240+1152)},
		{"ct-w3", MethodCompressedTensors, []uint64{1, 32}, 2, 8 * (4*(37*9+24*6) + 2*(37*3+24*2) + 4*(4*3+3*2) + 2*16) / float64(37*96+24*64)},
		{"ct-naive", MethodCompressedTensors, []uint64{1, 32}, 2, 8 * (37*96 + 24*64 + 2*(37*3+24*2) + (37*3 + 24*2)) / float64(37*96+24*64)},
		{"ct-mxfp4", MethodCompressedTensors, []uint64{1, 32}, 2, 4.25},
		{"ct-mxfp6", MethodCompressedTensors, []uint64{1, 32}, 2, 6.25},
		{"ct-mxfp8", MethodCompressedTensors, []uint64{1, 32}, 2, 8.25},
		{"ct-dense", MethodCompressedTensors, nil, 2, 8 * (2*(1961+3072) + 2*(37+24) + (37 + 24)) / float64(1961+3072)},
		{"ct-fp8-block", MethodCompressedTensors, []uint64{16, 32}, 2, 8 * (40*100 + 24*64 + 2*(3*4+2*2)) / float64(40*100+24*64)},
		{"ct-int-block", MethodCompressedTensors, []uint64{8, 16}, 2, 8 * (20*50 + 24*64 + 2*(3*4+3*4) + (3*4 + 3*4)) / float64(20*50+24*64)},
		{"ct-mixed", MethodCompressedTensors, nil, 3, 8 * (4*40*32 + 2*40*2 + 16 + 24*128 + 2*24 + 16*32 + 16*4 + 4) / float64(40*256+24*128+16*64)},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			c, err := Open(ctx, quantizedFixture(tc.dir))
			require.NoError(t, err)
			defer c.Close()
			q, err := c.Quantization(ctx)
			require.NoError(t, err)
			require.NotNil(t, q)
			assert.Equal(t, tc.method, q.Method)
			assert.Equal(t, tc.block, q.BlockSize)
			assert.False(t, q.Inferred)
			require.Len(t, q.Weights, tc.weights)
			for _, w := range q.Weights {
				assert.NoError(t, w.Err, w.Name)
			}
			assert.InDelta(t, tc.bits, q.BitsPerParameter(), 1e-9)
			if tc.dir == "ct-dense" {
				return // alone, a plain model (TestConvertDequantize)
			}

			// A lone file: the method and block size come from the tensors.
			lone := filepath.Join(t.TempDir(), "model.safetensors")
			data, err := os.ReadFile(filepath.Join(quantizedFixture(tc.dir), "model.safetensors"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(lone, data, 0o666))
			l, err := Open(ctx, lone)
			require.NoError(t, err)
			defer l.Close()
			iq, err := l.Quantization(ctx)
			require.NoError(t, err)
			require.NotNil(t, iq)
			assert.True(t, iq.Inferred)
			assert.Equal(t, q.Method, iq.Method)
			if q.Method != MethodCompressedTensors { // whose group size is in its config only
				assert.Equal(t, q.BlockSize, iq.BlockSize)
			}
			assert.Empty(t, iq.Ambiguous)
			for i, w := range iq.Weights {
				assert.NoError(t, w.Err, w.Name)
				assert.Equal(t, q.Weights[i].Shape, w.Shape, w.Name)
				assert.Equal(t, q.Weights[i].Bits, w.Bits, w.Name)
			}
		})
	}
}

func TestQuantizationPlainModel(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), convertFixture(t, ""), nil))
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	q, err := c.Quantization(context.Background())
	require.NoError(t, err)
	assert.Nil(t, q)
}

func TestQuantizationWrongScaleShape(t *testing.T) {
	w := safetensors.Tensor{Name: "l.weight", DType: safetensors.F8_E4M3, Shape: []uint64{200, 300}, Data: make([]byte, 200*300)}
	s, err := safetensors.TensorFromFloat32s("l.weight_scale_inv", safetensors.F32, []uint64{1, 3}, []float32{1, 1, 1}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Tensor{w, s}, nil))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`), 0o666))
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	q, err := c.Quantization(context.Background())
	require.NoError(t, err)
	require.Len(t, q.Weights, 1)
	require.Error(t, q.Weights[0].Err)
	assert.Contains(t, q.Weights[0].Err.Error(), "not [2 3] for blocks of 128x128")
	_, err = Convert(context.Background(), dir, filepath.Join(t.TempDir(), "out"), safetensors.BF16, Dequantize())
	assert.ErrorIs(t, err, ErrQuantized)
	assert.Contains(t, err.Error(), "l.weight")
}

func TestConvertDequantize(t *testing.T) {
	t.Run("chunks of a tensor", func(t *testing.T) {
		// Chunks of a row or two for FP8 (rows of a block in several
		// chunks), of a group of 32 rows for MXFP4.
		defer func(n uint64) { dequantChunkValues = n }(dequantChunkValues)
		dequantChunkValues = 400
		testConvertDequantize(t)
	})
	testConvertDequantize(t)
}

func testConvertDequantize(t *testing.T) {
	ctx := context.Background()
	for _, dir := range quantizedDirs {
		for _, to := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
			t.Run(dir+"/"+to.String(), func(t *testing.T) {
				src := quantizedFixture(dir)
				out := filepath.Join(t.TempDir(), "out")
				var done, total uint64
				cv, err := Convert(ctx, src, out, to, Dequantize(), Progress(func(d, t uint64) { done, total = d, t }))
				require.NoError(t, err)
				assert.Equal(t, total, done, "the progress reaches the total")
				assert.Positive(t, total)
				assertSameTensors(t, filepath.Join(src, "want-"+to.String()+".safetensors"), filepath.Join(out, "model.safetensors"))
				assert.Positive(t, cv.Dequantized)
				cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
				require.NoError(t, err)
				assert.NotContains(t, string(cfg), "quantization_config")
				assert.Contains(t, string(cfg), `"model_type"`)
				c, err := Open(ctx, out)
				require.NoError(t, err)
				defer c.Close()
				q, err := c.Quantization(ctx)
				require.NoError(t, err)
				assert.Nil(t, q, "the output is a plain model")

				if dir == "ct-dense" {
					// Alone, plain weights beside tensors of another
					// name, which only its config.json says are scales.
					return
				}
				// A lone file, whose block size is inferred.
				lone := filepath.Join(t.TempDir(), "in.safetensors")
				data, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(lone, data, 0o666))
				outFile := filepath.Join(t.TempDir(), "out.safetensors")
				_, err = Convert(ctx, lone, outFile, to, Dequantize())
				require.NoError(t, err)
				assertSameTensors(t, filepath.Join(src, "want-"+to.String()+".safetensors"), outFile)
			})
		}
	}
}

// TestConvertDequantizeRemoteSharded reads the model over HTTP (through
// ReadAt, in the converter's own memory), and as shards whose scales may
// be in another shard than their weight.
func TestConvertDequantizeRemoteSharded(t *testing.T) {
	ctx := context.Background()
	for _, dir := range []string{"fp8", "mxfp4"} {
		src := quantizedFixture(dir)
		r, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
		require.NoError(t, err)
		ts, err := r.Tensors()
		require.NoError(t, err)
		sharded := t.TempDir()
		require.NoError(t, Write(sharded, ts, MaxShardSize(1000)))
		require.NoError(t, r.Close())
		shards, _ := filepath.Glob(filepath.Join(sharded, "*.safetensors"))
		require.GreaterOrEqual(t, len(shards), 2)
		cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(sharded, "config.json"), cfg, 0o666))
		srv := serveDir(t, sharded)
		for _, in := range []string{sharded, srv.base} {
			out := filepath.Join(t.TempDir(), "out")
			_, err := Convert(ctx, in, out, safetensors.BF16, Dequantize())
			require.NoError(t, err)
			c, err := Open(ctx, out)
			require.NoError(t, err)
			got, err := c.Tensors()
			require.NoError(t, err)
			merged := filepath.Join(t.TempDir(), "merged.safetensors")
			require.NoError(t, safetensors.WriteFile(merged, got, nil))
			require.NoError(t, c.Close())
			assertSameTensors(t, filepath.Join(src, "want-BF16.safetensors"), merged)
			cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
			require.NoError(t, err)
			assert.NotContains(t, string(cfg), "quantization_config")
		}
	}
}

func TestConvertQuantizedRefused(t *testing.T) {
	for _, tc := range []struct{ dir, method string }{{"fp8", "fp8, blocks of 128x128"}, {"mxfp4", "mxfp4, blocks of 1x32"}} {
		out := filepath.Join(t.TempDir(), "out")
		_, err := Convert(context.Background(), quantizedFixture(tc.dir), out, safetensors.BF16)
		require.ErrorIs(t, err, ErrQuantized)
		assert.Contains(t, err.Error(), "quantized model ("+tc.method+")")
		assert.Contains(t, err.Error(), "dequantize")
		_, statErr := os.Lstat(out)
		assert.True(t, errors.Is(statErr, os.ErrNotExist), "nothing written")
	}
	_, err := Convert(context.Background(), quantizedFixture("fp8"), filepath.Join(t.TempDir(), "out"), safetensors.F16, Dequantize())
	assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
}

// TestDequantizeHostile: tensors that do not fit their method are refused
// with the weight named, never read out of bounds.
func TestDequantizeHostile(t *testing.T) {
	tensor := func(name string, d safetensors.DType, shape []uint64, data []byte) safetensors.Tensor {
		n := numElements(shape) * uint64(d.Bits()) / 8
		if data == nil {
			data = make([]byte, n)
		}
		return safetensors.Tensor{Name: name, DType: d, Shape: shape, Data: data}
	}
	i64 := func(vs ...int64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	ct := `{"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 128}}}}}`
	mx4 := `{"quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"}}`
	for _, tc := range []struct {
		name, config, want string
		tensors            []safetensors.Tensor
	}{
		{"mxfp4 blocks of 8", `{"quantization_config": {"quant_method": "mxfp4"}}`, "not [experts, rows, groups, 16]",
			[]safetensors.Tensor{tensor("e_blocks", safetensors.U8, []uint64{2, 3, 4, 8}, nil), tensor("e_scales", safetensors.U8, []uint64{2, 3, 4}, nil)}},
		{"mxfp4 scales of another shape", `{"quantization_config": {"quant_method": "mxfp4"}}`, "have shape [2 3 5]",
			[]safetensors.Tensor{tensor("e_blocks", safetensors.U8, []uint64{2, 3, 4, 16}, nil), tensor("e_scales", safetensors.U8, []uint64{2, 3, 5}, nil)}},
		{"fp8 scale of one dimension", `{"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`, "not [1 1] for blocks",
			[]safetensors.Tensor{tensor("l.weight", safetensors.F8_E4M3, []uint64{100, 100}, nil), tensor("l.weight_scale_inv", safetensors.F32, []uint64{1}, nil)}},
		{"fp8 weight of one dimension", `{"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`, "blocks need two dimensions",
			[]safetensors.Tensor{tensor("l.weight", safetensors.F8_E4M3, []uint64{100}, nil), tensor("l.weight_scale_inv", safetensors.F32, []uint64{1}, nil)}},
		{"packed shape larger than its words", ct, "not [64, ceil(4096*4/32)]",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil),
				tensor("l.weight_shape", safetensors.I64, []uint64{2}, i64(64, 4096))}},
		{"packed shape negative", ct, "does not hold two sizes",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil),
				tensor("l.weight_shape", safetensors.I64, []uint64{2}, i64(64, -1))}},
		{"packed shape of three", ct, "not two integers",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil),
				tensor("l.weight_shape", safetensors.I64, []uint64{3}, i64(64, 128, 1))}},
		{"packed without its shape", ct, "without its weight_shape",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil)}},
		{"group not dividing", ct, "fits no strategy",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 3}, nil),
				tensor("l.weight_shape", safetensors.I64, []uint64{2}, i64(64, 128))}},
		{"zero points of another shape", ct, "its zero points",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil),
				tensor("l.weight_zero_point", safetensors.I32, []uint64{64, 1}, nil), tensor("l.weight_shape", safetensors.I64, []uint64{2}, i64(64, 128))}},
		{"mxfp4 scales of groups of 16", mx4, "not [4, 64/32]",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.U8, []uint64{4, 32}, nil), tensor("l.weight_scale", safetensors.U8, []uint64{4, 4}, nil)}},
		{"mxfp4 scales of F32", mx4, "not U8 (E8M0",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.U8, []uint64{4, 32}, nil), tensor("l.weight_scale", safetensors.F32, []uint64{4, 2}, nil)}},
		{"mxfp4 with zero points", mx4, "symmetric only",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.U8, []uint64{4, 32}, nil), tensor("l.weight_scale", safetensors.U8, []uint64{4, 2}, nil),
				tensor("l.weight_zero_point", safetensors.U8, []uint64{4, 2}, nil)}},
		{"mxfp6 rows of partial codes", `{"quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp6-pack-quantized"}}`, "not of whole 3 bytes",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.U8, []uint64{4, 25}, nil), tensor("l.weight_scale", safetensors.U8, []uint64{4, 1}, nil)}},
		{"packed shape of absurd columns", ct, "not [64, ceil(4294967295*4/32)]",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil),
				tensor("l.weight_shape", safetensors.I64, []uint64{2}, i64(64, 1<<32-1))}},
		{"packed shape of absurd rows", ct, "not [4294967295, ceil(128*4/32)]",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.I32, []uint64{64, 16}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{64, 1}, nil),
				tensor("l.weight_shape", safetensors.I64, []uint64{2}, i64(1<<32-1, 128))}},
		{"a float weight in a quantized format", `{"quantization_config": {"quant_method": "compressed-tensors", "format": "int-quantized"}}`, "is BF16, not I8",
			[]safetensors.Tensor{tensor("l.weight", safetensors.BF16, []uint64{4, 8}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{4, 1}, nil),
				tensor("m.weight", safetensors.I8, []uint64{4, 8}, nil), tensor("m.weight_scale", safetensors.BF16, []uint64{4, 1}, nil)}},
		{"a sparse format", `{"quantization_config": {"quant_method": "compressed-tensors", "format": "sparse-24-bitmask"}}`, "(compressed-tensors sparse-24-bitmask), which Convert does not dequantize",
			[]safetensors.Tensor{tensor("l.weight", safetensors.I8, []uint64{4, 8}, nil), tensor("l.weight_scale", safetensors.BF16, []uint64{4, 1}, nil)}},
		{"nvfp4 without its global scale", `{"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}}`, "without its weight_global_scale",
			[]safetensors.Tensor{tensor("l.weight_packed", safetensors.U8, []uint64{4, 8}, nil), tensor("l.weight_scale", safetensors.F8_E4M3, []uint64{4, 1}, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tc.tensors, nil))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o666))
			_, err := Convert(context.Background(), dir, filepath.Join(t.TempDir(), "out"), safetensors.BF16, Dequantize())
			require.ErrorIs(t, err, ErrQuantized)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestDequantizeEmptyCompressed: packed weights of no rows or no columns
// are dequantized to empty weights of their shape, reading nothing.
func TestDequantizeEmptyCompressed(t *testing.T) {
	i64 := func(vs ...int64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	ct := `{"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {"weights": {"num_bits": 4}}}}}`
	for _, shape := range [][]uint64{{0, 128}, {64, 0}} {
		dir := t.TempDir()
		words := (shape[1]*4 + 31) / 32
		ts := []safetensors.Tensor{
			{Name: "l.weight_packed", DType: safetensors.I32, Shape: []uint64{shape[0], words}, Data: make([]byte, 4*shape[0]*words)},
			{Name: "l.weight_scale", DType: safetensors.BF16, Shape: []uint64{shape[0], 1}, Data: make([]byte, 2*shape[0])},
			{Name: "l.weight_shape", DType: safetensors.I64, Shape: []uint64{2}, Data: i64(int64(shape[0]), int64(shape[1]))},
		}
		require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(ct), 0o666))
		out := filepath.Join(t.TempDir(), "out")
		_, err := Convert(context.Background(), dir, out, safetensors.BF16, Dequantize())
		require.NoError(t, err, "%v", shape)
		r, err := safetensors.Open(filepath.Join(out, "model.safetensors"))
		require.NoError(t, err)
		info, err := r.Info("l.weight")
		require.NoError(t, err)
		assert.Equal(t, shape, info.Shape)
		assert.Equal(t, []string{"l.weight"}, r.Names())
		require.NoError(t, r.Close())
	}
}

// TestInferBlockSize: a lone file's FP8 block size is the power of two
// that gives its scales' shapes; a block of another size is ambiguous,
// and Convert refuses to guess it.
func TestInferBlockSize(t *testing.T) {
	infos := func(shapes ...[2][2]uint64) []safetensors.TensorInfo {
		var ts []safetensors.TensorInfo
		for i, s := range shapes {
			w := fmt.Sprintf("l%d.weight", i)
			ts = append(ts, safetensors.TensorInfo{Name: w, DType: safetensors.F8_E4M3, Shape: s[0][:]},
				safetensors.TensorInfo{Name: w + "_scale_inv", DType: safetensors.F32, Shape: s[1][:]})
		}
		return ts
	}
	for _, tc := range []struct {
		shapes    [][2][2]uint64
		block     []uint64
		ambiguous string
	}{
		{[][2][2]uint64{{{400, 300}, {4, 3}}, {{128, 7}, {1, 1}}}, []uint64{128, 128}, ""},
		{[][2][2]uint64{{{100, 70}, {2, 2}}}, []uint64{64, 64}, ""},
		{[][2][2]uint64{{{128, 128}, {1, 1}}}, []uint64{128, 128}, ""}, // any of 128, 256, ... alike
		{[][2][2]uint64{{{500, 500}, {5, 5}}}, nil, "no power of two"}, // blocks of 100 to 124
	} {
		q := RecognizeQuantization(nil, infos(tc.shapes...))
		require.NotNil(t, q)
		assert.True(t, q.Inferred)
		assert.Equal(t, tc.block, q.BlockSize, "%v", tc.shapes)
		if tc.ambiguous == "" {
			assert.Empty(t, q.Ambiguous)
		} else {
			assert.Contains(t, q.Ambiguous, tc.ambiguous)
		}
	}
}
