package check

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/nonfinite"
)

// The tiny models in testdata/models were written by transformers'
// save_pretrained from its own modeling code (see generate.py there).
const models = "../testdata/models"

func modelNames(t *testing.T) []string {
	entries, err := os.ReadDir(models)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	require.Len(t, names, 13)
	return names
}

// load returns a model's tensors, copied, and its configuration.
func load(t *testing.T, name string) ([]safetensors.Tensor, map[string]any) {
	r, err := safetensors.Open(filepath.Join(models, name, "model.safetensors"))
	require.NoError(t, err)
	defer r.Close()
	ts, err := r.Tensors()
	require.NoError(t, err)
	for i := range ts {
		ts[i].Data = slices.Clone(ts[i].Data)
		ts[i].Shape = slices.Clone(ts[i].Shape)
	}
	data, err := os.ReadFile(filepath.Join(models, name, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(data, &cfg))
	return ts, cfg
}

// checkModel writes the tensors and configuration into a directory and
// checks it.
func checkModel(t *testing.T, ts []safetensors.Tensor, cfg map[string]any) *Report {
	dir := t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil))
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644))
	r, err := Model(t.Context(), dir)
	require.NoError(t, err)
	return r
}

func TestCleanModels(t *testing.T) {
	for _, name := range modelNames(t) {
		r, err := Model(t.Context(), filepath.Join(models, name))
		require.NoError(t, err, name)
		assert.Empty(t, r.Findings, name)
		assert.Empty(t, r.Notes, name)
		assert.NotEmpty(t, r.Family, name)
	}
}

// find returns the findings of a kind about the named tensor or block.
func find(r *Report, kind, name string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Kind == kind && (f.Tensor == name || f.Block == name || f.Key == name || strings.Contains(f.Key, name)) {
			out = append(out, f)
		}
	}
	return out
}

// a block tensor of each model, with its block, and the main stack's
// prefix.
func blockTensor(ts []safetensors.Tensor) (idx int, block string) {
	for i, t := range ts {
		if prefix, num, _, ok := splitBlock(t.Name); ok && num == "1" && len(t.Shape) == 2 {
			return i, prefix + ".1"
		}
	}
	panic("no block tensor")
}

func setF16(t safetensors.Tensor, i int, bits uint16) {
	binary.LittleEndian.PutUint16(t.Data[2*i:], bits)
}

func TestPlantedValueDefects(t *testing.T) {
	for _, name := range modelNames(t) {
		ts, cfg := load(t, name)
		i, _ := blockTensor(ts)
		target := ts[i].Name
		for _, c := range []struct {
			kind     string
			severity Severity
			plant    func(safetensors.Tensor)
			count    uint64
			first    uint64
		}{
			{KindNaN, Error, func(t safetensors.Tensor) { setF16(t, 5, 0x7e00); setF16(t, 9, 0xfe01) }, 2, 5},
			{KindInf, Error, func(t safetensors.Tensor) { setF16(t, 7, 0xfc00) }, 1, 7},
			{KindMagnitude, Warning, func(t safetensors.Tensor) { setF16(t, 3, 0x7a1c); setF16(t, 2, 0xf000) }, 2, 2}, // 50048, -8192
			{KindZero, Warning, func(t safetensors.Tensor) { clear(t.Data); setF16(t, 1, 0x8000) }, 0, 0},
		} {
			planted := slices.Clone(ts)
			planted[i].Data = slices.Clone(ts[i].Data)
			c.plant(planted[i])
			if c.kind == KindMagnitude {
				// -8192 is within the default limit; 50048 is not.
				c.count, c.first = 1, 3
			}
			r := checkModel(t, planted, cfg)
			fs := find(r, c.kind, target)
			require.Len(t, fs, 1, "%s: %s: %v", name, c.kind, r.Findings)
			assert.Equal(t, c.severity, fs[0].Severity)
			assert.Len(t, r.Findings, 1, "%s: %s: only the planted defect: %v", name, c.kind, r.Findings)
			if c.count > 0 {
				assert.Equal(t, c.count, fs[0].Count, "%s %s", name, c.kind)
				require.NotNil(t, fs[0].First)
				assert.Equal(t, c.first, *fs[0].First, "%s %s", name, c.kind)
			}
		}
	}
}

