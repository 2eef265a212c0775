package check

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// fp8Llama returns the tiny llama of testdata/models as DeepSeek-V3 and
// Qwen3-FP8 store theirs: each Linear weight of the blocks F8_E4M3 beside
// its F32 weight_scale_inv, one scale a block of bo x bi values, the
// rest as it was; and its config with the quantization_config.
func fp8Llama(t *testing.T, bo, bi uint64) ([]safetensors.Tensor, map[string]any) {
	ts, cfg := load(t, "llama")
	var out []safetensors.Tensor
	for _, tn := range ts {
		if !strings.HasPrefix(tn.Name, "model.layers.") || len(tn.Shape) != 2 {
			out = append(out, tn)
			continue
		}
		n := tn.Shape[0] * tn.Shape[1]
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(0x30 + i%0x40) // finite E4M3 values, none zero
		}
		out = append(out, safetensors.Tensor{Name: tn.Name, DType: safetensors.F8_E4M3, Shape: tn.Shape, Data: data})
		rows, cols := (tn.Shape[0]+bo-1)/bo, (tn.Shape[1]+bi-1)/bi
		scales := make([]float32, rows*cols)
		for i := range scales {
			scales[i] = 0.01 + float32(i)/1000
		}
		s, err := safetensors.TensorFromFloat32s(tn.Name+"_scale_inv", safetensors.F32, []uint64{rows, cols}, scales, safetensors.RoundNearestEven)
		require.NoError(t, err)
		out = append(out, s)
	}
	cfg["quantization_config"] = map[string]any{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": []any{bo, bi}}
	return out, cfg
}

// TestQuantizedHealthy: a healthy FP8 model raises no finding, its F8
// weights and F32 scales beside BF16 norms no "mixed dtypes", with
// whole blocks and partial ones.
func TestQuantizedHealthy(t *testing.T) {
	for _, b := range [][2]uint64{{128, 128}, {16, 16}, {5, 7}} {
		ts, cfg := fp8Llama(t, b[0], b[1])
		r := checkModel(t, ts, cfg)
		assert.Empty(t, r.Findings, "blocks %v", b)
		require.Len(t, r.Notes, 1)
		assert.Contains(t, r.Notes[0], "quantized (fp8, blocks of")
	}
}

// TestQuantizedDefects: a scale of the wrong shape, and scales zero or
// negative, are errors of the quantization.
func TestQuantizedDefects(t *testing.T) {
	ts, cfg := fp8Llama(t, 5, 7)
	for i, tn := range ts {
		switch tn.Name {
		case "model.layers.1.mlp.gate_proj.weight_scale_inv":
			ts[i].Shape = []uint64{tn.Shape[1], tn.Shape[0]} // transposed
		case "model.layers.2.self_attn.o_proj.weight_scale_inv":
			d := append([]byte(nil), tn.Data...)
			binary.LittleEndian.PutUint32(d[0:], math.Float32bits(0))
			binary.LittleEndian.PutUint32(d[4:], math.Float32bits(-1))
			ts[i].Data = d
		}
	}
	r := checkModel(t, ts, cfg)
	got := find(r, KindQuantization, "model.layers.1.mlp.gate_proj.weight")
	require.Len(t, got, 1, "%v", r.Findings)
	assert.Equal(t, Error, got[0].Severity)
	assert.Contains(t, got[0].Message, "for blocks of 5x7")
	got = find(r, KindQuantization, "model.layers.2.self_attn.o_proj.weight_scale_inv")
	require.Len(t, got, 1, "%v", r.Findings)
	assert.Equal(t, uint64(2), got[0].Count)
	assert.Equal(t, uint64(0), *got[0].First)
	assert.Contains(t, got[0].Message, "2 values of the scales of model.layers.2.self_attn.o_proj.weight are not positive")
}

// TestQuantizedFixtures: the checkpoints of testdata/quantized, made by
// transformers' code, raise no false alarm about their quantization or
// dtypes; an MXFP4 scale of 0xff (E8M0's NaN) is an error.
func TestQuantizedFixtures(t *testing.T) {
	for _, dir := range []string{"fp8", "fp8-64", "mxfp4", "ct-int", "ct-float", "ct-w4", "ct-w4-asym", "ct-w8", "ct-nvfp4",
		"ct-w3", "ct-naive", "ct-mxfp4", "ct-mxfp6", "ct-mxfp8", "ct-dense", "ct-mixed", "ct-fp8-block", "ct-int-block"} {
		r, err := Model(t.Context(), filepath.Join("..", "testdata", "quantized", dir))
		require.NoError(t, err)
		for _, f := range r.Findings {
			assert.NotEqual(t, KindDTypes, f.Kind, "%s: %v", dir, f)
			if dir != checkpoint.MethodMXFP4 {
				assert.NotEqual(t, KindQuantization, f.Kind, "%s: %v", dir, f)
			}
		}
		if dir == checkpoint.MethodMXFP4 {
			// make.py sets one scale of gate_up_proj to 255.
			got := find(r, KindQuantization, "model.layers.0.mlp.experts.gate_up_proj_scales")
			require.Len(t, got, 1, "%v", r.Findings)
			assert.Contains(t, got[0].Message, "1 value of the scales of model.layers.0.mlp.experts.gate_up_proj is 0xff, E8M0's NaN")
		}
	}
}

// TestCompressedMXScaleNaN: an E8M0 scale of 0xff in compressed-tensors'
// MX formats (2^128, which overflows BF16) is an error.
func TestCompressedMXScaleNaN(t *testing.T) {
	src := filepath.Join("..", "testdata", "quantized", "ct-mxfp8")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		if f == "model.safetensors" {
			r, err := safetensors.Open(filepath.Join(src, f))
			require.NoError(t, err)
			info, err := r.Info("model.layers.1.mlp.down_proj.weight_scale")
			require.NoError(t, err)
			at := r.Header().DataOffset() + info.DataOffsets[0] + 3
			require.NoError(t, r.Close())
			data[at] = 0xff
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o666))
	}
	r, err := Model(t.Context(), dir)
	require.NoError(t, err)
	got := find(r, KindQuantization, "model.layers.1.mlp.down_proj.weight_scale")
	require.Len(t, got, 1, "%v", r.Findings)
	assert.Equal(t, uint64(3), *got[0].First)
	assert.Contains(t, got[0].Message, "1 value of the scales of model.layers.1.mlp.down_proj.weight is 0xff, E8M0's NaN")
}
