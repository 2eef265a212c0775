package safetensors

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchFiles returns the files the header benchmarks parse: two from the
// corpus and a generated checkpoint of 100,000 tensors.
func benchFiles(b *testing.B) []struct {
	name string
	data []byte
} {
	var files []struct {
		name string
		data []byte
	}
	for _, name := range []string{"typical_291", "many_5000"} {
		data, err := os.ReadFile(filepath.Join(corpusDir, "valid", name+".safetensors"))
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, struct {
			name string
			data []byte
		}{name, data})
	}
	files = append(files, struct {
		name string
		data []byte
	}{"generated_100000", generateModel(b, 100_000)})
	return files
}

// generateModel writes a file of n small tensors named like the layers of a
// large transformer.
func generateModel(tb testing.TB, n int) []byte {
	tb.Helper()
	parts := []struct {
		name  string
		dtype DType
		shape []uint64
	}{
		{"input_layernorm.weight", BF16, []uint64{8}},
		{"mlp.down_proj.weight", BF16, []uint64{8, 4}},
		{"mlp.gate_proj.weight", BF16, []uint64{4, 8}},
		{"mlp.up_proj.weight", BF16, []uint64{4, 8}},
		{"post_attention_layernorm.weight", BF16, []uint64{8}},
		{"self_attn.k_proj.weight", BF16, []uint64{2, 8}},
		{"self_attn.o_proj.weight", BF16, []uint64{8, 8}},
		{"self_attn.q_proj.weight", BF16, []uint64{8, 8}},
		{"self_attn.v_proj.weight", BF16, []uint64{2, 8}},
		{"self_attn.rotary_emb.inv_freq", F32, []uint64{4}},
	}
	tensors := make([]Tensor, n)
	for i := range tensors {
		p := parts[i%len(parts)]
		size, err := byteSize(p.dtype, p.shape)
		if err != nil {
			tb.Fatal(err)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i + j + 1)
		}
		tensors[i] = Tensor{
			Name:  fmt.Sprintf("model.layers.%d.%s", i/len(parts), p.name),
			DType: p.dtype,
			Shape: p.shape,
			Data:  data,
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkNewReader parses and validates whole files; the bytes per second
// are header bytes, since NewReader does not touch the data.
func BenchmarkNewReader(b *testing.B) {
	for _, f := range benchFiles(b) {
		r, err := NewReader(f.data)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%s/tensors=%d", f.name, len(r.Header().Tensors)), func(b *testing.B) {
			b.SetBytes(int64(r.Header().Len))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewReader(f.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
