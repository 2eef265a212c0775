package checkpoint

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingWriter counts the bytes of the bodies it writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

// TestDequantizeMXFP4ReadsOnce: an MXFP4 model read through ReadAt (over
// HTTP, and a local file too large to map) is dequantized as the mapped
// file is, each expert of several chunks read once: the bytes served are
// the file's, not its experts' spans once per chunk.
func TestDequantizeMXFP4ReadsOnce(t *testing.T) {
	const experts, rows, groups = 4, 64, 64 // 256 KiB of blocks: more than the remote package's first read
	rng := rand.New(rand.NewPCG(5, 6))
	blocks := make([]byte, experts*rows*groups*16)
	scales := make([]byte, experts*rows*groups)
	for i := range blocks {
		blocks[i] = byte(rng.Uint32())
	}
	for i := range scales {
		scales[i] = byte(100 + rng.IntN(50))
		if i%97 == 0 {
			scales[i] = byte(rng.Uint32()) // extreme scales too
		}
	}
	dir := t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Tensor{
		{Name: "model.layers.0.mlp.experts.gate_up_proj_blocks", DType: safetensors.U8, Shape: []uint64{experts, rows, groups, 16}, Data: blocks},
		{Name: "model.layers.0.mlp.experts.gate_up_proj_scales", DType: safetensors.U8, Shape: []uint64{experts, rows, groups}, Data: scales},
	}, nil))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}}`), 0o666))
	info, err := os.Stat(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)

	// Chunks of 5 groups: 13 an expert, the last of 4.
	defer func(n uint64) { dequantChunkValues = n }(dequantChunkValues)
	dequantChunkValues = 32 * rows * 5
	ctx := context.Background()
	for _, to := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
		want := filepath.Join(t.TempDir(), "want")
		_, err := Convert(ctx, dir, want, to, Dequantize()) // mapped
		require.NoError(t, err)
		wantData, err := os.ReadFile(filepath.Join(want, "model.safetensors"))
		require.NoError(t, err)
		// The mapped output against the kernel's rule, value by value.
		r, err := safetensors.NewReader(wantData)
		require.NoError(t, err)
		got, err := r.Tensor("model.layers.0.mlp.experts.gate_up_proj")
		require.NoError(t, err)
		size := int(to.Bits() / 8)
		naive := make([]byte, experts*rows*groups*32*size)
		for e := range experts {
			n := rows * groups * 32 * size
			mxfp4ExpertNaive(naive[e*n:(e+1)*n], size, rows, groups, blocks[e*rows*groups*16:], groups*16, scales[e*rows*groups:], groups)
		}
		require.Equal(t, naive, got.Data)

		var served atomic.Int64
		files := http.StripPrefix("/org/model/resolve/main", http.FileServer(http.Dir(dir)))
		srv := serveDirDelayed(t, dir, 0, func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, ".safetensors") {
				files.ServeHTTP(countingWriter{w, &served}, r)
				return true
			}
			return false
		})
		out := filepath.Join(t.TempDir(), "http")
		_, err = Convert(ctx, srv.base, out, to, Dequantize())
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
		require.NoError(t, err)
		assert.True(t, string(wantData) == string(data), "over HTTP: the mapped file's output")
		// Each byte of the file once, beside the remote package's first
		// read of 64 KiB, made before the header's length is known (read
		// per chunk, the experts' spans were 11 times the file).
		assert.LessOrEqual(t, served.Load(), info.Size()+64<<10, "bytes served, of a file of %d", info.Size())
		assert.GreaterOrEqual(t, served.Load(), int64(len(blocks)+len(scales)))

		func() {
			defer func(n int64) { maxMapped = n }(maxMapped)
			maxMapped = 100 // read through the file
			out := filepath.Join(t.TempDir(), "readat")
			_, err = Convert(ctx, dir, out, to, Dequantize())
			require.NoError(t, err)
			data, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
			require.NoError(t, err)
			assert.True(t, string(wantData) == string(data), "through ReadAt: the mapped file's output")
		}()
	}
}
