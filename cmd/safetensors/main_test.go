package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/dataset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files and the tiny model")

const (
	tinyModel = "../../testdata/tiny-llama.safetensors"
	corpus    = "../../testdata/conformance"
)

// runCmd runs the command line and returns its status and outputs.
func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	status := run(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
// The golden files write paths with /: paths names those in the golden
// file, which are compared as the platform writes them (with \ on
// Windows).
func golden(t *testing.T, name, got string, paths ...string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := string(data)
	for _, p := range paths {
		want = strings.ReplaceAll(want, p, filepath.FromSlash(p))
	}
	assert.Equal(t, want, got, "output differs from %s; rerun with -update if the change is meant", path)
}

// tinyLlama builds the tensors of a small Llama-shaped model: 4 layers,
// hidden size 64, 4 query heads and 2 key-value heads of 16, MLP size 176,
// a vocabulary of 512; about 250,000 F32 parameters, normally distributed
// with standard deviation 0.02 (norms are ones), from a fixed seed.
func tinyLlama() []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(2024, 11))
	const hidden, kv, mlp, vocab, layers = 64, 32, 176, 512, 4
	var tensors []safetensors.Tensor
	add := func(name string, ones bool, shape ...uint64) {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			if ones {
				vals[i] = 1
			} else {
				vals[i] = float32(rng.NormFloat64() * 0.02)
			}
		}
		t, err := safetensors.TensorFromFloat32s(name, safetensors.F32, shape, vals, safetensors.RoundNearestEven)
		if err != nil {
			panic(err)
		}
		tensors = append(tensors, t)
	}
	add("model.embed_tokens.weight", false, vocab, hidden)
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", true, hidden)
		add(p+"self_attn.q_proj.weight", false, hidden, hidden)
		add(p+"self_attn.k_proj.weight", false, kv, hidden)
		add(p+"self_attn.v_proj.weight", false, kv, hidden)
		add(p+"self_attn.o_proj.weight", false, hidden, hidden)
		add(p+"post_attention_layernorm.weight", true, hidden)
		add(p+"mlp.gate_proj.weight", false, mlp, hidden)
		add(p+"mlp.up_proj.weight", false, mlp, hidden)
		add(p+"mlp.down_proj.weight", false, hidden, mlp)
	}
	add("model.norm.weight", true, hidden)
	add("lm_head.weight", false, vocab, hidden)
	return tensors
}

// TestTinyModel checks that the shipped model is what tinyLlama builds.
func TestTinyModel(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, tinyLlama(), map[string]string{"format": "pt"}))
	if *update {
		require.NoError(t, os.WriteFile(tinyModel, buf.Bytes(), 0o644))
	}
	data, err := os.ReadFile(tinyModel)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(buf.Bytes(), data), "%s is not what tinyLlama builds; rerun with -update", tinyModel)
}

func TestUsage(t *testing.T) {
	status, stdout, _ := runCmd("-h")
	assert.Equal(t, exitOK, status)
	golden(t, "usage.golden", stdout)

	status, _, stderr := runCmd()
	assert.Equal(t, exitTrouble, status)
	assert.Equal(t, stdout, stderr, "no command: the usage, on stderr")

	status, _, stderr = runCmd("frobnicate")
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, `unknown command "frobnicate"`)

	for _, c := range commands {
		status, stdout, stderr := runCmd(c.name, "-h")
		assert.Equal(t, exitOK, status, c.name)
		assert.Empty(t, stderr, c.name)
		golden(t, c.name+"-help.golden", stdout)
	}
	for _, args := range [][]string{
		{"inspect"},
		{"inspect", "a", "b"},
		{"inspect", "--bogus", tinyModel},
		{"validate"},
		{"stats"},
		{"convert", "in", "out"},
		{"convert", "--dtype", "I32", "in", "out"},
		{"convert", "--dtype", "BF16", "--rounding", "up", "in", "out"},
		{"convert", "--dtype", "BF16", "in"},
	} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitTrouble, status, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.Equal(t, "run 'safetensors help "+args[0]+"' for usage\n", stderr[strings.Index(stderr, "\n")+1:], "%q: one line, then where to look", args)
		assert.True(t, strings.HasPrefix(stderr, "safetensors "+args[0]+": "), "%q: %s", args, stderr)
	}
}

