package quant

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

func TestQuantize(t *testing.T) {
	q, scale, err := Quantize(nil, []float32{-0.5, -0.25, 0.1, 0.5})
	require.NoError(t, err)
	assert.Equal(t, []int8{-127, -64, 25, 127}, q)
	assert.Equal(t, float32(0.5)/127, scale)

	// Ties round away from zero: max|x| = 127 makes the factor 1.
	q, _, err = Quantize(nil, []float32{127, 2.5, -2.5, 0.5, -0.5, 1.5})
	require.NoError(t, err)
	assert.Equal(t, []int8{127, 3, -3, 1, -1, 2}, q)

	q, scale, err = Quantize(make([]int8, 1, 8), []float32{0, 0, float32(math.Copysign(0, -1))})
	require.NoError(t, err)
	assert.Equal(t, []int8{0, 0, 0}, q)
	assert.Zero(t, scale)
	assert.Equal(t, []float32{0, 0, 0}, Dequantize(nil, q, scale))

	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		_, _, err = Quantize(nil, []float32{1, bad})
		require.ErrorIs(t, err, ErrNotFinite)
		assert.Contains(t, err.Error(), "element 1")
	}
}

func TestDequantizeWithinHalfScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		x := make([]float32, 1000)
		spread := math.Pow(10, rng.Float64()*8-4)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * spread)
		}
		q, scale, err := Quantize(nil, x)
		require.NoError(t, err)
		back := Dequantize(nil, q, scale)
		for i := range x {
			// scale/2, plus the float32 roundings of x*factor and q*scale.
			require.LessOrEqual(t, math.Abs(float64(back[i])-float64(x[i])), float64(scale)/2*(1+1e-5), "x=%v q=%d", x[i], q[i])
		}
	}
}

func bf16Weight(t *testing.T, name string, rows, cols int, f func(r, c int) float32) safetensors.Tensor {
	vals := make([]float32, rows*cols)
	for r := range rows {
		for c := range cols {
			vals[r*cols+c] = f(r, c)
		}
	}
	w, err := safetensors.TensorFromFloat32s(name, safetensors.BF16, []uint64{uint64(rows), uint64(cols)}, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	return w
}

func TestCompressWeight(t *testing.T) {
	// Row 0: max 127.5 gives scale 1, so q is round_half_even(x): 2.5 → 2,
	// 3.5 → 4, -0.5 → -0. Row 1 is zeros: BF16's eps, q 0. Row 2:
	// |min| dominates: scale 2, -255 → -127.5 → -128.
	w := bf16Weight(t, "m.weight", 3, 4, func(r, c int) float32 {
		return [][]float32{{127.5, 2.5, 3.5, -0.5}, {0, 0, 0, 0}, {-255, 1, 5, 7}}[r][c]
	})
	q, scale, err := CompressWeight(w, PerChannel)
	require.NoError(t, err)
	assert.Equal(t, "m.weight", q.Name)
	assert.Equal(t, safetensors.I8, q.DType)
	assert.Equal(t, []byte{127, 2, 4, 0, 0, 0, 0, 0, 0x80, 0, 2, 4}, q.Data)
	assert.Equal(t, "m.weight_scale", scale.Name)
	assert.Equal(t, []uint64{3, 1}, scale.Shape)
	s, err := scale.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0x1p-7, 2}, s)

	q, scale, err = CompressWeight(w, PerTensor)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, scale.Shape)
	s, err = scale.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{2}, s)
	// 127.5/2 = 63.75 → 64; 2.5/2 = 1.25 → 1; 3.5/2 = 1.75 → 2; 1/2 → 0; 5/2 → 2; 7/2 = 3.5 → 4.
	assert.Equal(t, []byte{64, 1, 2, 0, 0, 0, 0, 0, 0x80, 0, 2, 4}, q.Data)

	back, err := DecompressWeight(q, scale)
	require.NoError(t, err)
	vals, err := back.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{128, 2, 4, 0, 0, 0, 0, 0, -256, 0, 4, 8}, vals)

	nan := bf16Weight(t, "n.weight", 2, 3, func(r, c int) float32 {
		if r == 1 && c == 2 {
			return float32(math.NaN())
		}
		return 1
	})
	for _, s := range []Strategy{PerChannel, PerTensor} {
		_, _, err = CompressWeight(nan, s)
		require.ErrorIs(t, err, ErrNotFinite)
		assert.Contains(t, err.Error(), `"n.weight": element 5`)
	}
	_, _, err = CompressWeight(safetensors.Tensor{Name: "v", DType: safetensors.BF16, Shape: []uint64{4}, Data: make([]byte, 8)}, PerChannel)
	require.ErrorIs(t, err, ErrUnsupported)
	_, _, err = CompressWeight(safetensors.Tensor{Name: "v", DType: safetensors.BF16, Shape: []uint64{2, 2}, Data: make([]byte, 7)}, PerChannel)
	require.ErrorIs(t, err, ErrUnsupported)
}

