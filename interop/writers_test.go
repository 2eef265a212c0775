package interop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// The reverse direction: what the package's writers write, the reference
// reads as written, and writes again byte for byte.

// nameParts make tensor names and metadata: ASCII, non-ASCII, characters
// the JSON writer escapes.
var nameParts = []string{
	"model", ".", "layers", "0", "weight", "bias", "_", "-", "é", "名前", "😀", "\u2028", "\x7f", " ",
	"\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "/", "{", "}", ":", ",", "[", "]",
}

// randomName returns a name of one to four parts.
func randomName(g *gen) string {
	var b strings.Builder
	for range 1 + g.n(4) {
		b.WriteString(pick(g, nameParts))
	}
	return b.String()
}

// randomTensors returns tensors of random dtypes, shapes, names and bytes,
// and metadata that is nil, empty or has some keys.
func randomTensors(g *gen) ([]safetensors.Tensor, map[string]string) {
	var tensors []safetensors.Tensor
	seen := map[string]bool{"__metadata__": true}
	for range pick(g, []int{0, 1, 1, 2, 3, 5, 8, 22}) {
		name := randomName(g)
		for seen[name] {
			name += pick(g, nameParts)
		}
		seen[name] = true
		dtype := safetensors.DType(0)
		for !dtypeOK(dtype) {
			dtype = safetensors.DType(1 + g.n(64))
		}
		var shape []uint64
		for {
			shape = shape[:0]
			for range pick(g, []int{0, 1, 1, 2, 2, 3, 4}) {
				shape = append(shape, pick(g, []uint64{0, 1, 1, 2, 3, 4, 5, 7, 8, 16, 33}))
			}
			if size, ok := byteSize(dtype.String(), shape); ok && size < 1<<16 {
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(g.n(256))
				}
				tensors = append(tensors, safetensors.Tensor{Name: name, DType: dtype, Shape: slices.Clone(shape), Data: data})
				break
			}
		}
	}
	var metadata map[string]string
	switch g.n(4) {
	case 0:
	case 1:
		metadata = map[string]string{}
	default:
		metadata = map[string]string{}
		for range 1 + g.n(3) {
			metadata[randomName(g)] = randomName(g)
		}
	}
	return tensors, metadata
}

// dtypeOK reports whether d is one of the 22 dtypes.
func dtypeOK(d safetensors.DType) bool {
	_, ok := bitsOf[d.String()]
	return ok && d != 0
}

// writeAll writes tensors and metadata with Write and NewWriter, and with
// WriteFile and CreateFile too when files is set (they sync each file,
// which costs), checks that all give the same bytes, and returns them.
func writeAll(t *testing.T, g *gen, dir string, tensors []safetensors.Tensor, metadata map[string]string, files bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tensors, metadata))
	out := bytes.Clone(buf.Bytes())

	specs := make([]safetensors.TensorSpec, len(tensors))
	byName := map[string][]byte{}
	for i, tn := range tensors {
		specs[i] = safetensors.TensorSpec{Name: tn.Name, DType: tn.DType, Shape: tn.Shape}
		byName[tn.Name] = tn.Data
	}
	buf.Reset()
	w, err := safetensors.NewWriter(&buf, specs, metadata)
	require.NoError(t, err)
	for _, ti := range w.Header().Tensors {
		require.NoError(t, w.WriteTensor(ti.Name, bytes.NewReader(byName[ti.Name])))
	}
	require.NoError(t, w.Close())
	require.Equal(t, out, buf.Bytes(), "NewWriter")
	if !files {
		return out
	}

	path := filepath.Join(dir, "WriteFile.safetensors")
	require.NoError(t, safetensors.WriteFile(path, tensors, metadata))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, out, got, "WriteFile")

	path = filepath.Join(dir, "CreateFile.safetensors")
	fw, err := safetensors.CreateFile(path, specs, metadata)
	require.NoError(t, err)
	for _, i := range g.r.Perm(len(tensors)) { // any order
		require.NoError(t, fw.WriteTensorAt(tensors[i].Name, bytes.NewReader(tensors[i].Data)))
	}
	require.NoError(t, fw.Close())
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, out, got, "CreateFile")
	return out
}