func TestInspect(t *testing.T) {
	status, stdout, stderr := runCmd("inspect", tinyModel)
	assert.Equal(t, exitOK, status, stderr)
	golden(t, "inspect.golden", stdout)

	status, stdout, _ = runCmd("inspect", tinyModel, "--json") // flags may follow the file
	assert.Equal(t, exitOK, status)
	golden(t, "inspect-json.golden", stdout)
	var s summary
	require.NoError(t, json.Unmarshal([]byte(stdout), &s))
	assert.Equal(t, 39, s.Totals.TensorCount)
	assert.Equal(t, uint64(250432), s.Totals.Parameters)
	assert.Equal(t, 4*s.Totals.Parameters, s.Totals.Bytes)
	assert.Equal(t, map[string]any{"format": "pt"}, s.Metadata)

	status, stdout, stderr = runCmd("inspect", filepath.Join(corpus, "invalid", "layout_hole_4.safetensors"))
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "invalid data offsets")

	status, _, stderr = runCmd("inspect", "no-such-file.safetensors")
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "no-such-file.safetensors")
}

// TestInspectSharded inspects a sharded checkpoint of the tiny model, by
// its index and by its directory.
func TestInspectSharded(t *testing.T) {
	src, err := safetensors.Open(tinyModel)
	require.NoError(t, err)
	defer src.Close()
	tensors, err := src.Tensors()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(300_000), checkpoint.FileMetadata(map[string]string{"format": "pt"})))

	index := filepath.Join(dir, "model.safetensors.index.json")
	status, stdout, stderr := runCmd("inspect", index)
	assert.Equal(t, exitOK, status, stderr)
	golden(t, "inspect-sharded.golden", strings.ReplaceAll(stdout, dir, "DIR"), "DIR/model.safetensors.index.json")
	assert.Contains(t, stdout, "39 tensors, 250432 parameters\n4 shards:")

	status, stdout, _ = runCmd("inspect", "--json", dir)
	assert.Equal(t, exitOK, status)
	var s summary
	require.NoError(t, json.Unmarshal([]byte(stdout), &s))
	assert.Len(t, s.Files, 4)
	assert.Equal(t, 39, s.Totals.TensorCount)
	// The model's metadata, its shards' (not the index's bookkeeping, which
	// the totals give).
	assert.Equal(t, map[string]any{"format": "pt"}, s.Metadata)
	for _, ts := range s.Tensors {
		assert.Regexp(t, `^model-0000[1-4]-of-00004.safetensors$`, ts.File)
	}

	status, stdout, _ = runCmd("validate", "--values", dir)
	assert.Equal(t, exitOK, status)
	assert.Equal(t, dir+": ok, 39 tensors in 4 shards, 1001728 bytes of data\n", stdout)

	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00004.safetensors")))
	status, _, stderr = runCmd("inspect", dir)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "model-00002-of-00004.safetensors")
	status, stdout, _ = runCmd("validate", index)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, index+": invalid: ")
}

// TestInspectDataset inspects a dataset directory written by the dataset
// package.
func TestInspectDataset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := dataset.Create(dir, dataset.Batch, []dataset.Column{
		{Name: "x", DType: safetensors.F32, Shape: []uint64{3}}, {Name: "y", DType: safetensors.U8},
	}, dataset.BatchSize(2), dataset.TensorIndex())
	require.NoError(t, err)
	x := make([]byte, 12)
	for i := range 4 {
		require.NoError(t, w.WriteSample(x, []byte{byte(i)}))
	}
	require.NoError(t, w.Close())
	status, stdout, stderr := runCmd("inspect", dir)
	assert.Equal(t, exitOK, status, stderr)
	m := w.Manifest()
	redacted := strings.ReplaceAll(strings.ReplaceAll(stdout, dir, "DIR"), m.Shards[0].Path[16:52], "UUID")
	golden(t, "inspect-dataset.golden", redacted)

	status, stdout, _ = runCmd("inspect", "--json", dir)
	assert.Equal(t, exitOK, status)
	var got datasetSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	assert.Equal(t, "batch", got.Mode)
	assert.True(t, got.Index)
	assert.Equal(t, m.TotalSamples, got.SampleCount)
	assert.Equal(t, m.TotalBytes, got.Bytes)
	require.Len(t, got.Files, len(m.Shards))
	for i, s := range m.Shards {
		assert.Equal(t, datasetFile{s.Path, s.Samples, s.Bytes}, got.Files[i])
	}
	require.Len(t, got.Columns, len(m.Schema))
	for _, c := range got.Columns {
		sc, ok := m.Schema[c.Name]
		require.True(t, ok, c.Name)
		assert.Equal(t, sc.DType, c.DType)
	}

	require.NoError(t, os.Remove(filepath.Join(dir, m.Shards[1].Path)))
	status, _, stderr = runCmd("inspect", dir)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, m.Shards[1].Path)
}

