package check

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// The libraries corpus: the header and configuration files of each part
// of tiny random-init models that diffusers, timm, peft,
// sentence-transformers and open_clip save, made by
// testdata/libraries/generate.py.
const librariesFile = "../testdata/libraries/libraries.jsonl.gz"

type libraryPart struct {
	Library string                     `json:"library"`
	Model   string                     `json:"model"`
	Part    string                     `json:"part"`
	Class   string                     `json:"class"`
	Files   map[string]json.RawMessage `json:"files"`
	Tensors [][]any                    `json:"tensors"`
}

func (p libraryPart) String() string {
	if p.Part == "" {
		return p.Model
	}
	return p.Model + "/" + p.Part
}

// tensors returns the part's tensors, as corpusTensors makes them.
func (p libraryPart) tensors(t testing.TB) []safetensors.Tensor {
	return corpusTensors(t, p.String(), p.Tensors)
}

// files returns the part's configuration files, parsed.
func (p libraryPart) files(t testing.TB) map[string]map[string]any {
	out := map[string]map[string]any{}
	for name, data := range p.Files {
		var m map[string]any
		if json.Unmarshal(data, &m) == nil && m != nil {
			out[name] = m
		}
	}
	return out
}

// settings returns the settings that Model would give the part: its
// config.json and its other configuration files.
func (p libraryPart) settings() *settings {
	c := &settings{maxAbs: DefaultMaxAbs, files: map[string][]byte{}}
	for name, data := range p.Files {
		switch {
		case name == "config.json":
			c.config, c.hasConfig = data, true
		case slices.Contains(libraryFiles, name):
			c.files[name] = data
		}
	}
	return c
}

// librariesPath is the corpus the tests read: librariesFile, or another
// made the same way, named by $CHECK_LIBRARIES (generate.py --heldout
// makes one of other sizes and seeds).
func librariesPath() string {
	if p := os.Getenv("CHECK_LIBRARIES"); p != "" {
		return p
	}
	return librariesFile
}

func loadLibraries(t testing.TB) []libraryPart {
	var parts []libraryPart
	readLines(t, librariesPath(), func(line []byte) {
		var p libraryPart
		require.NoError(t, json.Unmarshal(line, &p))
		if len(p.Tensors) > 0 {
			parts = append(parts, p)
		}
	})
	return parts
}

func runPart(t testing.TB, p libraryPart, ts []safetensors.Tensor) *Report {
	src := mapSource{}
	for _, x := range ts {
		src[x.Name] = x
	}
	r, err := run(t.Context(), src, p.settings())
	require.NoError(t, err)
	return r
}

var numberedSegment = regexp.MustCompile(`\.(\d+)\.`)

// libraryStacks returns the numbered stacks of a model as the names alone
// show them, independently of the package's rules: every prefix followed
// by a number, with 3 or more entries numbered 0, 1, 2, ..., each with
// the numbers of its entries.
func libraryStacks(ts []safetensors.Tensor) map[string][]int {
	entries := map[string]map[int]bool{}
	for _, t := range ts {
		for _, m := range numberedSegment.FindAllStringSubmatchIndex(t.Name, -1) {
			prefix := t.Name[:m[0]]
			n, _ := strconv.Atoi(t.Name[m[2]:m[3]])
			if entries[prefix] == nil {
				entries[prefix] = map[int]bool{}
			}
			entries[prefix][n] = true
		}
	}
	out := map[string][]int{}
	for p, e := range entries {
		nums := make([]int, 0, len(e))
		for n := range e {
			nums = append(nums, n)
		}
		sort.Ints(nums)
		if len(nums) >= 3 && nums[0] == 0 && nums[len(nums)-1] == len(nums)-1 {
			out[p] = nums
		}
	}
	return out
}