// TestCompressWeightParallel checks that a weight large enough to be split
// across goroutines gives what one goroutine gives, row by row.
func TestCompressWeightParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := bf16Weight(t, "big.weight", 512, 300, func(r, c int) float32 { return float32(rng.NormFloat64()) })
	q, scale, err := CompressWeight(w, PerChannel)
	require.NoError(t, err)
	for r := range 512 {
		row := safetensors.Tensor{Name: "row", DType: w.DType, Shape: []uint64{1, 300}, Data: w.Data[r*600 : (r+1)*600]}
		rq, rs, err := CompressWeight(row, PerChannel)
		require.NoError(t, err)
		require.Equal(t, rq.Data, q.Data[r*300:(r+1)*300], "row %d", r)
		require.Equal(t, rs.Data, scale.Data[2*r:2*r+2], "row %d", r)
	}
}

// tinyModel writes a Llama-shaped model directory: embeddings, two blocks
// of attention and MLP projections with norms, a final norm, lm_head.
func tinyModel(t *testing.T, dir string) []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(7, 8))
	gen := func(int, int) float32 { return float32(rng.NormFloat64() * 0.02) }
	var ts []safetensors.Tensor
	ts = append(ts, bf16Weight(t, "model.embed_tokens.weight", 32, 16, gen), bf16Weight(t, "lm_head.weight", 32, 16, gen))
	for i := range 2 {
		p := "model.layers." + string(rune('0'+i)) + "."
		for _, n := range []string{"self_attn.q_proj", "self_attn.o_proj", "mlp.gate_proj"} {
			ts = append(ts, bf16Weight(t, p+n+".weight", 16, 16, gen))
		}
		ts = append(ts, bf16Weight(t, p+"self_attn.k_proj.weight", 8, 16, gen))
		norm, err := safetensors.TensorFromFloat32s(p+"input_layernorm.weight", safetensors.BF16, []uint64{16}, make([]float32, 16), safetensors.RoundNearestEven)
		require.NoError(t, err)
		ts = append(ts, norm)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama", "rms_norm_eps": 1e-5, "hidden_size": 16}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{}`), 0o644))
	return ts
}

func TestWriteModel(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	tensors := tinyModel(t, src)
	sum, err := WriteModel(t.Context(), src, dst, PerChannel)
	require.NoError(t, err)
	assert.Len(t, sum.Quantized, 8)
	assert.Equal(t, []string{"lm_head.weight", "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight", "model.layers.1.input_layernorm.weight"}, sum.Kept)
	assert.Equal(t, []string{"tokenizer.json"}, sum.Copied)
	assert.Equal(t, []string{"lm_head"}, sum.Ignore)

	r, err := safetensors.Open(filepath.Join(dst, "model.safetensors"))
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, map[string]string{"format": "pt"}, r.Metadata())
	assert.Len(t, r.Names(), len(tensors)+8)
	for _, w := range tensors {
		got, err := r.Tensor(w.Name)
		require.NoError(t, err)
		if !IsLinearWeight(w.Name, w.Shape) {
			assert.Equal(t, w, got)
			continue
		}
		q, scale, err := CompressWeight(w, PerChannel)
		require.NoError(t, err)
		assert.Equal(t, q, got)
		gotScale, err := r.Tensor(ScaleName(w.Name))
		require.NoError(t, err)
		assert.Equal(t, scale, gotScale)
	}
	cfg, err := os.ReadFile(filepath.Join(dst, "config.json"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(cfg), "{\n  \"hidden_size\": 16,\n  \"model_type\": \"llama\",\n  \"quantization_config\": {\n"), string(cfg))
	assert.True(t, strings.HasSuffix(string(cfg), "  \"rms_norm_eps\": 1e-05\n}"), string(cfg))
	var parsed struct {
		Q map[string]any `json:"quantization_config"`
	}
	require.NoError(t, json.Unmarshal(cfg, &parsed))
	assert.Equal(t, "int-quantized", parsed.Q["format"])
	assert.Equal(t, "compressed", parsed.Q["quantization_status"])
	assert.Equal(t, []any{"lm_head"}, parsed.Q["ignore"])

	_, err = WriteModel(t.Context(), src, dst, PerChannel)
	require.ErrorIs(t, err, os.ErrExist)
}

func TestWriteModelFailureLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	src, dst := filepath.Join(parent, "src"), filepath.Join(parent, "dst")
	tinyModel(t, src)
	bad := bf16Weight(t, "model.layers.0.mlp.up_proj.weight", 2, 2, func(int, int) float32 { return float32(math.Inf(1)) })
	require.NoError(t, safetensors.WriteFile(filepath.Join(src, "model.safetensors"), []safetensors.Tensor{bad}, nil))
	_, err := WriteModel(t.Context(), src, dst, PerTensor)
	require.ErrorIs(t, err, ErrNotFinite)
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only src is left")
}

func TestWriteModelSharded(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	tensors := tinyModel(t, src)
	require.NoError(t, os.Remove(filepath.Join(src, "model.safetensors")))
	require.NoError(t, checkpoint.Write(src, tensors, checkpoint.MaxShardSize(1500)))
	sum, err := WriteModel(t.Context(), src, dst, PerTensor)
	require.NoError(t, err)
	assert.Greater(t, len(sum.Files), 1)
	sh, err := checkpoint.Open(t.Context(), dst)
	require.NoError(t, err, "the index lists every tensor with the right total size")
	defer sh.Close()
	assert.Len(t, sh.Names(), len(tensors)+8)
	q, err := sh.Tensor("model.layers.1.mlp.gate_proj.weight")
	require.NoError(t, err)
	assert.Equal(t, safetensors.I8, q.DType)
	scale, err := sh.Tensor("model.layers.1.mlp.gate_proj.weight_scale")
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, scale.Shape)
}

func TestIsLinearWeight(t *testing.T) {
	two := []uint64{4, 4}
	for name, want := range map[string]bool{
		"model.layers.0.self_attn.q_proj.weight":             true,
		"model.layers.0.self_attn.qkv_proj.weight":           true,
		"model.layers.0.mlp.gate_up_proj.weight":             true,
		"gpt_neox.layers.0.attention.query_key_value.weight": true,
		"transformer.h.0.mlp.dense_4h_to_h.weight":           true,
		"bert.encoder.layer.0.attention.self.query.weight":   true,
		"bert.encoder.layer.0.intermediate.dense.weight":     true,
		"model.layers.0.self_attn.q_proj.bias":               false,
		"model.embed_tokens.weight":                          false,
		"transformer.word_embeddings.weight":                 false,
		"bert.embeddings.position_embeddings.weight":         false,
		"lm_head.weight":                                         false,
		"embed_out.weight":                                       false,
		"transformer.wte.weight":                                 false,
		"transformer.h.0.attn.c_attn.weight":                     false,
		"model.layers.0.input_layernorm.weight":                  false,
		"transformer.h.0.ln_1.weight":                            false,
		"bert.encoder.layer.0.attention.output.LayerNorm.weight": false,
	} {
		assert.Equal(t, want, IsLinearWeight(name, two), name)
	}
	assert.False(t, IsLinearWeight("model.layers.0.self_attn.q_proj.weight", []uint64{4}))
}

