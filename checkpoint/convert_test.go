package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// convertFixture returns tensors of every kind Convert meets: floats of
// each convertible dtype, with values that 16 bits round, an integer
// tensor, an F8 tensor, and an empty one.
func convertFixture(t *testing.T, prefix string) []safetensors.Tensor {
	t.Helper()
	vals := []float32{1, -2.5, 3.14159265, 1e-3, 65504, 1.0000001, float32(math.Inf(1)), 0}
	var ts []safetensors.Tensor
	for _, d := range []safetensors.DType{safetensors.F32, safetensors.F16, safetensors.BF16} {
		tn, err := safetensors.TensorFromFloat32s(prefix+"w_"+d.String(), d, []uint64{2, 4}, vals, safetensors.RoundNearestEven)
		require.NoError(t, err)
		ts = append(ts, tn)
	}
	f64 := make([]byte, 8*len(vals))
	for i, v := range vals {
		putF64(f64[8*i:], float64(v)*1.000000001)
	}
	ts = append(ts,
		safetensors.Tensor{Name: prefix + "w_F64", DType: safetensors.F64, Shape: []uint64{8}, Data: f64},
		safetensors.Tensor{Name: prefix + "ids", DType: safetensors.I64, Shape: []uint64{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
		safetensors.Tensor{Name: prefix + "fp8", DType: safetensors.F8_E4M3, Shape: []uint64{3}, Data: []byte{0x38, 0x40, 0xb8}},
		safetensors.Tensor{Name: prefix + "empty", DType: safetensors.F32, Shape: []uint64{0, 3}},
	)
	return ts
}

func putF64(b []byte, v float64) {
	u := math.Float64bits(v)
	for i := range 8 {
		b[i] = byte(u >> (8 * i))
	}
}

// converted returns what Convert should make of t: its values through
// float32, cast to dtype with r, or t as it is for a dtype Convert keeps.
func converted(t *testing.T, tn safetensors.Tensor, to safetensors.DType, r safetensors.Rounding) safetensors.Tensor {
	t.Helper()
	if !Convertible(tn.DType) {
		return tn
	}
	vals, err := tn.Float32s()
	require.NoError(t, err)
	out, err := safetensors.TensorFromFloat32s(tn.Name, to, tn.Shape, vals, r)
	require.NoError(t, err)
	return out
}

// assertConverted checks that the checkpoint at path holds want's tensors
// converted to dtype with r, with want's metadata.
func assertConverted(t *testing.T, path string, want []safetensors.Tensor, to safetensors.DType, r safetensors.Rounding) {
	t.Helper()
	got, _, err := Load(context.Background(), path)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for _, w := range want {
		c := converted(t, w, to, r)
		g, ok := got[w.Name]
		require.True(t, ok, w.Name)
		assert.Equal(t, c.DType, g.DType, w.Name)
		assert.Equal(t, c.Shape, g.Shape, w.Name)
		assert.True(t, bytes.Equal(c.Data, g.Data), "%s: %x, want %x", w.Name, g.Data, c.Data)
	}
}

// TestConvertFile: a file converts to a file, byte for byte what writing
// the converted tensors with the reference's layout gives, its metadata
// kept; a file already at the destination is replaced, the source itself
// refused.
func TestConvertFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "in.safetensors")
	ts := convertFixture(t, "")
	require.NoError(t, safetensors.WriteFile(src, ts, map[string]string{"format": "pt"}))
	for _, to := range []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32} {
		for _, r := range []safetensors.Rounding{safetensors.RoundNearestEven, safetensors.Truncate} {
			dst := filepath.Join(dir, "out.safetensors")
			var last [2]uint64
			sum, err := Convert(context.Background(), src, dst, to, Rounding(r), Progress(func(done, total uint64) { last = [2]uint64{done, total} }))
			require.NoError(t, err)
			assertConverted(t, dst, ts, to, r)
			// The whole file is what Write gives for the converted tensors.
			want := make([]safetensors.Tensor, len(ts))
			changed := 0
			for i, tn := range ts {
				want[i] = converted(t, tn, to, r)
				if want[i].DType != tn.DType {
					changed++
				}
			}
			expect := filepath.Join(dir, "expect.safetensors")
			require.NoError(t, safetensors.WriteFile(expect, want, map[string]string{"format": "pt"}))
			a, _ := os.ReadFile(dst)
			b, _ := os.ReadFile(expect)
			assert.Equal(t, b, a, "%v %v", to, r)
			assert.Equal(t, []string{"out.safetensors"}, sum.Files)
			assert.Equal(t, len(ts), sum.Tensors)
			assert.Equal(t, changed, sum.Converted)
			assert.Equal(t, uint64(len(a)), sum.Bytes)
			assert.Equal(t, last[0], last[1], "Progress ends at the total")
			assert.NotZero(t, last[1])
		}
	}
	_, err := Convert(context.Background(), src, src, safetensors.F16)
	assert.ErrorContains(t, err, "the same file")
	if linktest.Symlink(t, src, filepath.Join(dir, "link.safetensors")) {
		_, err = Convert(context.Background(), src, filepath.Join(dir, "link.safetensors"), safetensors.F16)
		assert.ErrorContains(t, err, "the same file")
	}
	_, err = Convert(context.Background(), src, filepath.Join(dir, "x.safetensors"), safetensors.I8)
	assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
	assert.NoFileExists(t, filepath.Join(dir, "x.safetensors"))
}

