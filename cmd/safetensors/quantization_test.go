package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// quantized is a folder of testdata/quantized: checkpoints made with
// transformers' code, and its reference dequantizations (see make.py).
func quantized(name string) string { return filepath.Join("..", "..", "testdata", "quantized", name) }

// TestConvertQuantized: convert refuses a quantized model, naming the
// method, and writes nothing; --dequantize writes the reference's values.
func TestConvertQuantized(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	status, stdout, stderr := runCmd("convert", "--dtype", "BF16", quantized("fp8"), out)
	assert.Equal(t, exitTrouble, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "quantized model (fp8, blocks of 128x128): converting it would recast its quantized weights or their scales; dequantize it")
	_, err := os.Lstat(out)
	assert.ErrorIs(t, err, os.ErrNotExist)

	for _, dir := range []string{"fp8", "mxfp4"} {
		out := filepath.Join(t.TempDir(), "out")
		status, stdout, stderr = runCmd("convert", "--json", "--dequantize", "--dtype", "F32", quantized(dir), out)
		require.Equal(t, exitOK, status, stderr)
		var o convertOutput
		require.NoError(t, json.Unmarshal([]byte(stdout), &o))
		assert.Equal(t, 2+map[string]int{"fp8": 1}[dir], o.DequantizedCount)
		want, err := safetensors.Open(filepath.Join(quantized(dir), "want-F32.safetensors"))
		require.NoError(t, err)
		got, err := safetensors.Open(filepath.Join(out, "model.safetensors"))
		require.NoError(t, err)
		assert.Equal(t, want.Names(), got.Names())
		for _, n := range want.Names() {
			a, err := want.Tensor(n)
			require.NoError(t, err)
			b, err := got.Tensor(n)
			require.NoError(t, err)
			assert.True(t, string(a.Data) == string(b.Data), "%s: %s differs from the reference's", dir, n)
		}
		want.Close()
		got.Close()
	}

	status, _, stderr = runCmd("convert", "--dequantize", "--dtype", "F16", quantized("fp8"), filepath.Join(t.TempDir(), "out"))
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "--dequantize writes BF16 or F32, not F16\nrun 'safetensors help convert' for usage\n")
}

// TestInspectQuantized: inspect says the method, the block size, the
// weights quantized and the bits per parameter.
func TestInspectQuantized(t *testing.T) {
	status, stdout, stderr := runCmd("inspect", quantized("fp8"))
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "\nquantization: fp8, blocks of 128x128; 3 weights quantized, 8 bits per parameter\n")
	assert.Contains(t, stdout, "  layers.0.proj.weight [150, 300], 8 bits: layers.0.proj.weight, layers.0.proj.weight_scale_inv\n")

	status, stdout, stderr = runCmd("inspect", "--json", quantized("mxfp4"))
	require.Equal(t, exitOK, status, stderr)
	var s summary
	require.NoError(t, json.Unmarshal([]byte(stdout), &s))
	require.NotNil(t, s.Quantization)
	q := s.Quantization
	assert.Equal(t, "mxfp4", q.Method)
	assert.Equal(t, []uint64{1, 32}, q.BlockSize)
	assert.Equal(t, 4.25, q.BitsPerParameter)
	assert.Equal(t, 2, q.WeightCount)
	require.Len(t, q.Weights, 2)
	assert.Equal(t, quantWeightSummary{Name: "model.layers.0.mlp.experts.down_proj", Shape: []uint64{2, 64, 6}, Bits: 4,
		Tensors: []string{"model.layers.0.mlp.experts.down_proj_blocks", "model.layers.0.mlp.experts.down_proj_scales"}}, q.Weights[0])

	// Not quantized: no quantization.
	status, stdout, _ = runCmd("inspect", "--json", filepath.Join(quantized("fp8"), "want-BF16.safetensors"))
	require.Equal(t, exitOK, status)
	assert.NotContains(t, stdout, "quantization")
}
