package check

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// The architectures corpus: the header and config.json of a tiny
// random-init checkpoint of every model type transformers 5.24 builds on
// CPU, made by testdata/architectures/generate.py.
const architecturesFile = "../testdata/architectures/architectures.jsonl.gz"

type architecture struct {
	Type    string          `json:"type"`
	Class   string          `json:"class"`
	Config  json.RawMessage `json:"config"`
	Tensors [][]any         `json:"tensors"`
}

// tensors returns the architecture's tensors, as corpusTensors makes them.
func (a architecture) tensors(t testing.TB) []safetensors.Tensor {
	return corpusTensors(t, a.Type, a.Tensors)
}

func loadArchitectures(t testing.TB) map[string]architecture {
	archs := map[string]architecture{}
	readLines(t, architecturesFile, func(line []byte) {
		var a architecture
		require.NoError(t, json.Unmarshal(line, &a))
		archs[a.Type] = a
	})
	require.Greater(t, len(archs), 450)
	return archs
}

// mapSource is a safetensors.TensorSource over tensors in memory.
type mapSource map[string]safetensors.Tensor

func (m mapSource) Names() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for n := range m {
			if !yield(n) {
				return
			}
		}
	})
}

func (m mapSource) TensorContext(_ context.Context, name string) (safetensors.Tensor, error) {
	t, ok := m[name]
	if !ok {
		return t, safetensors.ErrTensorNotFound
	}
	return t, nil
}

func runOn(t testing.TB, ts []safetensors.Tensor, cfg []byte) *Report {
	src := mapSource{}
	for _, x := range ts {
		src[x.Name] = x
	}
	var opts []Option
	if cfg != nil {
		opts = append(opts, Config(cfg))
	}
	r, err := Run(t.Context(), src, opts...)
	require.NoError(t, err)
	return r
}

func errorLines(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Severity == Error {
			out = append(out, f.String())
		}
	}
	return out
}

// newErrors returns the errors of r that clean, the report on the model
// before a defect was planted, lacks.
func newErrors(r, clean *Report) []string {
	old := map[string]bool{}
	for _, l := range errorLines(clean) {
		old[l] = true
	}
	var out []string
	for _, l := range errorLines(r) {
		if !old[l] {
			out = append(out, l)
		}
	}
	return out
}

func TestArchitecturesClean(t *testing.T) {
	archs := loadArchitectures(t)
	checked := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range archs {
			if !yield(n) {
				return
			}
		}
	}) {
		a := archs[name]
		r := runOn(t, a.tensors(t), a.Config)
		assert.Empty(t, errorLines(r), "%s (%s): a healthy model", name, a.Class)
		if len(r.Checked) > 0 {
			checked++
		}
	}
	// The general rule checks some key of nearly every configuration.
	assert.Greater(t, checked, len(archs)*9/10, "configurations checked")
}

// The causes of false alarms that the structure check once had, each
// with architectures that show it.
var causes = map[string][]string{
	"MoE layers beside dense-MLP layers":          {"deepseek_v3", "glm4_moe", "ernie4_5_moe", "jamba", "nllb-moe"},
	"hybrid stacks: SSM, linear attention, conv":  {"nemotron_h", "qwen3_next", "qwen3_5", "recurrent_gemma", "falcon_h1", "lfm3", "minimax"},
	"hierarchical stages numbered like blocks":    {"swin", "swinv2", "segformer", "pvt", "levit", "maskformer-swin"},
	"attention shaped by layer type":              {"gemma4", "embedding_gemma2", "sam"},
	"cross-attention in some layers":              {"mllama", "blip-2", "instructblip"},
	"tensors only in the first or last block":     {"t5", "mt5", "longt5", "switch_transformers", "udop", "wavlm", "modernbert", "gpt_neox_japanese", "fun_asr_nano_encoder"},
	"lists numbered like blocks that are not":     {"parakeet_ctc", "canary", "lw_detr", "encodec"},
	"infinities set on purpose at initialization": {"gemma4_audio"},
}

// mainBlocks returns the model's main stack and, for each of its blocks
// that has the same tensors as another block, the block's number, the
// middle ones first.
func mainBlocks(ts []safetensors.Tensor) (*stack, []int) {
	s := structure(infosOf(ts)).main()
	if s == nil {
		return nil, nil
	}
	sig := map[int]string{}
	count := map[string]int{}
	for i, b := range s.blocks {
		names := make([]string, 0, len(b))
		for suf := range b {
			names = append(names, suf)
		}
		sort.Strings(names)
		sig[i] = strings.Join(names, ",")
		count[sig[i]]++
	}
	var nums []int
	for i := range s.blocks {
		if count[sig[i]] > 1 {
			nums = append(nums, i)
		}
	}
	last := 0
	for i := range s.blocks {
		last = max(last, i)
	}
	slices.SortFunc(nums, func(a, b int) int {
		edge := func(i int) int {
			if i == 0 || i == last {
				return 1
			}
			return 0
		}
		if d := edge(a) - edge(b); d != 0 {
			return d
		}
		return a - b
	})
	return s, nums
}