// TestInspectQuotesNames shows that a name holding a newline or spaces
// cannot forge lines of the table.
func TestInspectQuotesNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd.safetensors")
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "a\nb c", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{1}},
	}, map[string]string{"k k": ""}))
	status, stdout, _ := runCmd("inspect", path)
	assert.Equal(t, exitOK, status)
	assert.Contains(t, stdout, `"a\nb c"  U8`)
	assert.Contains(t, stdout, `"k k": ""`)
}

// virtualFile is a large remote file that is a real header followed by
// zeros, generated as it is read, to show that inspect reads only the
// header of a remote file.
type virtualFile struct {
	head []byte
	size int64
}

func (v virtualFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= v.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), v.size-off))
	for i := range n {
		p[i] = 0
		if off+int64(i) < int64(len(v.head)) {
			p[i] = v.head[off+int64(i)]
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func TestInspectURL(t *testing.T) {
	// A 10 GiB file: 40 tensors of 256 MiB, whose data is never read.
	specs := make([]safetensors.TensorSpec, 40)
	for i := range specs {
		specs[i] = safetensors.TensorSpec{Name: fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), DType: safetensors.BF16, Shape: []uint64{16384, 8192}}
	}
	var head bytes.Buffer
	w, err := safetensors.NewWriter(&head, specs, nil)
	require.NoError(t, err)
	size := int64(w.Header().DataOffset() + w.Header().DataLen())
	assert.Equal(t, int64(10<<30), size-int64(w.Header().DataOffset()))
	var requests, served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		cw := &countingWriter{ResponseWriter: rw, n: &served}
		http.ServeContent(cw, r, "model.safetensors", time.Time{}, io.NewSectionReader(virtualFile{head.Bytes(), size}, 0, size))
	}))
	defer srv.Close()

	status, stdout, stderr := runCmd("inspect", srv.URL+"/model.safetensors")
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "40 tensors, 5368709120 parameters")
	assert.Contains(t, stdout, "data 10737418240 bytes (10.0 GiB)")
	assert.Equal(t, int64(1), requests.Load(), "one range request")
	assert.Less(t, served.Load(), int64(64<<10+1), "bytes served")

	srv.Close()
	status, _, stderr = runCmd("inspect", srv.URL+"/model.safetensors")
	assert.Equal(t, exitTrouble, status, "it could not be read")
	assert.NotEmpty(t, stderr)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

