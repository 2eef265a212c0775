package check

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// remoteModel writes a sharded checkpoint of F32 tensors of about size
// bytes in all, the largest half of it, with a NaN in the middle of the
// largest, and a config.json; it serves the folder over HTTP and returns
// its base URL and the count of requests for config.json.
func remoteModel(t *testing.T, size int) (base string, configReads *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	var tensors []safetensors.Tensor
	for i, n := range []int{size / 2, size / 4, size / 8, size / 8} {
		data := make([]byte, n/4*4)
		for j := 0; j < len(data); j += 4 {
			binary.LittleEndian.PutUint32(data[j:], math.Float32bits(float32(j%97)/97+0.5))
		}
		if i == 0 {
			binary.LittleEndian.PutUint32(data[len(data)/2/4*4:], math.Float32bits(float32(math.NaN())))
		}
		tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("model.layers.%d.weight", i), DType: safetensors.F32, Shape: []uint64{uint64(len(data) / 4)}, Data: data})
	}
	require.NoError(t, checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(int64(size/3))))
	require.NoError(t, writeFile(filepath.Join(dir, "config.json"), `{"model_type": "custom"}`))
	configReads = new(atomic.Int64)
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/config.json" {
			configReads.Add(1)
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, configReads
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRemoteBoundedMemory: checking a model over HTTP reads its values a
// piece at a time: it allocates a small part of the model's size (the
// pieces of Workers goroutines, each chunkBytes, and the requests'
// bookkeeping), not the model, and still finds the NaN in its largest
// tensor; it reads the config.json beside the weights.
func TestRemoteBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a model of 96 MiB")
	}
	const size = 96 << 20
	base, configReads := remoteModel(t, size)
	ck, err := checkpoint.Open(context.Background(), base)
	require.NoError(t, err)
	defer ck.Close()
	var r *Report
	n := allocated(func() {
		r, err = Checkpoint(context.Background(), ck, Workers(2))
	})
	require.NoError(t, err)
	t.Logf("allocated %d bytes checking a model of %d", n, size)
	assert.Less(t, n, uint64(size/4), "allocated %d bytes checking a model of %d", n, size)
	require.NotEmpty(t, r.Findings)
	assert.Equal(t, KindNaN, r.Findings[0].Kind)
	assert.Equal(t, "model.layers.0.weight", r.Findings[0].Tensor)
	assert.Equal(t, int64(1), configReads.Load(), "config.json read over HTTP")
	assert.NotContains(t, r.Notes, "no config.json: the configuration was not checked")
}

func writeFile(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o644)
}

// TestSkippedPartNoted: a part of a model whose weights are a pickle is
// not checked, and the report's notes say so.
func TestSkippedPartNoted(t *testing.T) {
	dir := t.TempDir()
	w, err := safetensors.TensorFromFloat32s("emb.weight", safetensors.F32, []uint64{2}, []float32{1, 2}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Tensor{w}, nil))
	require.NoError(t, writeFile(filepath.Join(dir, "modules.json"), `[{"idx": 0, "name": "0", "path": "", "type": "Transformer"}, {"idx": 1, "name": "1", "path": "1_Dense", "type": "Dense"}]`))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "1_Dense"), 0o755))
	require.NoError(t, writeFile(filepath.Join(dir, "1_Dense", "pytorch_model.bin"), "pickle"))
	r, err := Model(context.Background(), dir)
	require.NoError(t, err)
	assert.Contains(t, r.Notes, "part 1_Dense: pytorch_model.bin (weights in another format than safetensors, not read): not checked")
}
