package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestWriteJSON checks that the streamed JSON of inspect is byte for byte
// what encoding/json writes for the same summary, on summaries with every
// optional part present, absent and empty, and strings that JSON escapes.
func TestWriteJSON(t *testing.T) {
	odd := "<a&b>\x00\"\\\u2028\xff é"
	tensor := func(shard, name string, shape []uint64) tensorSummary {
		return tensorSummary{File: shard, Name: name, DType: "F32", Shape: shape, Parameters: 6, Bytes: 24, DataOffsets: [2]uint64{8, 32}}
	}
	byDType := map[string]count{"F32": {1, 6, 24}, "BF16": {2, 3, 4}}
	for name, s := range map[string]summary{
		"empty":    {},
		"file":     {Model: odd, HeaderBytes: 1 << 40, DataBytes: 7, Metadata: map[string]any{}, Tensors: []tensorSummary{}, Totals: totals{ByDType: map[string]count{}}},
		"metadata": {Metadata: map[string]any{"b": odd, "a": "x", odd: "", "n": json.Number("12"), "obj": map[string]any{"k": []any{1.5, "s", nil, true}}}},
		"tensors": {Tensors: []tensorSummary{tensor("", "w", []uint64{2, 3}), tensor("", odd, []uint64{}), tensor("", "nil", nil), tensor("", "big", []uint64{1<<64 - 1, 0})},
			Totals: totals{count: count{3, 4, 5}, ByDType: byDType}},
		"sharded": {Files: []fileSummary{{File: "a.safetensors", TensorCount: 1, DataBytes: 24}, {File: odd}},
			Tensors: []tensorSummary{tensor("a.safetensors", "w", []uint64{6}), tensor(odd, "v", []uint64{1, 1, 6})}},
		"no_shards": {Files: []fileSummary{}, Tensors: []tensorSummary{tensor("", "w", []uint64{6})}},
		"part":      {Model: "dir/unet", Part: ptr("unet"), IndexMetadata: map[string]any{"total_size": "24", odd: odd}, Files: []fileSummary{{File: "unet/a.safetensors"}}},
		"root_part": {Model: "dir", Part: ptr(""), IndexMetadata: map[string]any{}},
	} {
		t.Run(name, func(t *testing.T) {
			var want, got bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			require.NoError(t, enc.Encode(s))
			require.NoError(t, s.streamJSON(&got))
			assert.Equal(t, want.String(), got.String())
		})
	}
	// A summary of a real header.
	h := &safetensors.Header{Metadata: map[string]string{"format": "pt", odd: odd}, Len: 80, Tensors: []safetensors.TensorInfo{
		{Name: "a", DType: safetensors.BF16, Shape: []uint64{2, 2}, DataOffsets: [2]uint64{0, 8}},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{}, DataOffsets: [2]uint64{8, 9}},
	}}
	s := summarize("f.safetensors", h)
	var want, got bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(s))
	require.NoError(t, s.streamJSON(&got))
	assert.Equal(t, want.String(), got.String())
}

func ptr[T any](v T) *T { return &v }