// TestReferenceReadsWriters writes random tensor sets with the package's
// writers (every eighth also to files, with WriteFile and CreateFile); the
// reference must accept each file, read the tensors and
// metadata given, and write the same bytes again.
func TestReferenceReadsWriters(t *testing.T) {
	oracle(t)
	s := seed(t)
	n := max(count(t, 4000)/10, 1)
	t.Logf("INTEROP_SEED=%d: %d tensor sets", s, n)
	g := &gen{r: rand.New(rand.NewPCG(s, 0x3717e5)), wild: 1}
	dir := t.TempDir()
	type set struct {
		tensors  []safetensors.Tensor
		metadata map[string]string
		data     []byte
	}
	var sets []set
	var inputs, pairs []string
	for i := range n {
		tensors, metadata := randomTensors(g)
		data := writeAll(t, g, dir, tensors, metadata, i%8 == 0)
		in := filepath.Join(dir, fmt.Sprintf("%05d.safetensors", i))
		require.NoError(t, os.WriteFile(in, data, 0o644))
		sets = append(sets, set{tensors, metadata, data})
		inputs = append(inputs, in)
		pairs = append(pairs, in+"\t"+filepath.Join(dir, fmt.Sprintf("%05d.ref.safetensors", i)))
	}
	if t.Failed() {
		return
	}
	verdicts := checkFiles(t, inputs)
	written := runOracle(t, "serialize", pairs)
	exceptions := 0
	for i, st := range sets {
		v := verdicts[i]
		msg := fmt.Sprintf("%s (INTEROP_SEED=%d): %q", inputs[i], s, st.data)
		require.True(t, v.OK, "the reference rejects %s: %s", msg, v.Message)

		// Read as written: the metadata, each tensor's dtype, shape and
		// bytes.
		if st.metadata == nil {
			assert.Nil(t, v.Metadata, msg)
		} else if assert.NotNil(t, v.Metadata, msg) {
			assert.Equal(t, st.metadata, *v.Metadata, msg)
		}
		require.Len(t, v.Tensors, len(st.tensors), msg)
		ref := map[string]refTensor{}
		for _, rt := range v.Tensors {
			ref[rt.Name] = rt
		}
		for _, tn := range st.tensors {
			rt, ok := ref[tn.Name]
			require.True(t, ok, "the reference has no tensor %q in %s", tn.Name, msg)
			assert.Equal(t, tn.DType.String(), rt.DType, msg)
			assert.Equal(t, append([]uint64{}, tn.Shape...), append([]uint64{}, rt.Shape...), msg)
			base := 8 + v.HeaderLen
			assert.Equal(t, tn.Data, st.data[base+rt.DataOffsets[0]:base+rt.DataOffsets[1]], msg)
		}

		// Written again by the reference: the same bytes.
		w := written[i]
		require.True(t, w.OK, "the reference cannot write %s again: %s", msg, w.Message)
		again, err := os.ReadFile(strings.Split(pairs[i], "\t")[1])
		require.NoError(t, err)
		switch {
		case len(st.tensors) == 0 && st.metadata != nil && len(st.metadata) == 0:
			// The documented exception: the reference writes invalid JSON,
			// which it rejects itself; Write writes {"__metadata__":{}}.
			exceptions++
			hdr := `{},"__metadata__":{}}`
			want := binary.LittleEndian.AppendUint64(nil, 24)
			want = append(want, hdr+strings.Repeat(" ", 24-len(hdr))...)
			assert.Equal(t, want, again, msg)
			assert.Equal(t, append(binary.LittleEndian.AppendUint64(nil, 24), `{"__metadata__":{}}     `...), st.data)
		case len(st.metadata) < 2:
			assert.Equal(t, st.data, again, msg)
		default:
			// The reference writes metadata keys in hash-map order, and
			// "__metadata__" first: the same bytes once that object is cut.
			mdEnd := metadataEnd(t, st.data)
			require.Equal(t, len(st.data), len(again), msg)
			assert.Equal(t, st.data[:8+len(`{"__metadata__":`)], again[:8+len(`{"__metadata__":`)], msg)
			assert.Equal(t, st.data[mdEnd:], again[mdEnd:], msg)
		}
	}
	if exceptions > 0 {
		// Those files' reference output is rejected by the reference.
		var bad []string
		for i, st := range sets {
			if len(st.tensors) == 0 && st.metadata != nil && len(st.metadata) == 0 {
				bad = append(bad, strings.Split(pairs[i], "\t")[1])
			}
		}
		for _, v := range checkFiles(t, bad) {
			assert.Equal(t, "InvalidHeaderDeserialization", v.Error, v.Path)
		}
	}
	t.Logf("%d files, written by Write and NewWriter (every eighth by WriteFile and CreateFile too), read and written again by the reference; %d with no tensors and empty metadata", n, exceptions)

	// The metadata of the reference's output, in whatever key order,
	// reads as the input's.
	var againPaths []string
	for i, st := range sets {
		if len(st.metadata) >= 2 {
			againPaths = append(againPaths, strings.Split(pairs[i], "\t")[1])
		}
	}
	if len(againPaths) == 0 {
		return
	}
	k := 0
	for _, v := range checkFiles(t, againPaths) {
		for k < len(sets) && len(sets[k].metadata) < 2 {
			k++
		}
		require.True(t, v.OK, v.Path)
		assert.Equal(t, sets[k].metadata, *v.Metadata, v.Path)
		k++
	}
}

// metadataEnd returns the offset just after the "__metadata__" object that
// Write puts first in the header of data.
func metadataEnd(t *testing.T, data []byte) int {
	t.Helper()
	r, err := safetensors.NewReader(data)
	require.NoError(t, err)
	// Write's metadata object is the compact JSON of the sorted keys: find
	// its end by writing it alone.
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, nil, r.Metadata()))
	alone := bytes.TrimRight(buf.Bytes()[8:], " ")
	obj := alone[len(`{"__metadata__":`) : len(alone)-1]
	start := 8 + len(`{"__metadata__":`)
	require.Equal(t, obj, data[start:start+len(obj)])
	return start + len(obj)
}
