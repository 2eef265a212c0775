package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
)

// manifestTensors returns tensors of several dtypes and shapes, a scalar
// and an empty one among them, with names a text manifest must quote.
func manifestTensors() []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(3, 4))
	var out []safetensors.Tensor
	for _, spec := range []struct {
		name  string
		dtype safetensors.DType
		shape []uint64
	}{
		{"model.embed.weight", safetensors.F32, []uint64{64, 33}},
		{"model.layers.0.attn.q.weight", safetensors.BF16, []uint64{40, 40}},
		{"model.layers.0.attn.q.bias", safetensors.F16, []uint64{40}},
		{"scalar", safetensors.I64, nil},
		{"empty", safetensors.U8, []uint64{0, 5}},
		{"with space  and two", safetensors.U8, []uint64{7}},
		{"\"quoted\"", safetensors.I8, []uint64{3}},
		{"new\nline", safetensors.BOOL, []uint64{2}},
		{"é/ü", safetensors.F64, []uint64{2, 2}},
	} {
		bits := uint64(spec.dtype.Bits())
		for _, d := range spec.shape {
			bits *= d
		}
		data := make([]byte, bits/8)
		for j := range data {
			data[j] = byte(rng.Uint32())
			if spec.dtype == safetensors.BOOL {
				data[j] &= 1
			}
		}
		out = append(out, safetensors.Tensor{Name: spec.name, DType: spec.dtype, Shape: spec.shape, Data: data})
	}
	return out
}

// writeModels writes the tensors as one file, and as a sharded checkpoint
// in another order with other metadata.
func writeModels(t *testing.T, tensors []safetensors.Tensor) (file, sharded string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "model.safetensors")
	require.NoError(t, safetensors.WriteFile(file, tensors, map[string]string{"format": "pt"}))
	rev := slices.Clone(tensors)
	slices.Reverse(rev)
	sharded = filepath.Join(dir, "sharded")
	require.NoError(t, checkpoint.Write(sharded, rev, checkpoint.MaxShardSize(4000), checkpoint.FileMetadata(map[string]string{"other": "metadata"})))
	return file, sharded
}

func manifestOf(t *testing.T, model string) *Manifest {
	t.Helper()
	ctx := context.Background()
	c, err := checkpoint.Open(ctx, model)
	require.NoError(t, err)
	defer c.Close()
	m, err := ManifestOf(ctx, c, ManifestLoader(&load.Loader{ChunkSize: 4096, MemoryLimit: 1}))
	require.NoError(t, err)
	return m
}

// withoutFiles returns the manifest's tensors without their files.
func withoutFiles(m *Manifest) []ManifestTensor {
	out := slices.Clone(m.Tensors)
	for i := range out {
		out[i].File = ""
	}
	return out
}

// TestManifestLayout: a file and a sharded checkpoint of the same tensors
// give the same manifest, whose digests are Tensor.Digest's, sorted by
// name.
func TestManifestLayout(t *testing.T) {
	tensors := manifestTensors()
	file, sharded := writeModels(t, tensors)
	a, b := manifestOf(t, file), manifestOf(t, sharded)
	assert.Equal(t, withoutFiles(a), withoutFiles(b))
	require.Len(t, a.Tensors, len(tensors))
	for _, tn := range tensors {
		i := slices.IndexFunc(a.Tensors, func(m ManifestTensor) bool { return m.Name == tn.Name })
		require.GreaterOrEqual(t, i, 0, tn.Name)
		mt := a.Tensors[i]
		assert.Equal(t, tn.Digest(), mt.Digest, tn.Name)
		assert.Equal(t, tn.DType.String(), mt.DType)
		assert.Equal(t, uint64(len(tn.Data)), mt.Bytes)
		assert.Equal(t, file, mt.File)
	}
	assert.True(t, slices.IsSortedFunc(a.Tensors, func(x, y ManifestTensor) int { return strings.Compare(x.Name, y.Name) }))
	files := map[string]bool{}
	for _, mt := range b.Tensors {
		files[mt.File] = true
	}
	assert.Greater(t, len(files), 1, "sharded: %v", files)
	r := a.Compare(b.Tensors)
	assert.True(t, r.OK())
	assert.NoError(t, r.Err())
	assert.Equal(t, len(tensors), r.Matched)
}

