package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestReadValuesPieces: readValues gives each tensor once, in the order of
// the names, with the NaN and Inf of every piece of a tensor larger than a
// piece counted (the pieces read by several goroutines), and statistics
// merged from the pieces that are those of the whole; without stats, the
// counts alone.
func TestReadValuesPieces(t *testing.T) {
	n := 5 * valuesChunk / 4 / 2 // 2.5 pieces of F32
	big := tensors(4, layer{"big", safetensors.F32, []uint64{uint64(n)}}, layer{"small", safetensors.BF16, []uint64{7}},
		layer{"empty", safetensors.F16, []uint64{0}})[0:3]
	put := func(i int, v float32) { binary.LittleEndian.PutUint32(big[0].Data[4*i:], math.Float32bits(v)) }
	put(3, float32(math.NaN()))                            // piece 0
	put(valuesChunk/4+1, float32(math.Inf(-1)))            // piece 1
	put(2*valuesChunk/4+5, float32(math.NaN()))            // piece 2
	binary.LittleEndian.PutUint16(big[1].Data[2:], 0x7f80) // +Inf
	ids := safetensors.Tensor{Name: "ids", DType: safetensors.I32, Shape: []uint64{2}, Data: make([]byte, 8)}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	writeFile(t, path, append(big, ids))
	m, err := openModel(t.Context(), path)
	require.NoError(t, err)
	defer m.Close()

	names := []string{"small", "missing", "big", "empty", "ids"}
	for _, stats := range []bool{true, false} {
		var got []tensorValues
		err = readValues(t.Context(), m.ck, names, stats, nil, func(v tensorValues) error {
			got = append(got, v)
			return nil
		})
		require.NoError(t, err)
		require.Len(t, got, len(names))
		for i, v := range got {
			assert.Equal(t, names[i], v.name)
		}
		assert.Error(t, got[1].err, "missing")
		for _, k := range []int{0, 2, 3, 4} {
			want, err := map[int]safetensors.Tensor{0: big[1], 2: big[0], 3: big[2], 4: ids}[k].Stats()
			require.NoError(t, err)
			v := got[k]
			require.NoError(t, v.err, v.name)
			msg := fmt.Sprintf("%s, stats %v", v.name, stats)
			assert.Equal(t, [3]uint64{want.Count, want.NaN, want.Inf}, [3]uint64{v.stats.Count, v.stats.NaN, v.stats.Inf}, msg)
			if stats && want.Count > 0 {
				assert.Equal(t, [2]float64{want.Min, want.Max}, [2]float64{v.stats.Min, v.stats.Max}, msg)
				assert.InDelta(t, want.Mean, v.stats.Mean, 1e-12, msg)
				assert.InDelta(t, want.StdDev, v.stats.StdDev, 1e-12, msg)
			}
		}
		assert.Equal(t, [2]uint64{2, 1}, [2]uint64{got[2].stats.NaN, got[2].stats.Inf})
	}

	status, stdout, stderr := runCmd("validate", "--values", path)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, fmt.Sprintf("tensor big: 2 NaN, 1 Inf of %d values", n))
	assert.Contains(t, stdout, "tensor small: 0 NaN, 1 Inf of 7 values")
	assert.Empty(t, stderr, "no progress: stderr is not a terminal")
}