// TestQuantRowBF16AllValues checks quantRow's BF16 path (the AVX2 loop
// where the machine has it; else, as with the purego tag, the loop that
// multiplies by the reciprocal unless near a rounding boundary) against the
// division the rule specifies, for every finite BF16 value and many scales.
func TestQuantRowBF16AllValues(t *testing.T) {
	var x []float32
	for b := range 1 << 16 {
		v := math.Float32frombits(uint32(b) << 16)
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			x = append(x, v)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	scales := []float32{0x1p-7, 1, 1.0 / 127.5, 0x1p-133, 3e38, 0.0078735}
	for range 200 {
		scales = append(scales, roundBF16(float32(math.Exp(rng.Float64()*40-30))))
	}
	q := make([]byte, len(x))
	for _, s := range scales {
		quantRow(q, x, s, float32(math.MaxFloat32), safetensors.BF16)
		for i, v := range x {
			if want := toInt8(roundBF16(float32(v / s))); q[i] != want {
				t.Fatalf("scale %v, x %v: got %d, want %d", s, v, int8(q[i]), int8(want))
			}
		}
	}
}

// TestQuantRowBF16Raw checks the BF16 path that reads the bytes directly
// against quantRow on the decoded values, and rowMaxAbsBF16 against
// rowMaxAbs.
func TestQuantRowBF16Raw(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 3, 8, 9, 17, 4096} {
		raw := make([]byte, 2*n)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		for i := 0; i < n; i++ { // finite values
			if raw[2*i+1]&0x7f == 0x7f && raw[2*i]&0x80 != 0 {
				raw[2*i+1] &^= 1
			}
		}
		x := safetensors.BF16BytesToF32s(nil, raw)
		m, bad := rowMaxAbsBF16(raw)
		wm, wbad := rowMaxAbs(x)
		require.Equal(t, wbad, bad)
		require.Equal(t, wm, m)
		s := scaleOf(m, safetensors.BF16)
		got, want := make([]byte, n), make([]byte, n)
		quantRow(want, x, s, m, safetensors.BF16)
		quantRowBF16(got, raw, s, m) // by table
		require.Equal(t, want, got, n)
		clear(got)
		quantRowBF16(got, raw, s, float32(math.Inf(1))) // by multiplication
		require.Equal(t, want, got, n)
		raw[2*(n-1)+1], raw[2*(n-1)] = 0x7f, 0x80 // +Inf last
		_, bad = rowMaxAbsBF16(raw)
		require.Equal(t, n-1, bad)
	}
}

func TestWriteModelFileAndConv1D(t *testing.T) {
	// A single file: its directory's config.json comes along.
	dst := filepath.Join(t.TempDir(), "q")
	sum, err := WriteModel(t.Context(), "../testdata/models/gpt2/model.safetensors", dst, PerChannel)
	require.NoError(t, err)
	// GPT-2's projections are Conv1D modules, not nn.Linear: none is
	// quantized, as compressed-tensors' "Linear" target matches none.
	assert.Empty(t, sum.Quantized)
	assert.Empty(t, sum.Copied)
	entries, err := os.ReadDir(dst)
	require.NoError(t, err)
	assert.Len(t, entries, 2) // model.safetensors, config.json
	cfg, err := os.ReadFile(filepath.Join(dst, "config.json"))
	require.NoError(t, err)
	assert.Contains(t, string(cfg), `"model_type": "gpt2"`)

	// GPT-NeoX's head is embed_out: kept, and in the ignore list.
	sum, err = WriteModel(t.Context(), "../testdata/models/gpt_neox", filepath.Join(t.TempDir(), "q"), PerTensor)
	require.NoError(t, err)
	assert.Equal(t, []string{"lm_head", "embed_out"}, sum.Ignore)
	assert.Contains(t, sum.Kept, "embed_out.weight")
	assert.Len(t, sum.Quantized, 12)
}

// bf16Values returns every finite BF16 value, as float32s and as bytes.
func bf16Values() ([]float32, []byte) {
	var x []float32
	var raw []byte
	for b := range 1 << 16 {
		v := math.Float32frombits(uint32(b) << 16)
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			x = append(x, v)
			raw = append(raw, byte(b), byte(b>>8))
		}
	}
	return x, raw
}