// plantLibrary returns the defects planted in the middle block of the
// numbered stacks of a part, the one with the most entries and, with
// every, each: each of 2 of its tensors missing (6 with every), each of 2
// of its 2-D tensors transposed (6), the block missing. Each comes with the name
// an error must hold to find it.
func plantLibrary(ts []safetensors.Tensor, every bool) map[string]func() ([]safetensors.Tensor, string) {
	out := map[string]func() ([]safetensors.Tensor, string){}
	stacks := libraryStacks(ts)
	if !every {
		best := ""
		for p, nums := range stacks {
			if b := stacks[best]; best == "" || len(nums) > len(b) || len(nums) == len(b) && (len(p) < len(best) || len(p) == len(best) && p < best) {
				best = p
			}
		}
		stacks = map[string][]int{best: stacks[best]}
		if best == "" {
			return out
		}
	}
	for prefix, nums := range stacks {
		block := fmt.Sprintf("%s.%d", prefix, nums[len(nums)/2])
		var in []int
		for i, x := range ts {
			if strings.HasPrefix(x.Name, block+".") {
				in = append(in, i)
			}
		}
		samples := 2
		if every {
			samples = 6
		}
		step := max(1, len(in)/samples)
		for k := 0; k < len(in); k += step {
			i := in[k]
			out["missing tensor "+ts[i].Name] = func() ([]safetensors.Tensor, string) {
				return slices.Delete(slices.Clone(ts), i, i+1), ts[i].Name
			}
		}
		var mats []int
		for _, i := range in {
			if s := ts[i].Shape; len(s) == 2 && s[0] != s[1] {
				mats = append(mats, i)
			}
		}
		step = max(1, len(mats)/samples)
		for k := 0; k < len(mats); k += step {
			i := mats[k]
			out["transposed "+ts[i].Name] = func() ([]safetensors.Tensor, string) {
				c := slices.Clone(ts)
				c[i].Shape = []uint64{ts[i].Shape[1], ts[i].Shape[0]}
				return c, ts[i].Name
			}
		}
		out["missing block "+block] = func() ([]safetensors.Tensor, string) {
			return slices.DeleteFunc(slices.Clone(ts), func(x safetensors.Tensor) bool { return strings.HasPrefix(x.Name, block+".") }), block
		}
	}
	return out
}