func TestPlantedStructureDefects(t *testing.T) {
	for _, name := range modelNames(t) {
		ts, cfg := load(t, name)
		i, block := blockTensor(ts)
		target := ts[i].Name

		// A tensor missing from one block.
		r := checkModel(t, slices.Delete(slices.Clone(ts), i, i+1), cfg)
		assert.NotEmpty(t, find(r, KindStructure, block), "%s: missing tensor: %v", name, r.Findings)
		assert.NotZero(t, r.Errors())

		// A tensor of another shape in one block: structure and config.
		planted := slices.Clone(ts)
		planted[i].Shape = []uint64{ts[i].Shape[1], ts[i].Shape[0]}
		if ts[i].Shape[0] == ts[i].Shape[1] {
			planted[i].Shape = []uint64{ts[i].Shape[0] / 2, ts[i].Shape[1] * 2}
		}
		// Reported once, by the structure, which says how it differs.
		r = checkModel(t, planted, cfg)
		assert.NotEmpty(t, find(r, KindStructure, target), "%s: reshaped: %v", name, r.Findings)
		assert.Empty(t, find(r, KindConfig, target), "%s: reshaped: %v", name, r.Findings)
		assert.Equal(t, 1, r.Errors(), "%s: reshaped: %v", name, r.Findings)

		// One tensor in F32 among F16 ones.
		planted = slices.Clone(ts)
		vals, err := ts[i].Float32s()
		require.NoError(t, err)
		planted[i], err = safetensors.TensorFromFloat32s(target, safetensors.F32, ts[i].Shape, vals, safetensors.RoundNearestEven)
		require.NoError(t, err)
		r = checkModel(t, planted, cfg)
		assert.Len(t, find(r, KindDTypes, ""), 1, "%s: mixed dtypes: %v", name, r.Findings)
		assert.NotEmpty(t, find(r, KindStructure, target), "%s: mixed dtypes: %v", name, r.Findings)

		// A whole block missing: a gap, which explains the layer count.
		prefix := strings.TrimSuffix(block, ".1")
		planted = slices.DeleteFunc(slices.Clone(ts), func(t safetensors.Tensor) bool { return strings.HasPrefix(t.Name, block+".") })
		r = checkModel(t, planted, cfg)
		assert.NotEmpty(t, find(r, KindStructure, prefix), "%s: gap: %v", name, r.Findings)
		assert.Equal(t, 1, r.Errors(), "%s: gap: %v", name, r.Findings)

		// The last block missing: no gap, but the layer count.
		planted = slices.DeleteFunc(slices.Clone(ts), func(t safetensors.Tensor) bool { return strings.HasPrefix(t.Name, prefix+".2.") })
		r = checkModel(t, planted, cfg)
		assert.Empty(t, find(r, KindStructure, prefix), name)
		assert.NotEmpty(t, find(r, KindConfig, layersKey(cfg)), "%s: last block: %v", name, r.Findings)
	}
}

func layersKey(cfg map[string]any) string {
	if _, ok := cfg["n_layer"]; ok {
		return "n_layer"
	}
	return "num_hidden_layers"
}

func TestPlantedConfigDefects(t *testing.T) {
	// Each key changed in each family's config.json must be reported.
	keys := map[string][]string{
		"llama":      {"hidden_size", "vocab_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers"},
		"mistral":    {"hidden_size", "vocab_size", "intermediate_size", "num_key_value_heads", "head_dim", "num_hidden_layers"},
		"qwen2":      {"hidden_size", "vocab_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers"},
		"qwen3":      {"hidden_size", "vocab_size", "intermediate_size", "num_key_value_heads", "head_dim", "num_hidden_layers"},
		"gemma":      {"hidden_size", "vocab_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers"},
		"gemma2":     {"hidden_size", "vocab_size", "intermediate_size", "num_key_value_heads", "head_dim", "num_hidden_layers"},
		"phi3":       {"hidden_size", "vocab_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers"},
		"gpt2":       {"n_embd", "vocab_size", "n_positions", "n_layer", "n_inner"},
		"gpt_neox":   {"hidden_size", "vocab_size", "intermediate_size", "num_hidden_layers"},
		"falcon":     {"hidden_size", "vocab_size", "num_attention_heads", "num_hidden_layers", "ffn_hidden_size"},
		"falcon-new": {"hidden_size", "num_attention_heads", "num_kv_heads", "num_hidden_layers", "ffn_hidden_size"},
		"falcon-mha": {"hidden_size", "vocab_size", "num_hidden_layers"},
		"bert":       {"hidden_size", "vocab_size", "intermediate_size", "max_position_embeddings", "num_hidden_layers"},
	}
	for name, ks := range keys {
		ts, cfg := load(t, name)
		for _, k := range ks {
			planted := map[string]any{}
			for kk, v := range cfg {
				planted[kk] = v
			}
			old, _ := cfg[k].(float64)
			if k == "n_inner" || k == "ffn_hidden_size" && old == 0 {
				old = 4 * cfg[map[bool]string{true: "n_embd", false: "hidden_size"}[name == "gpt2"]].(float64)
			}
			planted[k] = old * 2
			r := checkModel(t, ts, planted)
			assert.NotEmpty(t, find(r, KindConfig, k), "%s: %s doubled: %v", name, k, r.Findings)
			assert.NotZero(t, r.Errors(), "%s: %s", name, k)
		}
	}
	// Untied embeddings without lm_head.
	ts, cfg := load(t, "llama")
	ts = slices.DeleteFunc(ts, func(t safetensors.Tensor) bool { return t.Name == "lm_head.weight" })
	r := checkModel(t, ts, cfg)
	assert.NotEmpty(t, find(r, KindConfig, "lm_head.weight"), "%v", r.Findings)
	cfg["tie_word_embeddings"] = true
	assert.Empty(t, checkModel(t, ts, cfg).Findings)
}