// plant returns the defects planted in an architecture, each a name and
// the tensors and configuration with the defect: a tensor missing from a
// block that another block matches, a tensor of such a block transposed,
// a middle block missing, and the hidden size, layer count and vocabulary
// of the configuration (or of its text_config) doubled.
func plant(t testing.TB, a architecture) map[string]func() ([]safetensors.Tensor, []byte) {
	ts := a.tensors(t)
	out := map[string]func() ([]safetensors.Tensor, []byte){}
	main, nums := mainBlocks(ts)
	if len(nums) > 0 {
		block := main.block(nums[0]) + "."
		var in []int
		for i, x := range ts {
			if strings.HasPrefix(x.Name, block) {
				in = append(in, i)
			}
		}
		out["missing tensor "+ts[in[0]].Name] = func() ([]safetensors.Tensor, []byte) {
			return slices.Delete(slices.Clone(ts), in[0], in[0]+1), a.Config
		}
		for _, i := range in {
			if s := ts[i].Shape; len(s) == 2 && s[0] != s[1] {
				out["transposed "+ts[i].Name] = func() ([]safetensors.Tensor, []byte) {
					c := slices.Clone(ts)
					c[i].Shape = []uint64{s[1], s[0]}
					return c, a.Config
				}
				break
			}
		}
		out["missing block "+block] = func() ([]safetensors.Tensor, []byte) {
			return slices.DeleteFunc(slices.Clone(ts), func(x safetensors.Tensor) bool { return strings.HasPrefix(x.Name, block) }), a.Config
		}
	}
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(a.Config, &cfg))
	for _, key := range []string{"hidden_size", "num_hidden_layers", "vocab_size"} {
		target, path := cfg, key
		if _, ok := cfg[key]; !ok {
			if tc, ok := cfg["text_config"].(map[string]any); ok {
				target, path = tc, "text_config."+key
			}
		}
		v, ok := target[key].(float64)
		if !ok || v < 1 {
			continue
		}
		out["config "+path+" doubled"] = func() ([]safetensors.Tensor, []byte) {
			target[key] = 2 * v
			defer func() { target[key] = v }()
			data, err := json.Marshal(cfg)
			require.NoError(t, err)
			return ts, data
		}
	}
	return out
}

func TestArchitecturesCauses(t *testing.T) {
	archs := loadArchitectures(t)
	for cause, names := range causes {
		for _, name := range names {
			a, ok := archs[name]
			require.True(t, ok, "%s: %s is in the corpus", cause, name)
			clean := runOn(t, a.tensors(t), a.Config)
			assert.Empty(t, errorLines(clean), "%s: %s", cause, name)
			// A defect planted in it is still found.
			for what, make := range plant(t, a) {
				if !strings.HasPrefix(what, "missing tensor") && !strings.HasPrefix(what, "transposed") {
					continue
				}
				ts, cfg := make()
				assert.NotEmpty(t, newErrors(runOn(t, ts, cfg), clean), "%s: %s: %s", cause, name, what)
			}
		}
	}
	// The clipping bounds: only infinities, not reported, and said in a
	// note; one infinity among finite values still an error, and NaN.
	a := archs["gemma4_audio"]
	ts := a.tensors(t)
	clean := runOn(t, ts, a.Config)
	require.NotEmpty(t, clean.Notes)
	assert.Contains(t, strings.Join(clean.Notes, "\n"), "bounds")
	for i, x := range ts {
		if strings.HasSuffix(x.Name, "input_max") {
			for _, c := range []struct {
				v    float32
				kind string
			}{{1, KindInf}, {float32(math.NaN()), KindNaN}} {
				p := slices.Clone(ts)
				p[i], _ = safetensors.TensorFromFloat32s(x.Name, safetensors.F32, []uint64{2}, []float32{float32(math.Inf(1)), c.v}, safetensors.RoundNearestEven)
				fs := find(runOn(t, p, a.Config), c.kind, x.Name)
				require.Len(t, fs, 1, "%s: %v", x.Name, c.v)
				assert.Equal(t, Error, fs[0].Severity)
			}
			break
		}
	}
}

// TestArchitecturesDetection plants each defect in every architecture
// that can hold it and requires it found, as an error that the healthy
// model's report lacks, in at least the share of architectures measured
// when the rule was made.
func TestArchitecturesDetection(t *testing.T) {
	archs := loadArchitectures(t)
	found, total := map[string]int{}, map[string]int{}
	var missed []string
	for name, a := range archs {
		clean := runOn(t, a.tensors(t), a.Config)
		for what, make := range plant(t, a) {
			words := strings.Fields(what)
			kind := words[0]
			switch kind {
			case "missing":
				kind += " " + words[1]
			case "config":
				kind += " " + strings.TrimPrefix(words[1], "text_config.")
			}
			total[kind]++
			ts, cfg := make()
			if len(newErrors(runOn(t, ts, cfg), clean)) > 0 {
				found[kind]++
			} else {
				missed = append(missed, name+": "+what)
			}
		}
	}
	min := map[string]float64{
		"missing tensor": 0.98, "transposed": 0.98, "missing block": 0.97,
		"config hidden_size": 0.95, "config num_hidden_layers": 0.97, "config vocab_size": 0.95,
	}
	for kind, share := range min {
		require.NotZero(t, total[kind], kind)
		got := float64(found[kind]) / float64(total[kind])
		t.Logf("%-26s %d of %d", kind, found[kind], total[kind])
		assert.GreaterOrEqual(t, got, share, "%s: %d of %d found", kind, found[kind], total[kind])
	}
	sort.Strings(missed)
	if testing.Verbose() {
		for _, m := range missed {
			t.Log("missed: " + m)
		}
	}
}