// namedErrors returns the errors of r that clean lacks and that name
// what: the tensor or block, or a block that holds it.
func namedErrors(r, clean *Report, what string) []string {
	var out []string
	for _, l := range newErrors(r, clean) {
		if strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	for _, f := range r.Findings {
		if f.Severity == Error && f.Block != "" && strings.HasPrefix(what, f.Block+".") && !slices.Contains(errorLines(clean), f.String()) {
			out = append(out, f.String())
		}
	}
	return out
}

// TestLibrariesClean checks every part of every model of the corpus,
// healthy: no error, and no warning of a tensor all zeros, each being so
// by design at initialization.
func TestLibrariesClean(t *testing.T) {
	if _, err := os.Stat(librariesPath()); err != nil {
		t.Skip("no libraries corpus")
	}
	zeros := 0
	for _, p := range loadLibraries(t) {
		r := runPart(t, p, p.tensors(t))
		assert.Empty(t, errorLines(r), "%s (%s): a healthy model", p, p.Class)
		for _, f := range r.Findings {
			if f.Kind == KindZero {
				zeros++
				if testing.Verbose() {
					t.Logf("%s: %s", p, f)
				}
			}
		}
	}
	// Every tensor all zeros in these random-init models is so by design.
	assert.Zero(t, zeros, "warnings of tensors all zeros")
}

// TestLibrariesDetection plants defects in the middle block of the
// largest numbered stack of every model of the corpus (of every stack
// with -tags slow) and requires each found, as an error naming the tensor
// or block, in the share measured when the rules were made.
func TestLibrariesDetection(t *testing.T) {
	if _, err := os.Stat(librariesPath()); err != nil {
		t.Skip("no libraries corpus")
	}
	if testing.Short() {
		t.Skip("a measurement over the corpus: run without -short")
	}
	found, total := map[string]int{}, map[string]int{}
	var missed []string
	for _, p := range loadLibraries(t) {
		ts := p.tensors(t)
		clean := runPart(t, p, ts)
		for what, make := range plantLibrary(ts, slowTests) {
			words := strings.Fields(what)
			kind := p.Library + ": " + words[0]
			if words[0] == "missing" {
				kind += " " + words[1]
			}
			total[kind]++
			planted, name := make()
			if len(namedErrors(runPart(t, p, planted), clean, name)) > 0 {
				found[kind]++
			} else {
				missed = append(missed, p.String()+": "+what)
			}
		}
	}
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range total {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Logf("%-40s %d of %d", kind, found[kind], total[kind])
	}
	if testing.Verbose() {
		sort.Strings(missed)
		for _, m := range missed {
			t.Log("missed: " + m)
		}
	}
	if slowTests || librariesPath() != librariesFile {
		return
	}
	min := map[string]float64{
		"diffusers: missing tensor": 0.95, "diffusers: transposed": 0.9, "diffusers: missing block": 0.88,
		"timm: missing tensor": 0.95, "timm: transposed": 0.95, "timm: missing block": 0.9,
	}
	for kind, share := range min {
		require.NotZero(t, total[kind], kind)
		assert.GreaterOrEqual(t, float64(found[kind])/float64(total[kind]), share, "%s: %d of %d found", kind, found[kind], total[kind])
	}
}

// The causes of the false alarms and misses that the structure check once
// had on other libraries' models, each with models that show it: healthy,
// they give no error; with the defect, an error names it.
var libraryCauses = []struct {
	cause  string
	model  string
	defect string // "block X": X removed; "tensor X": X removed; "transposed X"; "" healthy only
	want   string // what an error must name, if not X
}{
	{"nn.Sequential of unlike layers, convolutions without bias", "diffusers/AutoencoderTiny", "block decoder.layers.3", ""},
	{"branches of different widths in one list", "timm/crossvit_tiny_240", "", ""},
	{"a stage's first block with its own shortcut", "timm/maxvit_nano_rw_256", "tensor stages.1.blocks.1.conv.conv2_kxk.weight", ""},
	{"a stage's first block with its own shortcut", "timm/resnetv2_18", "", ""},
	{"a stage's first block mixing other kernel sizes", "timm/mixnet_s", "tensor blocks.3.1.conv_pwl.1.weight", ""},
	{"a middle block between a stage's unlike first block and the next", "timm/mobilenetv3_small_100", "block blocks.2.1", ""},
	{"a middle block between a stage's unlike first block and the next", "timm/semnasnet_100", "block blocks.3.1", ""},
	{"a middle block between a stage's unlike first block and the next", "timm/hgnetv2_b0", "tensor stages.2.blocks.1.layers.1.conv1.conv.weight", ""},
	{"a whole stage between stages of other widths", "timm/efficientnet_b0", "block blocks.3", ""},
	{"a whole stage between stages of other widths", "timm/tinynet_e", "block blocks.3", ""},
	{"a whole stage between stages of other widths", "timm/ghostnet_100", "block blocks.4", ""},
	{"a whole stage between stages of other widths", "timm/hardcorenas_a", "block blocks.3", ""},
	{"stacks under other names than transformers': the last block, against num_layers", "diffusers/FluxTransformer2DModel", "block transformer_blocks.1", "num_layers = 2, but transformer_blocks has 1 blocks"},
	{"stacks under other names than transformers'", "diffusers/FluxTransformer2DModel", "tensor single_transformer_blocks.1.proj_mlp.weight", ""},
	{"stacks nested in stages", "pipe/StableDiffusionPipeline/unet", "tensor down_blocks.1.resnets.1.conv1.weight", ""},
	{"ResNet's layer1 to layer4", "timm/resnet18", "tensor layer2.1.conv1.weight", ""},
}

func TestLibrariesCauses(t *testing.T) {
	parts := map[string]libraryPart{}
	for _, p := range loadLibraries(t) {
		parts[p.String()] = p
	}
	for _, c := range libraryCauses {
		p, ok := parts[c.model]
		require.True(t, ok, "%s: %s is in the corpus", c.cause, c.model)
		ts := p.tensors(t)
		clean := runPart(t, p, ts)
		assert.Empty(t, errorLines(clean), "%s: %s", c.cause, c.model)
		if c.defect == "" {
			continue
		}
		what, name, _ := strings.Cut(c.defect, " ")
		planted := slices.Clone(ts)
		switch what {
		case "block":
			planted = slices.DeleteFunc(planted, func(x safetensors.Tensor) bool { return strings.HasPrefix(x.Name, name+".") })
		case "tensor":
			planted = slices.DeleteFunc(planted, func(x safetensors.Tensor) bool { return x.Name == name })
		case "transposed":
			for i, x := range planted {
				if x.Name == name {
					planted[i].Shape = []uint64{x.Shape[1], x.Shape[0]}
					ts = nil // planted
				}
			}
		}
		require.NotEqual(t, len(ts), len(planted), "%s: %s: %s is in the model", c.cause, c.model, name)
		ts = planted
		if c.want != "" {
			name = c.want
		}
		assert.NotEmpty(t, namedErrors(runPart(t, p, ts), clean, name), "%s: %s: %s", c.cause, c.model, c.defect)
	}
}

// TestQuietStructure checks models whose healthy structure once drew
// warnings: T5's relative attention bias in the first of many blocks, and
// RegNet's conv1 to conv3 (a grouped convolution between two 1×1).
func TestQuietStructure(t *testing.T) {
	archs := loadArchitectures(t)
	parts := map[string]libraryPart{}
	for _, p := range loadLibraries(t) {
		parts[p.String()] = p
	}
	reports := map[string]*Report{}
	for _, name := range []string{"t5", "mt5", "longt5"} {
		a, ok := archs[name]
		require.True(t, ok, name)
		reports[name] = runOn(t, a.tensors(t), a.Config)
	}
	for _, name := range []string{"timm/regnetx_002", "timm/regnety_004"} {
		p, ok := parts[name]
		require.True(t, ok, name)
		reports[name] = runPart(t, p, p.tensors(t))
	}
	for name, r := range reports {
		assert.Empty(t, find(r, KindStructure, ""), name)
		for _, f := range r.Findings {
			assert.NotEqual(t, KindStructure, f.Kind, "%s: %s", name, f)
		}
	}
}