// TestConvertModel: a sharded checkpoint converts to a folder of the same
// files, its index's total_size updated and the rest kept, the other files
// of the folder copied but weights of other formats; a model of several
// parts likewise, part by part; the destination must not exist.
func TestConvertModel(t *testing.T) {
	src := t.TempDir()
	ts := convertFixture(t, "model.")
	require.NoError(t, Write(src, ts, MaxShardSize(64), FileMetadata(map[string]string{"format": "pt"})))
	editIndex(t, src, func(ix map[string]any) { ix["metadata"].(map[string]any)["note"] = "kept" })
	writeJSON(t, filepath.Join(src, "config.json"), map[string]any{"model_type": "llama"})
	writeJSON(t, filepath.Join(src, "tokenizer", "vocab.json"), map[string]any{"a": 1})
	require.NoError(t, os.WriteFile(filepath.Join(src, "pytorch_model.bin"), []byte("pickle"), 0o644))

	dst := filepath.Join(t.TempDir(), "out")
	sum, err := Convert(context.Background(), src, dst, safetensors.BF16)
	require.NoError(t, err)
	assertConverted(t, dst, ts, safetensors.BF16, safetensors.RoundNearestEven)
	in, err := Open(context.Background(), src)
	require.NoError(t, err)
	defer in.Close()
	out, err := Open(context.Background(), dst)
	require.NoError(t, err)
	defer out.Close()
	assert.Equal(t, in.Files(), out.Files())
	assert.Equal(t, in.Files(), sum.Files)
	assert.Equal(t, "model.safetensors.index.json", out.Index())
	var total uint64
	for _, name := range out.Names() {
		info, err := out.Info(name)
		require.NoError(t, err)
		total += info.DataOffsets[1] - info.DataOffsets[0]
	}
	meta := out.IndexMetadata()
	assert.Equal(t, "kept", meta["note"])
	assert.Equal(t, in.IndexMetadata()["total_parameters"], meta["total_parameters"])
	assert.Equal(t, json.Number(meta["total_size"]).String(), jsonInt(total))
	assert.ElementsMatch(t, []string{"config.json", "tokenizer/vocab.json"}, sum.Copied)
	assert.FileExists(t, filepath.Join(dst, "tokenizer", "vocab.json"))
	assert.NoFileExists(t, filepath.Join(dst, "pytorch_model.bin"))
	assert.Equal(t, []string{"out"}, dirNames(t, filepath.Dir(dst)), "no temporary folder left")

	_, err = Convert(context.Background(), src, dst, safetensors.F16)
	assert.ErrorIs(t, err, fs.ErrExist)

	// A pipeline: each part's files, model_index.json and the parts'
	// config.json and the scheduler's folder copied.
	pipe := t.TempDir()
	writeJSON(t, filepath.Join(pipe, "model_index.json"), map[string]any{"_class_name": "P", "unet": []any{"diffusers", "U"}, "scheduler": []any{"diffusers", "S"}})
	unet := convertFixture(t, "")
	require.NoError(t, Write(filepath.Join(pipe, "unet"), unet, BaseName("diffusion_pytorch_model")))
	writeJSON(t, filepath.Join(pipe, "unet", "config.json"), map[string]any{})
	writeJSON(t, filepath.Join(pipe, "scheduler", "scheduler_config.json"), map[string]any{})
	pdst := filepath.Join(t.TempDir(), "pipe")
	sum, err = Convert(context.Background(), pipe, pdst, safetensors.F16)
	require.NoError(t, err)
	assert.Equal(t, []string{"unet/diffusion_pytorch_model.safetensors"}, sum.Files)
	assert.ElementsMatch(t, []string{"model_index.json", "scheduler/scheduler_config.json", "unet/config.json"}, sum.Copied)
	prefixed := make([]safetensors.Tensor, len(unet))
	for i, tn := range unet {
		tn.Name = "unet/" + tn.Name
		prefixed[i] = tn
	}
	assertConverted(t, pdst, prefixed, safetensors.F16, safetensors.RoundNearestEven)
}