// TestManifestRoundTrip writes a manifest as text and as JSON, and reads
// both back.
func TestManifestRoundTrip(t *testing.T) {
	file, _ := writeModels(t, manifestTensors())
	m := manifestOf(t, file)
	var text bytes.Buffer
	require.NoError(t, m.WriteText(&text))
	assert.Contains(t, text.String(), "  with space  and two\n", "spaces kept as they are")
	assert.Contains(t, text.String(), `  "\"quoted\""`+"\n")
	assert.Contains(t, text.String(), `  "new\nline"`+"\n")
	assert.Contains(t, text.String(), "  é/ü\n")
	assert.Equal(t, len(m.Tensors), strings.Count(text.String(), "\n"))
	got, err := ReadManifest(strings.NewReader("# a comment\n\n" + strings.ReplaceAll(text.String(), "\n", "\r\n")))
	require.NoError(t, err)
	want := withoutFiles(m)
	for i := range want {
		want[i].DType, want[i].Shape, want[i].Bytes = "", nil, 0
	}
	assert.Equal(t, want, got.Tensors)

	js, err := json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	got, err = ReadManifest(bytes.NewReader(append([]byte("\n "), js...)))
	require.NoError(t, err)
	assert.Equal(t, m, got)
	r := got.Compare(m.Tensors)
	assert.True(t, r.OK())
}

// TestManifestCheck changes a byte of one tensor, the dtype of another,
// drops one and adds one: Check names each.
func TestManifestCheck(t *testing.T) {
	ctx := context.Background()
	tensors := manifestTensors()
	file, _ := writeModels(t, tensors)
	m := manifestOf(t, file)

	changed := slices.Clone(tensors)
	changed[1].Data = bytes.Clone(changed[1].Data)
	changed[1].Data[17] ^= 1
	changed[2].DType = safetensors.I16 // same bytes, another dtype
	changed = slices.Delete(changed, 3, 4)
	changed = append(changed, safetensors.Tensor{Name: "added", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{1}})
	_, sharded := writeModels(t, changed)
	c, err := checkpoint.Open(ctx, sharded)
	require.NoError(t, err)
	defer c.Close()
	var calls int
	var last [2]uint64
	r, err := m.Check(ctx, c, ManifestProgress(func(done, total uint64) { calls++; last = [2]uint64{done, total} }))
	require.NoError(t, err)
	assert.False(t, r.OK())
	assert.Equal(t, len(tensors)-3, r.Matched)
	require.Len(t, r.Changed, 2)
	assert.Equal(t, "model.layers.0.attn.q.bias", r.Changed[0].Name)
	assert.Equal(t, "model.layers.0.attn.q.weight", r.Changed[1].Name)
	assert.Equal(t, []string{"scalar"}, r.Missing)
	assert.Equal(t, []string{"added"}, r.Extra)
	err = r.Err()
	require.ErrorIs(t, err, ErrManifestMismatch)
	msg := err.Error()
	assert.Contains(t, msg, `2 changed: "model.layers.0.attn.q.bias" (digest `)
	assert.Contains(t, msg, "; dtype I16, manifest F16)")
	assert.Contains(t, msg, fmt.Sprintf(`"model.layers.0.attn.q.weight" (digest %s, manifest %s)`, changed[1].Digest(), tensors[1].Digest()))
	assert.Contains(t, msg, `1 missing: "scalar"; 1 extra: "added"`)
	assert.Positive(t, calls)
	assert.Equal(t, last[0], last[1], "progress reaches the total")

	// Against a text manifest, which has no dtypes: the digest alone.
	var text bytes.Buffer
	require.NoError(t, m.WriteText(&text))
	tm, err := ReadManifest(&text)
	require.NoError(t, err)
	r, err = tm.Check(ctx, c)
	require.NoError(t, err)
	assert.Len(t, r.Changed, 2)
	assert.NotContains(t, r.Err().Error(), "dtype")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Check(cctx, c)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestReadManifestErrors: each malformed manifest is an error wrapping
// ErrInvalidManifest that says what is wrong, never a panic.
func TestReadManifestErrors(t *testing.T) {
	d := strings.Repeat("ab", 32)
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{" \n\t", "empty"},
		{"# only a comment\n", "lists no tensors"},
		{d + " one space\n", "line 1: not a digest, two spaces"},
		{"# c\n" + d[:63] + "  x\n", "line 2: safetensors: a tensor digest is 64 hexadecimal digits, not 63"},
		{strings.Repeat("zz", 32) + "  x\n", "invalid byte"},
		{d + "  \"unterminated\n", "line 1: a quoted name that is not a Go string"},
		{d + "  a\n" + d + "  b\n" + d + "  a\n", `tensor "a" is listed twice`},
		{`{"tensors": [{"name": "a"}]}`, "tensors[0] has no name or no digest"},
		{`{"tensors": [{"name": "a", "digest": "xyz"}]}`, `tensor "a": safetensors: a tensor digest is 64`},
		{`{"tensors": []}`, "lists no tensors"},
		{`{"tensors": {}}`, "cannot unmarshal"},
		{`{"tensors": [`, "unexpected EOF"},
		{`{"tensors": [{"name": "a", "digest": "` + d + `"}]} {}`, "more than one JSON document"},
		{`{"tensors": [{"name": "a", "digest": "` + d + `"}, {"name": "a", "digest": "` + d + `"}]}`, `tensor "a" is listed twice`},
	} {
		_, err := ReadManifest(strings.NewReader(c.in))
		require.Error(t, err, "%q", c.in)
		assert.True(t, errors.Is(err, ErrInvalidManifest), "%q: %v", c.in, err)
		assert.Contains(t, err.Error(), c.want, "%q", c.in)
	}
}