func TestUnknownFamily(t *testing.T) {
	ts, cfg := load(t, "llama")
	cfg["model_type"] = "mamba"
	r := checkModel(t, ts, cfg)
	assert.Empty(t, r.Findings)
	assert.Empty(t, r.Family)
	// The general rule checked its sizes: no note says otherwise.
	assert.Contains(t, r.Checked, "hidden_size")
	assert.Empty(t, r.Notes)
	// A configuration none of whose keys the weights can be checked
	// against says so.
	r = checkModel(t, ts, map[string]any{"model_type": "mamba", "torch_dtype": "float16"})
	assert.Empty(t, r.Checked)
	require.Len(t, r.Notes, 1)
	assert.Contains(t, r.Notes[0], `"mamba"`)
}

func TestLargeTensorInParallel(t *testing.T) {
	// Values checked in chunks by several goroutines: the first index is
	// the first over all chunks, the count the sum.
	for _, d := range []safetensors.DType{safetensors.F32, safetensors.BF16, safetensors.F16, safetensors.F64} {
		n := 3*chunkBytes/(d.Bits()/8) + 17
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = math.Sin(float64(i)) + 2
		}
		bad := []int{n - 1, chunkBytes / (d.Bits() / 8), 2*chunkBytes/(d.Bits()/8) + 3}
		for _, i := range bad {
			vals[i] = math.NaN()
		}
		vals[100] = 5e4
		vals[n-2] = math.Inf(-1)
		var tn safetensors.Tensor
		if d == safetensors.F64 {
			data := make([]byte, 8*n)
			for i, v := range vals {
				binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(v))
			}
			tn = safetensors.Tensor{Name: "x", DType: d, Shape: []uint64{uint64(n)}, Data: data}
		} else {
			f32 := make([]float32, n)
			for i, v := range vals {
				f32[i] = float32(v)
			}
			var err error
			tn, err = safetensors.TensorFromFloat32s("x", d, []uint64{uint64(n)}, f32, safetensors.RoundNearestEven)
			require.NoError(t, err)
		}
		fs, _, err := scanTensors(t.Context(), []safetensors.Tensor{tn}, DefaultMaxAbs, 4)
		require.NoError(t, err)
		require.Len(t, fs, 3, "%v: %v", d, fs)
		byKind := map[string]Finding{}
		for _, f := range fs {
			byKind[f.Kind] = f
		}
		assert.Equal(t, uint64(3), byKind[KindNaN].Count, d)
		assert.Equal(t, uint64(bad[1]), *byKind[KindNaN].First, d)
		assert.Equal(t, uint64(1), byKind[KindInf].Count, d)
		assert.Equal(t, uint64(n-2), *byKind[KindInf].First, d)
		assert.Equal(t, uint64(1), byKind[KindMagnitude].Count, d)
		assert.Equal(t, uint64(100), *byKind[KindMagnitude].First, d)
	}
}

func TestStructureOddNames(t *testing.T) {
	shape := []uint64{2}
	infos := []info{
		{Name: "layers.01.w", DType: safetensors.F32, Shape: shape},
		{Name: "model.layers.99999999999999999999999.w", DType: safetensors.F32, Shape: shape},
		{Name: "h.0.attn.w", DType: safetensors.F32, Shape: shape},
		{Name: "h.1000000000.attn.w", DType: safetensors.F32, Shape: shape},
		{Name: "h.", DType: safetensors.F32, Shape: shape},
		{Name: "layers..w", DType: safetensors.F32, Shape: shape},
	}
	res := structure(infos)
	var msgs []string
	for _, f := range res.findings {
		msgs = append(msgs, f.String())
	}
	assert.Len(t, res.findings, 3, "%v", msgs)
	assert.Contains(t, msgs[0], `"layers.01.w"`)
	assert.Contains(t, msgs[2], "h.1, h.2, h.3")
}