func TestValidate(t *testing.T) {
	invalid := filepath.Join(corpus, "invalid", "layout_hole_4.safetensors")
	status, stdout, _ := runCmd("validate", tinyModel, invalid)
	assert.Equal(t, exitFail, status)
	golden(t, "validate.golden", stdout, filepath.ToSlash(invalid))

	status, stdout, _ = runCmd("validate", tinyModel)
	assert.Equal(t, exitOK, status)
	assert.Equal(t, tinyModel+": ok, 39 tensors, 1001728 bytes of data\n", stdout)

	// --values: a file with a NaN and an Inf in its F16 tensor.
	path := filepath.Join(t.TempDir(), "nan.safetensors")
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "ok", DType: safetensors.F32, Shape: []uint64{1}, Data: []byte{0, 0, 0x80, 0x3f}},
		{Name: "bad", DType: safetensors.F16, Shape: []uint64{3}, Data: []byte{0, 0x7e, 0, 0x7c, 0, 0x3c}},
		{Name: "ints", DType: safetensors.I16, Shape: []uint64{1}, Data: []byte{0xff, 0x7f}},
	}, nil))
	status, stdout, _ = runCmd("validate", path)
	assert.Equal(t, exitOK, status, "without --values the values are not read")
	assert.Equal(t, path+": ok, 3 tensors, 12 bytes of data\n", stdout)
	status, stdout, _ = runCmd("validate", "--values", path)
	assert.Equal(t, exitFail, status)
	assert.Equal(t, path+": ok, 3 tensors, 12 bytes of data\n"+path+": tensor bad: 1 NaN, 1 Inf of 3 values\n", stdout)
	status, _, _ = runCmd("validate", "--values", tinyModel)
	assert.Equal(t, exitOK, status)

	// An F8_E8M0 scale holding 0xff, NaN: validate --values, check and
	// stats say so alike.
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "scale", DType: safetensors.F8_E8M0, Shape: []uint64{2}, Data: []byte{0x7f, 0xff}},
	}, nil))
	status, stdout, _ = runCmd("validate", "--values", path)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, path+": tensor scale: 1 NaN, 0 Inf of 2 values\n")
	status, stdout, _ = runCmd("check", path)
	assert.Equal(t, exitFail, status, stdout)
	assert.Contains(t, stdout, "NaN")
	status, stdout, _ = runCmd("stats", path)
	assert.Equal(t, exitFail, status, "values with NaN")
	assert.Regexp(t, `scale +F8_E8M0 +2 +1 +1 +1 +0 +1 +0\n`, stdout)

	// Clipping bounds that hold only infinities, as Gemma's at init: not
	// reported by validate --values nor by check; one infinity among finite
	// values in a bound still is, by both.
	inf, ninf := []byte{0, 0, 0x80, 0x7f}, []byte{0, 0, 0x80, 0xff}
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "layers.0.ffw.input_max", DType: safetensors.F32, Shape: []uint64{}, Data: inf},
		{Name: "layers.0.ffw.input_min", DType: safetensors.F32, Shape: []uint64{2}, Data: append(slices.Clone(ninf), ninf...)},
	}, nil))
	status, stdout, _ = runCmd("validate", "--values", path)
	assert.Equal(t, exitOK, status, stdout)
	status, stdout, _ = runCmd("check", path)
	assert.Equal(t, exitOK, status, stdout)
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "layers.0.ffw.input_max", DType: safetensors.F32, Shape: []uint64{2}, Data: append(slices.Clone(inf), 0, 0, 0x80, 0x3f)},
	}, nil))
	status, stdout, _ = runCmd("validate", "--values", path)
	assert.Equal(t, exitFail, status, stdout)
	status, stdout, _ = runCmd("check", path)
	assert.Equal(t, exitFail, status, stdout)

	status, stdout, _ = runCmd("validate", "no-such-file.safetensors", t.TempDir())
	assert.Equal(t, exitTrouble, status, "neither could be read")
	// A folder that holds no model is not an invalid checkpoint: there is
	// nothing to read.
	assert.Regexp(t, `^no-such-file.safetensors: error: .*\n.*: error: no model found: .*none of model\.safetensors, model\.safetensors\.index\.json, .*nor any \*\.safetensors file`, stdout)
}

// TestValidateCorpus checks that validate gives the reference's verdict on
// every file of the conformance corpus.
func TestValidateCorpus(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(corpus, "expected.json"))
	require.NoError(t, err)
	var expected map[string]struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &expected))
	require.Len(t, expected, 234)
	for name, want := range expected {
		path := filepath.Join(corpus, name)
		status, stdout, _ := runCmd("validate", path)
		if want.OK {
			assert.Equal(t, exitOK, status, "%s: %s", name, stdout)
			assert.True(t, strings.HasPrefix(stdout, path+": ok, "), "%s: %s", name, stdout)
		} else {
			assert.Equal(t, exitFail, status, "%s: the reference says %s", name, want.Error)
			assert.True(t, strings.HasPrefix(stdout, path+": invalid: "), "%s: %s", name, stdout)
		}
	}
}