// FuzzReadManifest: no input makes ReadManifest panic, and what it reads
// it writes as text that reads back the same.
func FuzzReadManifest(f *testing.F) {
	d := strings.Repeat("0f", 32)
	f.Add(d + "  a\n" + d + `  "b\n"` + "\n")
	f.Add(`{"tensors": [{"name": "a", "digest": "` + d + `", "shape": [1]}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ReadManifest(strings.NewReader(in))
		if err != nil {
			return
		}
		var text bytes.Buffer
		require.NoError(t, m.WriteText(&text))
		back, err := ReadManifest(&text)
		require.NoError(t, err)
		require.Len(t, back.Tensors, len(m.Tensors))
		for i := range m.Tensors {
			require.Equal(t, m.Tensors[i].Name, back.Tensors[i].Name)
			require.Equal(t, m.Tensors[i].Digest, back.Tensors[i].Digest)
		}
	})
}

// A manifest written by `safetensors inspect --digests` (here, by
// ManifestOf and WriteText) checks a model however it is stored: the
// tensors of the file, sharded, one of them changed.
func ExampleManifest_Check() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "model")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tensors := []safetensors.Tensor{
		{Name: "a", DType: safetensors.F32, Shape: []uint64{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{3}, Data: []byte{1, 2, 3}},
	}
	file := filepath.Join(dir, "model.safetensors")
	if err := safetensors.WriteFile(file, tensors, nil); err != nil {
		log.Fatal(err)
	}
	c, err := checkpoint.Open(ctx, file)
	if err != nil {
		log.Fatal(err)
	}
	m, err := ManifestOf(ctx, c)
	c.Close()
	if err != nil {
		log.Fatal(err)
	}
	var text bytes.Buffer
	m.WriteText(&text)
	fmt.Print(text.String())

	manifest, err := ReadManifest(&text)
	if err != nil {
		log.Fatal(err)
	}
	tensors[1].Data = []byte{1, 2, 4}
	sharded := filepath.Join(dir, "sharded")
	if err := checkpoint.Write(sharded, tensors, checkpoint.MaxShardSize(8)); err != nil {
		log.Fatal(err)
	}
	c, err = checkpoint.Open(ctx, sharded)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	report, err := manifest.Check(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report.Matched, "matched;", report.Changed[0].Name, "changed")
	// Output:
	// c6f567032c045d6de5231c5ab863d0b79dc6e5f45adeac72085e36e469fcd543  a
	// dee08d45d5118aba275e62e07531bd3e2f1d37bde24f4a14189388153b6b12ef  b
	// 1 matched; b changed
}