func TestInvalidConfig(t *testing.T) {
	for _, c := range []string{"[1]", "null", "{", ""} {
		_, err := Run(t.Context(), memSourceOf(), Config([]byte(c)))
		require.ErrorIs(t, err, ErrInvalidConfig, c)
	}
}

type memSource []safetensors.Tensor

// scanTensors runs scanValues on tensors held in memory.
func scanTensors(ctx context.Context, ts []safetensors.Tensor, maxAbs float64, workers int) ([]Finding, []string, error) {
	infos := make([]info, len(ts))
	for i, t := range ts {
		infos[i] = info{Name: t.Name, DType: t.DType, Shape: t.Shape, size: uint64(len(t.Data))}
	}
	return scanValues(ctx, safetensors.AsElementSource(memSourceOf(ts...)), infos, maxAbs, workers, nil)
}

func memSourceOf(ts ...safetensors.Tensor) memSource { return ts }

func (m memSource) Names() []string {
	var names []string
	for _, t := range m {
		names = append(names, t.Name)
	}
	return names
}

func (m memSource) TensorContext(_ context.Context, name string) (safetensors.Tensor, error) {
	for _, t := range m {
		if t.Name == name {
			return t, nil
		}
	}
	return safetensors.Tensor{}, safetensors.ErrTensorNotFound
}

