package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
)

// headerFile is a safetensors file whose header the benchmarks parse.
type headerFile struct {
	name string
	data []byte
	hdr  *safetensors.Header
}

// headerFiles returns two files of the conformance corpus and a generated
// checkpoint of 100,000 tensors.
func headerFiles(tb testing.TB) []headerFile {
	tb.Helper()
	var files []headerFile
	add := func(name string, data []byte) {
		r, err := safetensors.NewReader(data)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, headerFile{name, data, r.Header()})
	}
	for _, name := range []string{"typical_291", "many_5000"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", "valid", name+".safetensors"))
		if err != nil {
			tb.Fatal(err)
		}
		add(name, data)
	}
	add("generated_100000", generate(tb, 100_000))
	return files
}

// generate writes a file of n small tensors named like the layers of a
// large transformer (ten tensors a layer, in BF16 and F32).
func generate(tb testing.TB, n int) []byte {
	tb.Helper()
	parts := []struct {
		name  string
		dtype safetensors.DType
		shape []uint64
	}{
		{"input_layernorm.weight", safetensors.BF16, []uint64{8}},
		{"mlp.down_proj.weight", safetensors.BF16, []uint64{8, 4}},
		{"mlp.gate_proj.weight", safetensors.BF16, []uint64{4, 8}},
		{"mlp.up_proj.weight", safetensors.BF16, []uint64{4, 8}},
		{"post_attention_layernorm.weight", safetensors.BF16, []uint64{8}},
		{"self_attn.k_proj.weight", safetensors.BF16, []uint64{2, 8}},
		{"self_attn.o_proj.weight", safetensors.BF16, []uint64{8, 8}},
		{"self_attn.q_proj.weight", safetensors.BF16, []uint64{8, 8}},
		{"self_attn.v_proj.weight", safetensors.BF16, []uint64{2, 8}},
		{"self_attn.rotary_emb.inv_freq", safetensors.F32, []uint64{4}},
	}
	tensors := make([]safetensors.Tensor, n)
	for i := range tensors {
		p := parts[i%len(parts)]
		elems := uint64(1)
		for _, d := range p.shape {
			elems *= d
		}
		data := make([]byte, elems*uint64(p.dtype.Bits()/8))
		for j := range data {
			data[j] = byte(i + j + 1)
		}
		tensors[i] = safetensors.Tensor{
			Name:  fmt.Sprintf("model.layers.%d.%s", i/len(parts), p.name),
			DType: p.dtype,
			Shape: p.shape,
			Data:  data,
		}
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
