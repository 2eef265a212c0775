package check

import (
	"bufio"
	"compress/gzip"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// readLines calls fn with each line of a gzipped file of JSON lines, the
// form of the corpora of testdata/architectures and testdata/libraries.
func readLines(t testing.TB, path string, fn func(line []byte)) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	require.NoError(t, sc.Err())
}

// corpusTensors returns the tensors a corpus lists, each as [name, dtype,
// shape] with a fourth element that says what its values are: those all
// zeros ("zero") hold zeros, those of one infinity ("inf", "-inf") hold
// it, as F32, up to 1M elements; the others no values, which the value
// checks skip (the structure and configuration rules read names, dtypes
// and shapes only).
func corpusTensors(t testing.TB, label string, entries [][]any) []safetensors.Tensor {
	var out []safetensors.Tensor
	for _, e := range entries {
		require.GreaterOrEqual(t, len(e), 3, label)
		d, err := safetensors.ParseDType(e[1].(string))
		require.NoError(t, err, label)
		var shape []uint64
		n := uint64(1)
		for _, x := range e[2].([]any) {
			shape = append(shape, uint64(x.(float64)))
			n *= uint64(x.(float64))
		}
		tn := safetensors.Tensor{Name: e[0].(string), DType: d, Shape: shape}
		if len(e) == 4 && n <= 1<<20 {
			switch e[3] {
			case "zero":
				tn.Data = make([]byte, (n*uint64(d.Bits())+7)/8)
			case "inf", "-inf":
				v := float32(math.Inf(1))
				if e[3] == "-inf" {
					v = -v
				}
				vals := make([]float32, n)
				for i := range vals {
					vals[i] = v
				}
				tn, err = safetensors.TensorFromFloat32s(tn.Name, safetensors.F32, shape, vals, safetensors.RoundNearestEven)
				require.NoError(t, err)
			}
		}
		out = append(out, tn)
	}
	return out
}

// infosOf returns the tensors as the structure and configuration rules
// see them.
func infosOf(ts []safetensors.Tensor) []info {
	infos := make([]info, len(ts))
	for i, t := range ts {
		infos[i] = info{Name: t.Name, DType: t.DType, Shape: t.Shape, size: uint64(len(t.Data))}
	}
	return infos
}