func TestBuffers(t *testing.T) {
	// GPT-NeoX checkpoints of old saved masked_bias (-1e9, F32) and
	// inv_freq (F32) beside F16 weights: no warning for them.
	ts, cfg := load(t, "gpt_neox")
	big, err := safetensors.TensorFromFloat32s("gpt_neox.layers.0.attention.masked_bias", safetensors.F32, []uint64{}, []float32{-1e9}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	mask, err := safetensors.TensorFromFloat32s("gpt_neox.layers.0.attention.bias", safetensors.F32, []uint64{1, 1, 2, 2}, []float32{0, 0, 0, 0}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	nan, err := safetensors.TensorFromFloat32s("gpt_neox.layers.1.attention.rotary_emb.inv_freq", safetensors.F32, []uint64{2}, []float32{1, float32(math.NaN())}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	r := checkModel(t, append(ts, big, mask, nan), cfg)
	var kinds []string
	for _, f := range r.Findings {
		kinds = append(kinds, f.Kind)
	}
	// The buffers in one block only are a structure error; the NaN is
	// still an error; no magnitude, zero or dtype warning.
	assert.NotContains(t, kinds, KindMagnitude)
	assert.NotContains(t, kinds, KindZero)
	assert.NotContains(t, kinds, KindDTypes)
	assert.Contains(t, kinds, KindNaN)
}

// TestValueLimits checks the word-at-a-time fast path's thresholds: values
// at the limit pass, those beyond are reported, Inf and NaN always are,
// with the limit off too, in every lane and in the tail.
func TestValueLimits(t *testing.T) {
	for _, d := range []safetensors.DType{safetensors.F32, safetensors.BF16, safetensors.F16} {
		for _, maxAbs := range []float64{1e4, 0.5, -1} {
			limit := maxAbs // -1: the check off, as NoMagnitude sets it
			if maxAbs < 0 {
				limit = math.Inf(1)
			}
			for _, n := range []int{1, 5, 8, 9, 64, 67} {
				for pos := range n {
					for _, v := range []float32{float32(maxAbs), -float32(maxAbs), float32(maxAbs) * 1.01, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0x1p-20} {
						vals := make([]float32, n)
						for i := range vals {
							vals[i] = 0.25
						}
						vals[pos] = v
						tn, err := safetensors.TensorFromFloat32s("x", d, []uint64{uint64(n)}, vals, safetensors.RoundNearestEven)
						require.NoError(t, err)
						fs, _, err := scanTensors(t.Context(), []safetensors.Tensor{tn}, limit, 0)
						require.NoError(t, err)
						back, _ := tn.Float32s()
						x := float64(back[pos])
						var want string
						switch {
						case math.IsNaN(x):
							want = KindNaN
						case math.IsInf(x, 0):
							want = KindInf
						case maxAbs > 0 && math.Abs(x) > maxAbs:
							want = KindMagnitude
						}
						if want == "" {
							require.Empty(t, fs, "%v limit %v n %d pos %d v %v", d, maxAbs, n, pos, x)
							continue
						}
						require.Len(t, fs, 1, "%v limit %v n %d pos %d v %v", d, maxAbs, n, pos, x)
						require.Equal(t, want, fs[0].Kind)
						require.Equal(t, uint64(pos), *fs[0].First)
					}
				}
			}
		}
	}
}

// TestNoLimit: the limits with the magnitude check off are
// nonfinite.NoLimit, which counts NaN and infinities only.
func TestNoLimit(t *testing.T) {
	assert.Equal(t, nonfinite.NoLimit, newLimits(math.Inf(1)))
}

func TestHeadsNotDividing(t *testing.T) {
	// A head count that does not divide the hidden size is an error of
	// the configuration, naming both keys, in every family that derives
	// the head size from them.
	for name, k := range map[string]string{
		"llama": "num_attention_heads", "qwen2": "num_attention_heads", "phi3": "num_attention_heads",
		"gpt2": "n_head", "gpt_neox": "num_attention_heads", "falcon": "num_attention_heads",
		"falcon-new": "num_attention_heads", "bert": "num_attention_heads",
	} {
		ts, cfg := load(t, name)
		delete(cfg, "head_dim")
		cfg[k] = 3.0 // the hidden size is 16
		r := checkModel(t, ts, cfg)
		var found bool
		for _, f := range find(r, KindConfig, k) {
			if f.Severity == Error && strings.Contains(f.Message, k+" = 3 does not divide") {
				found = true
			}
		}
		assert.True(t, found, "%s: %v", name, r.Findings)
	}
}

// TestValueVerdictsAgree checks that the value checks count, for a tensor
// of every dtype holding each of its codes (the 8- and 16-bit types) or a
// NaN, an infinity and a finite value (the wider ones), the NaN and
// infinite values that safetensors.Tensor.Stats counts, which the
// command's stats and validate --values report: the three agree on every
// file.
func TestValueVerdictsAgree(t *testing.T) {
	var ts []safetensors.Tensor
	for d := safetensors.BOOL; d <= safetensors.U64; d++ {
		var data []byte
		switch d.Bits() {
		case 8:
			for c := range 256 {
				data = append(data, byte(c))
			}
		case 16:
			for c := range 1 << 16 {
				data = binary.LittleEndian.AppendUint16(data, uint16(c))
			}
		case 32:
			for _, v := range []uint32{0x7fc00001, 0xff800000, 0x3f800000} {
				data = binary.LittleEndian.AppendUint32(data, v)
			}
		case 64:
			for _, v := range []uint64{0x7ff8000000000001, 0x7ff0000000000000, 0x3ff0000000000000} {
				data = binary.LittleEndian.AppendUint64(data, v)
			}
		default: // F4 and F6: three bytes are whole elements of both
			data = []byte{0xff, 0x7f, 0xfe}
		}
		n := uint64(len(data)) * 8 / uint64(d.Bits())
		ts = append(ts, safetensors.Tensor{Name: d.String(), DType: d, Shape: []uint64{n}, Data: data})
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, safetensors.WriteFile(path, ts, nil))
	r, err := Model(t.Context(), path, NoMagnitude())
	require.NoError(t, err)
	for _, tensor := range ts {
		var nan, inf uint64
		if s, err := tensor.Stats(); err == nil {
			nan, inf = s.NaN, s.Inf
		}
		var gotNaN, gotInf uint64
		for _, f := range find(r, KindNaN, tensor.Name) {
			assert.Equal(t, Error, f.Severity)
			gotNaN += f.Count
		}
		for _, f := range find(r, KindInf, tensor.Name) {
			assert.Equal(t, Error, f.Severity)
			gotInf += f.Count
		}
		assert.Equal(t, nan, gotNaN, "%v: NaN values", tensor.DType)
		assert.Equal(t, inf, gotInf, "%v: infinite values", tensor.DType)
	}

	// The file of the issue: one F8_E8M0 scale holding 0xff, NaN.
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "scale", DType: safetensors.F8_E8M0, Shape: []uint64{3}, Data: []byte{0x7f, 0xff, 0x80}},
	}, nil))
	r, err = Model(t.Context(), path)
	require.NoError(t, err)
	assert.Equal(t, 1, r.Errors(), "%v", r.Findings)
	fs := find(r, KindNaN, "scale")
	require.Len(t, fs, 1, "%v", r.Findings)
	require.NotNil(t, fs[0].First)
	assert.Equal(t, uint64(1), *fs[0].First)
}