func TestStats(t *testing.T) {
	status, stdout, stderr := runCmd("stats", tinyModel)
	assert.Equal(t, exitOK, status, stderr)
	golden(t, "stats.golden", stdout)

	status, stdout, _ = runCmd("stats", tinyModel, "model.norm.weight", "lm_head.weight")
	assert.Equal(t, exitOK, status)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^model.norm.weight +F32 +64 +1 +1 +1 +0 +0 +0$`, lines[1])
	assert.Regexp(t, `^lm_head.weight +F32 +32768 `, lines[2])

	status, _, stderr = runCmd("stats", tinyModel, "no.such.tensor")
	assert.Equal(t, exitTrouble, status, "a tensor not found")
	assert.Contains(t, stderr, "no.such.tensor")
}

func TestConvert(t *testing.T) {
	src, err := safetensors.Open(tinyModel)
	require.NoError(t, err)
	defer src.Close()
	dir := t.TempDir()
	for _, tc := range []struct {
		dtype    safetensors.DType
		rounding string
		r        safetensors.Rounding
	}{
		{safetensors.BF16, "nearest", safetensors.RoundNearestEven},
		{safetensors.BF16, "truncate", safetensors.Truncate},
		{safetensors.F16, "nearest", safetensors.RoundNearestEven},
		{safetensors.F16, "truncate", safetensors.Truncate},
	} {
		out := filepath.Join(dir, fmt.Sprintf("%v-%s.safetensors", tc.dtype, tc.rounding))
		status, stdout, stderr := runCmd("convert", "--dtype", tc.dtype.String(), "--rounding", tc.rounding, tinyModel, out)
		require.Equal(t, exitOK, status, stderr)
		info, err := os.Stat(out)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("%s: 39 of 39 tensors converted to %v, %s written\n", out, tc.dtype, bytesString(uint64(info.Size()))), stdout)
		assert.Empty(t, stderr, "no progress bar when stderr is not a terminal")

		got, err := safetensors.Open(out)
		require.NoError(t, err)
		assert.Equal(t, src.Metadata(), got.Metadata())
		assert.ElementsMatch(t, src.Names(), got.Names())
		for _, name := range src.Names() {
			in, _ := src.Tensor(name)
			conv, err := got.Tensor(name)
			require.NoError(t, err)
			assert.Equal(t, tc.dtype, conv.DType)
			assert.Equal(t, in.Shape, conv.Shape)
			vals, err := safetensors.Values[float32](in, nil)
			require.NoError(t, err)
			for i, v := range vals {
				want := safetensors.F32ToBF16(v, tc.r)
				if tc.dtype == safetensors.F16 {
					want = safetensors.F32ToF16(v, tc.r)
				}
				if h := binary.LittleEndian.Uint16(conv.Data[2*i:]); h != want {
					t.Fatalf("%s[%d] = %v: converted to %#04x, want %#04x", name, i, v, h, want)
				}
			}
		}
		got.Close()
	}

	// Back to F32: BF16 values are exact in float32.
	bf16 := filepath.Join(dir, "BF16-nearest.safetensors")
	back := filepath.Join(dir, "back.safetensors")
	status, _, stderr := runCmd("convert", bf16, back, "--dtype", "F32")
	require.Equal(t, exitOK, status, stderr)
	status, stdout, _ := runCmd("inspect", back)
	assert.Equal(t, exitOK, status)
	assert.Contains(t, stdout, "39 tensors, 250432 parameters")
}

// TestConvertKeepsOthers converts a file of mixed dtypes: F64 and F16 are
// cast, integers and F8 are kept.
func TestConvertKeepsOthers(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "mixed.safetensors")
	f64 := make([]byte, 16)
	binary.LittleEndian.PutUint64(f64, math.Float64bits(1.5))
	binary.LittleEndian.PutUint64(f64[8:], math.Float64bits(-1e300))
	tensors := []safetensors.Tensor{
		{Name: "f64", DType: safetensors.F64, Shape: []uint64{2}, Data: f64},
		{Name: "f16", DType: safetensors.F16, Shape: []uint64{1}, Data: []byte{0x00, 0x3c}},
		{Name: "ids", DType: safetensors.I64, Shape: []uint64{1}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "q", DType: safetensors.F8_E4M3, Shape: []uint64{2}, Data: []byte{0x38, 0x40}},
		{Name: "empty", DType: safetensors.F32, Shape: []uint64{0, 5}, Data: nil},
	}
	require.NoError(t, safetensors.WriteFile(in, tensors, map[string]string{"note": "mixed"}))
	out := filepath.Join(dir, "out.safetensors")
	status, _, stderr := runCmd("convert", "--dtype", "BF16", in, out)
	require.Equal(t, exitOK, status, stderr)
	r, err := safetensors.Open(out)
	require.NoError(t, err)
	defer r.Close()
	want := map[string]safetensors.Tensor{
		"f64":   {DType: safetensors.BF16, Data: []byte{0xc0, 0x3f, 0x80, 0xff}}, // 1.5, -1e300 → float32 -Inf
		"f16":   {DType: safetensors.BF16, Data: []byte{0x80, 0x3f}},
		"ids":   tensors[2],
		"q":     tensors[3],
		"empty": {DType: safetensors.BF16, Data: []byte{}},
	}
	for name, w := range want {
		got, err := r.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, w.DType, got.DType, name)
		assert.Equal(t, w.Data, append([]byte{}, got.Data...), name)
	}
	assert.Equal(t, map[string]string{"note": "mixed"}, r.Metadata())
}

// TestConvertFailureLeavesNothing converts an invalid file and a file into a
// missing directory: nothing may appear.
func TestConvertFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	status, _, stderr := runCmd("convert", "--dtype", "F16", filepath.Join(corpus, "invalid", "extra_1_byte.safetensors"), filepath.Join(dir, "out.safetensors"))
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "extra_1_byte")
	status, _, _ = runCmd("convert", "--dtype", "F16", tinyModel, filepath.Join(dir, "missing", "out.safetensors"))
	assert.Equal(t, exitTrouble, status, "OUT could not be written")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestModelDirectory runs inspect, validate and stats on a model's
// directory as transformers writes it: one model.safetensors, or shards
// and an index.
func TestModelDirectory(t *testing.T) {
	src, err := safetensors.Open(tinyModel)
	require.NoError(t, err)
	tensors, err := src.Tensors()
	require.NoError(t, err)
	defer src.Close()
	single, sharded := t.TempDir(), t.TempDir()
	require.NoError(t, checkpoint.Write(single, tensors, checkpoint.MaxShardSize(1<<30)))
	require.NoError(t, checkpoint.Write(sharded, tensors, checkpoint.MaxShardSize(300_000)))

	_, want, _ := runCmd("stats", tinyModel, "model.norm.weight", "lm_head.weight")
	for _, dir := range []string{single, sharded} {
		status, stdout, stderr := runCmd("inspect", dir)
		assert.Equal(t, exitOK, status, stderr)
		assert.Contains(t, stdout, "39 tensors, 250432 parameters")

		status, stdout, stderr = runCmd("validate", "--values", dir)
		assert.Equal(t, exitOK, status, stderr)
		assert.Contains(t, stdout, dir+": ok, 39 tensors in ")

		status, stdout, stderr = runCmd("stats", dir, "model.norm.weight", "lm_head.weight")
		assert.Equal(t, exitOK, status, stderr)
		assert.Equal(t, want, stdout, "the same statistics as the file's")
		status, stdout, _ = runCmd("stats", dir)
		assert.Equal(t, exitOK, status)
		assert.Len(t, strings.Split(strings.TrimSpace(stdout), "\n"), 40)
	}
	empty := t.TempDir()
	status, _, stderr := runCmd("stats", empty)
	assert.Equal(t, exitTrouble, status, "a folder that holds no model")
	assert.Contains(t, stderr, "safetensors stats: "+empty+": no model found")
	assert.Contains(t, stderr, "none of model.safetensors")
}

// TestReadRegular: a file given by a flag (check --config) that is not a
// regular file is refused with the library's sentinel, naming it.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	data, err := readRegular(dir)
	assert.Nil(t, data)
	assert.ErrorIs(t, err, safetensors.ErrNotRegular)
	assert.Contains(t, err.Error(), dir)
}