func jsonInt(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestConvertRemote: a model over HTTP converts to a folder of its weights
// and index, and the files that found it; a pipeline over HTTP to one that
// opens as a pipeline.
func TestConvertRemote(t *testing.T) {
	src := t.TempDir()
	ts := convertFixture(t, "")
	require.NoError(t, Write(src, ts, MaxShardSize(64)))
	writeJSON(t, filepath.Join(src, "config.json"), map[string]any{})
	srv := serveDir(t, src)
	dst := filepath.Join(t.TempDir(), "out")
	sum, err := Convert(context.Background(), srv.base, dst, safetensors.F16)
	require.NoError(t, err)
	assertConverted(t, dst, ts, safetensors.F16, safetensors.RoundNearestEven)
	assert.Equal(t, []string{"config.json"}, sum.Copied, "the files Open read")
	names := dirNames(t, dst)
	assert.True(t, slices.Contains(names, "model.safetensors.index.json"), "%v", names)

	pipe := t.TempDir()
	writeJSON(t, filepath.Join(pipe, "model_index.json"), map[string]any{"_class_name": "P", "unet": []any{"diffusers", "U"}, "vae": []any{"diffusers", "V"}})
	for _, part := range []string{"unet", "vae"} {
		require.NoError(t, Write(filepath.Join(pipe, part), ts, BaseName("diffusion_pytorch_model")))
		writeJSON(t, filepath.Join(pipe, part, "config.json"), map[string]any{"_class_name": part})
	}
	psrv := serveDir(t, pipe)
	pdst := filepath.Join(t.TempDir(), "pipe")
	sum, err = Convert(context.Background(), psrv.base, pdst, safetensors.BF16)
	require.NoError(t, err)
	assert.Equal(t, []string{"model_index.json", "unet/config.json", "vae/config.json"}, sum.Copied)
	c, err := Open(context.Background(), pdst)
	require.NoError(t, err)
	assert.Len(t, c.Parts(), 2)
	require.NoError(t, c.Close())
}

// TestConvertStopped: a conversion whose context ends leaves nothing
// behind, and its error wraps the cause.
func TestConvertStopped(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, Write(src, convertFixture(t, ""), MaxShardSize(64)))
	parent := t.TempDir()
	cause := errors.New("shutdown")
	ctx, cancel := context.WithCancelCause(context.Background())
	calls := 0
	_, err := Convert(ctx, src, filepath.Join(parent, "out"), safetensors.F16, Progress(func(done, total uint64) {
		if calls++; calls == 2 {
			cancel(cause)
		}
	}))
	require.Error(t, err)
	assert.ErrorIs(t, err, cause)
	assert.Empty(t, dirNames(t, parent), "nothing left behind")

	file := filepath.Join(src, "single.safetensors")
	require.NoError(t, safetensors.WriteFile(file, convertFixture(t, ""), nil))
	calls = 0
	ctx, cancel = context.WithCancelCause(context.Background())
	_, err = Convert(ctx, file, filepath.Join(parent, "one.safetensors"), safetensors.F16, Progress(func(done, total uint64) {
		if calls++; calls == 2 {
			cancel(cause)
		}
	}))
	assert.ErrorIs(t, err, cause)
	assert.Empty(t, dirNames(t, parent), "no temporary file left")
}
