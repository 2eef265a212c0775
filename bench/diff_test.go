package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/diff"
)

// BenchmarkDiff compares two models with diff.Compare, each of 16
// [rows, 4096] weights held in memory as files (Readers over their bytes),
// against the parallel float32 sum of both models' bytes ("x" is diff's
// speed over the sum's), with the same goroutines (GOMAXPROCS):
//
//   - same: two F32 models of the same bytes (in separate memory), which
//     diff compares byte for byte;
//   - F32: an F32 model against the same model with every value changed
//     in its last bits, as a fine-tuned or re-saved model is, compared
//     value by value;
//   - BF16: an F32 model against its conversion to BF16.
//
// The F32 models are 512 MiB each (32 MiB with -short).
func BenchmarkDiff(b *testing.B) {
	size := 512 << 20
	if testing.Short() {
		size = 32 << 20
	}
	const cols = 4096
	rows := size / 16 / cols / 4
	base := weights(safetensors.F32, 16, rows, cols)
	nudged := make(memSource, len(base))
	for i, t := range base {
		data := bytes.Clone(t.Data)
		for j := 0; j < len(data); j += 4 {
			data[j] ^= 0x5 // the mantissa's lowest bits: a relative change below 2^-20
		}
		nudged[i] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: data}
	}
	same := make(memSource, len(base))
	for i, t := range base {
		same[i] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: bytes.Clone(t.Data)}
	}
	for _, c := range []struct {
		name string
		b    memSource
		opts []diff.Option
	}{
		{"same", same, nil},
		{"F32", nudged, []diff.Option{diff.Tolerance(0, 1.0/(1<<20))}},
		{"BF16", weights(safetensors.BF16, 16, rows, cols), []diff.Option{diff.Tolerance(0, 1.0/(1<<8))}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ra, ta := fileOf(b, base)
			rb, tb := fileOf(b, c.b)
			var sink float32
			race(b, ta.bytes()+tb.bytes(), []string{"diff", "sum"},
				func() {
					r, err := diff.Compare(context.Background(), ra, rb, nil, nil, c.opts...)
					if err != nil || !r.Equal() {
						b.Fatal(err, r)
					}
				},
				func() { sink += parallelSum(ta) + parallelSum(tb) })
			_ = sink
		})
	}
}

// bytes returns the size of the tensors' data.
func (m memSource) bytes() int {
	n := 0
	for _, t := range m {
		n += len(t.Data)
	}
	return n
}

// fileOf writes the tensors as a safetensors file in memory and returns a
// Reader over it, which reads its tensors without copying, as a mapped
// file does, and its tensors, for the sum to read the same memory.
func fileOf(b *testing.B, ts memSource) (*safetensors.Reader, memSource) {
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		b.Fatal(err)
	}
	r, err := safetensors.NewReader(buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	out := make(memSource, 0, len(ts))
	for _, name := range r.Names() {
		t, err := r.Tensor(name)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, t)
	}
	return r, out
}
