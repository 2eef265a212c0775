package interop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/verify"
)

// digestTensors returns random tensors of every dtype (F4 and F6 of whole
// bytes), scalars and empty ones among them, with random names.
func digestTensors(g *gen) []safetensors.Tensor {
	var tensors []safetensors.Tensor
	seen := map[string]bool{"__metadata__": true}
	for range 1 + g.n(12) {
		name := randomName(g)
		for seen[name] {
			name += pick(g, nameParts)
		}
		seen[name] = true
		for {
			dtype := pick(g, dtypeNames)
			var shape []uint64
			for range pick(g, []int{0, 1, 1, 2, 2, 3}) {
				shape = append(shape, pick(g, []uint64{0, 1, 2, 3, 4, 8, 33}))
			}
			size, ok := byteSize(dtype, shape)
			if !ok {
				continue // F4 or F6 of a part of a byte
			}
			d, err := safetensors.ParseDType(dtype)
			if err != nil {
				panic(err)
			}
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(g.n(256))
				if d == safetensors.BOOL {
					data[i] &= 1
				}
			}
			tensors = append(tensors, safetensors.Tensor{Name: name, DType: d, Shape: shape, Data: data})
			break
		}
	}
	return tensors
}

// TestTensorDigestsPython checks the tensor digest against an independent
// implementation: python/interop.py computes it from docs/format.md's
// definition with hashlib, reading the files' headers with the standard
// library (and the bytes of NumPy's dtypes with safetensors' safe_open),
// for random tensors of every dtype written as one file (any alignment,
// any metadata) and as a sharded checkpoint in the reverse order. The
// digests of the two layouts, Python's and the package's (Tensor.Digest,
// and verify.ManifestOf, which computes them in the Loader's read pass)
// are all the same.
func TestTensorDigestsPython(t *testing.T) {
	need(t, "INTEROP_PYTHON", "the Python environment")
	s := seed(t)
	g := &gen{r: rand.New(rand.NewPCG(s, 0xd16)), wild: 1}
	dir := t.TempDir()
	type model struct {
		single, sharded string
		tensors         []safetensors.Tensor
	}
	var models []model
	var paths []string
	for i := range max(count(t, 4000)/40, 1) {
		tensors := digestTensors(g)
		m := model{single: filepath.Join(dir, fmt.Sprintf("%04d.safetensors", i)), tensors: tensors}
		metadata := map[string]string{"format": "np"}
		for range g.n(3) {
			metadata[randomName(g)] = randomName(g)
		}
		var opts []safetensors.WriteOption
		if a := pick(g, []int{0, 8, 64, 4096}); a > 0 {
			opts = append(opts, safetensors.Alignment(a)) // padding, which moves the offsets
		}
		require.NoError(t, safetensors.WriteFile(m.single, tensors, metadata, opts...))
		rev := slices.Clone(tensors)
		slices.Reverse(rev)
		shards := filepath.Join(dir, fmt.Sprintf("%04d-sharded", i))
		require.NoError(t, checkpoint.Write(shards, rev, checkpoint.MaxShardSize(int64(1+g.n(300)))))
		m.sharded = shards
		if _, err := os.Stat(filepath.Join(shards, "model.safetensors.index.json")); err != nil {
			m.sharded = filepath.Join(shards, "model.safetensors") // one shard: no index
		}
		models = append(models, m)
		paths = append(paths, m.single, m.sharded)
	}
	var resp struct {
		Models []struct {
			Path    string            `json:"path"`
			Digests map[string]string `json:"digests"`
		} `json:"models"`
	}
	runPython(t, "digests", map[string]any{"paths": paths}, &resp)
	require.Len(t, resp.Models, len(paths))
	py := map[string]map[string]string{}
	for _, m := range resp.Models {
		py[m.Path] = m.Digests
	}
	sharded := 0
	for _, m := range models {
		msg := fmt.Sprintf("%s (INTEROP_SEED=%d)", m.single, s)
		want := map[string]string{}
		for _, tn := range m.tensors {
			want[tn.Name] = tn.Digest().String()
		}
		assert.Equal(t, want, py[m.single], "Python's digests of the file: %s", msg)
		assert.Equal(t, want, py[m.sharded], "Python's digests of the shards: %s", msg)
		for _, p := range []string{m.single, m.sharded} {
			c, err := checkpoint.Open(context.Background(), p)
			require.NoError(t, err, msg)
			man, err := verify.ManifestOf(context.Background(), c)
			require.NoError(t, err, msg)
			got := map[string]string{}
			for _, mt := range man.Tensors {
				got[mt.Name] = mt.Digest.String()
			}
			assert.Equal(t, want, got, "ManifestOf %s: %s", p, msg)
			if len(c.Files()) > 1 {
				sharded++
			}
			require.NoError(t, c.Close())
		}
	}
	assert.Positive(t, sharded, "no model was sharded")
	t.Logf("INTEROP_SEED=%d: the digests of %d models, each as a file and as shards (%d of several), checked against Python's", s, len(models), sharded)
}
