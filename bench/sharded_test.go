package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// createSharded writes a checkpoint of 30 shards, each holding
// tensorsPerShard BF16 tensors of elems elements, as sparse files (the data
// is a hole), with its index; it returns the directory and the total size
// of the shards' headers.
func createSharded(b *testing.B, dir string, tensorsPerShard int, elems uint64) (hdrBytes int64) {
	b.Helper()
	const shards = 30
	weightMap := map[string]string{}
	var total uint64
	for s := range shards {
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, shards)
		specs := make([]safetensors.TensorSpec, tensorsPerShard)
		for i := range specs {
			name := fmt.Sprintf("model.layers.%d.mlp.experts.%d.up_proj.weight", s, i)
			specs[i] = safetensors.TensorSpec{Name: name, DType: safetensors.BF16, Shape: []uint64{elems}}
			weightMap[name] = file
			total += 2 * elems
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			b.Fatal(err)
		}
		w, err := safetensors.NewWriter(f, specs, map[string]string{"format": "pt"})
		if err != nil {
			b.Fatal(err)
		}
		h := w.Header()
		hdrBytes += int64(h.DataOffset())
		if err := f.Truncate(int64(h.DataOffset() + h.DataLen())); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	index, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), index, 0o644); err != nil {
		b.Fatal(err)
	}
	return hdrBytes
}

// BenchmarkOpenIndex (named for OpenIndex, which checkpoint.Open replaced)
// opens with checkpoint.Open and closes a 30-shard checkpoint of 8 GiB
// (sparse files) and one whose shards' headers list the same 300 tensors
// with 8 KiB of data in all, in alternating rounds, and reports each one's
// fastest time, their ratio per byte of the shards' headers ("x", large /
// small, 1 = checkpoint.Open costs what the headers cost, whatever the size of
// the data), and how much the resident set grows while the large one is
// open ("rss-growth-KiB", Linux only).
func BenchmarkOpenIndex(b *testing.B) {
	large, small := b.TempDir(), b.TempDir()
	const perShard = 10
	hdr := [2]float64{
		float64(createSharded(b, large, perShard, (8<<30)/30/perShard/2)),
		float64(createSharded(b, small, perShard, 8)),
	}
	dirs := []string{large, small}
	openLargeSmall(b, hdr, func(i int) (io.Closer, error) { return checkpoint.Open(context.Background(), dirs[i]) })
}