// TestQuantRowBF16Table checks the BF16 table path against the rule's
// definition, toInt8(roundBF16(x / s)), for every finite BF16 x and every
// BF16 scale mantissa at exponents across the range (every exponent with
// -tags slow, the two extremes with -short), wherever bf16Fast takes the table: x up to the greatest
// value that bf16Fast accepts as max|x|, and beyond it bf16Fast refusing.
func TestQuantRowBF16Table(t *testing.T) {
	x, raw := bf16Values()
	exps := []uint32{0, 1, 2, 3, 60, 120, 127, 246, 247, 250, 254}
	if testing.Short() {
		exps = []uint32{2, 247}
	}
	if slowTests {
		exps = exps[:0]
		for e := range uint32(255) {
			exps = append(exps, e)
		}
	}
	q := make([]byte, len(x))
	checked := 0
	for _, e := range exps {
		for m := range uint32(128) {
			s := math.Float32frombits((e<<7 | m) << 16)
			if s == 0 {
				continue
			}
			// The greatest x that bf16Fast accepts as max|x| (it accepts
			// the values below a bound), by bisection; the next is refused.
			lo, hi := -1, 0x7f80 // bits accepted up to lo, refused from hi
			for hi-lo > 1 {
				mid := (lo + hi) / 2
				if _, _, ok := bf16Fast(s, math.Float32frombits(uint32(mid)<<16)); ok {
					lo = mid
				} else {
					hi = mid
				}
			}
			if lo < 0 {
				continue
			}
			top := math.Float32frombits(uint32(lo) << 16)
			for _, b := range []int{hi, hi + 1, 0x7f7f} {
				if b >= hi && b <= 0x7f7f {
					_, _, ok := bf16Fast(s, math.Float32frombits(uint32(b)<<16))
					require.False(t, ok, "scale %v, max bits %#x", s, b)
				}
			}
			if e >= 2 && e <= 246 {
				// Every row whose scale is its max|x| / 127.5 rounded is
				// taken: max|x| < 127.5 · (s + ulp(s)/2).
				require.GreaterOrEqual(t, float64(top), float64(s)*127.5*(1+0x1p-8), "scale %v", s)
			}
			tab, off, ok := bf16Fast(s, top)
			require.True(t, ok)
			quantRowBF16Table(q, raw, tab, off)
			for i, v := range x {
				if float32(math.Abs(float64(v))) > top {
					continue
				}
				if want := toInt8(roundBF16(float32(v / s))); q[i] != want {
					t.Fatalf("scale %v, x %v: got %d, want %d", s, v, int8(q[i]), int8(want))
				}
				checked++
			}
		}
	}
	t.Logf("%d values checked", checked)
}

// TestQuantRowF16AllValues checks quantRow's F16 path (the AVX2 loop, or
// without it the one that multiplies by the reciprocal unless near an F16
// midpoint), both rounding by bits, against the
// rule's definition for every finite F16 value and many F16 scales: every
// mantissa at a few exponents (every eighth at one with -short), random
// ones, the extremes.
func TestQuantRowF16AllValues(t *testing.T) {
	var x []float32
	for b := range 1 << 16 {
		v := safetensors.F16ToF32(uint16(b))
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			x = append(x, v)
		}
	}
	f16 := func(b uint32) float32 { return safetensors.F16ToF32(uint16(b)) }
	scales := []float32{f16(1), f16(0x3ff), f16(0x400), 0x1p-10, 1, f16(0x7bff), f16(0x7bfe)}
	exps, step := []uint32{1, 8, 15, 30}, uint32(1)
	if testing.Short() {
		exps, step = []uint32{15}, 8
	}
	for _, e := range exps {
		for m := uint32(0); m < 1024; m += step {
			scales = append(scales, f16(e<<10|m))
		}
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for range 100 {
		scales = append(scales, f16(rng.Uint32N(0x7c00-1)+1))
	}
	q := make([]byte, len(x))
	for _, s := range scales {
		quantRow(q, x, s, float32(math.MaxFloat32), safetensors.F16)
		for i, v := range x {
			if want := toInt8(roundF16(float32(v / s))); q[i] != want {
				t.Fatalf("scale %v, x %v: got %d, want %d", s, v, int8(q[i]), int8(want))
			}
		}
	}
}

// TestQuantRowF32 checks quantRow's F32 path (the AVX2 loop, which
// divides, or without it the one that multiplies by the reciprocal unless
// near a half-integer) against the rule's definition for
// random values and for the values nearest the ties (k + 1/2) · scale and
// the clamps, at many scales, with max|x| as the bound.
func TestQuantRowF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	scales := []float32{1, 0x1p-23, 0x1p-126, 0x1p-149, 1.0 / 127.5, 3e38, math.MaxFloat32}
	for range 300 {
		scales = append(scales, float32(math.Exp(rng.Float64()*160-80)))
	}
	for _, s := range scales {
		var x []float32
		for k := -130; k <= 130; k++ {
			c := float32(float64(k) + 0.5)
			for _, v := range []float32{c * s, float32(float64(c) * float64(s))} {
				x = append(x, v)
				up, down := v, v
				for range 4 {
					up = math.Nextafter32(up, float32(math.Inf(1)))
					down = math.Nextafter32(down, float32(math.Inf(-1)))
					x = append(x, up, down)
				}
			}
		}
		for range 2000 {
			x = append(x, float32(rng.NormFloat64()*float64(s)*40))
		}
		var m float32
		for i, v := range x {
			if math.IsInf(float64(v), 0) {
				x[i] = 0
			}
			m = max(m, float32(math.Abs(float64(x[i]))))
		}
		q := make([]byte, len(x))
		for _, bound := range []float32{m, math.MaxFloat32} {
			quantRow(q, x, s, bound, safetensors.F32)
			for i, v := range x {
				if want := toInt8(float32(v / s)); q[i] != want {
					t.Fatalf("scale %v, x %v: got %d, want %d", s, v, int8(q[i]), int8(want))
				}
			}
		}
	}
}

// TestRoundAwayRow checks Quantize's rounding against its definition,
// math.Round of the clamped float32 product, for the float32 values within
// 64 units in the last place of every half-integer and integer from -130 to
// 130 (with factor 1), and random values and factors.
func TestRoundAwayRow(t *testing.T) {
	want := func(v, factor float32) int8 {
		y := min(max(float32(v*factor), -128), 127)
		return int8(math.Round(float64(y)))
	}
	var x []float32
	for k := -260; k <= 260; k++ {
		c := float32(k) / 2
		up, down := c, c
		x = append(x, c)
		for range 64 {
			up = math.Nextafter32(up, 1000)
			down = math.Nextafter32(down, -1000)
			x = append(x, up, down)
		}
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for range 10000 {
		x = append(x, float32(rng.NormFloat64()*50))
	}
	factors := []float32{1, 0.5, 127}
	for range 100 {
		factors = append(factors, float32(math.Exp(rng.Float64()*6-3)))
	}
	q := make([]int8, len(x))
	for _, f := range factors {
		roundAwayRow(q, x, f)
		for i, v := range x {
			if w := want(v, f); q[i] != w {
				t.Fatalf("factor %v, x %v: got %d, want %d", f, v, q[i], w)
			}
		}
	}
}

// TestQuantizeParallel checks that a large x, split across goroutines,
// gives what its parts give one at a time, and names the first NaN.
func TestQuantizeParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	x := make([]float32, 1<<18)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	q, scale, err := Quantize(nil, x)
	require.NoError(t, err)
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	assert.Equal(t, m/127, scale)
	part := make([]int8, 1000)
	for lo := 0; lo < len(x); lo += len(part) {
		hi := min(lo+len(part), len(x))
		roundAwayRow(part, x[lo:hi], 127/m)
		require.Equal(t, part[:hi-lo], q[lo:hi])
	}
	x[200000], x[150000] = float32(math.NaN()), float32(math.Inf(-1))
	_, _, err = Quantize(q, x)
	require.ErrorIs(t, err, ErrNotFinite)
	assert.Contains(t, err.Error(), "element 150000 is -Inf")
}
