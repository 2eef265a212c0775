package check

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// countKeys returns the keys of a record's files that count something
// the weights show (layers, blocks, ranks, classes, virtual tokens), as
// checkLibraries names them.
func countKeys(files map[string]map[string]any) []string {
	var out []string
	if c := files["config.json"]; c != nil {
		if _, ok := c["_class_name"]; ok {
			for k, v := range c {
				if _, ok := positive(v); ok && isDiffusersLayerKey(k) || k == "layers_per_block" || k == "transformer_layers_per_block" {
					out = append(out, k)
				}
			}
		}
		if _, ok := c["architecture"]; ok {
			if _, ok := positive(c["num_classes"]); ok {
				out = append(out, "num_classes")
			}
		}
	}
	if a := files["adapter_config.json"]; a != nil {
		for _, k := range []string{"r", "init_r", "num_virtual_tokens"} {
			if _, ok := positive(a[k]); ok {
				out = append(out, "adapter_config.json:"+k)
			}
		}
	}
	if o := files["open_clip_config.json"]; o != nil {
		mc, _ := o["model_cfg"].(map[string]any)
		for _, tower := range []string{"vision_cfg", "text_cfg"} {
			if c, ok := mc[tower].(map[string]any); ok {
				if _, ok := positive(c["layers"]); ok {
					out = append(out, "open_clip_config.json:model_cfg."+tower+".layers")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// doubled returns a copy of files with the value of key doubled (each
// entry of a list).
func doubled(files map[string]map[string]any, key string) map[string]map[string]any {
	file, k, ok := strings.Cut(key, ":")
	if !ok {
		file, k = "config.json", key
	}
	out := maps.Clone(files)
	var dup func(m map[string]any, path []string) map[string]any
	dup = func(m map[string]any, path []string) map[string]any {
		m = maps.Clone(m)
		if len(path) > 1 {
			sub, _ := m[path[0]].(map[string]any)
			m[path[0]] = dup(sub, path[1:])
			return m
		}
		switch v := m[path[0]].(type) {
		case float64:
			m[path[0]] = 2 * v
		case []any:
			l := slices.Clone(v)
			for i, x := range l {
				if f, ok := x.(float64); ok {
					l[i] = 2 * f
				}
			}
			m[path[0]] = l
		}
		return m
	}
	out[file] = dup(files[file], strings.Split(k, "."))
	return out
}

// TestLibrariesCorpus runs checkLibraries on every part of the corpus of
// models saved by diffusers, timm, peft, sentence-transformers and
// open_clip: no healthy model gets an error, and a count (layers, blocks,
// ranks, classes) doubled in the configuration gets one that names its
// key, for most models.
func TestLibrariesCorpus(t *testing.T) {
	if _, err := os.Stat(librariesPath()); err != nil {
		t.Skip("no libraries corpus")
	}
	parts := loadLibraries(t)
	type ratio struct {
		hit, n int
		missed []string
	}
	ratios := map[string]*ratio{}
	checkedBy := map[string]map[string]bool{}
	for _, p := range parts {
		files := p.files(t)
		infos := infosOf(p.tensors(t))
		st := structure(infos)
		checked, fs := checkLibraries(files, infos, st)
		if checkedBy[p.Library] == nil {
			checkedBy[p.Library] = map[string]bool{}
		}
		for _, k := range checked {
			checkedBy[p.Library][k] = true
		}
		for _, f := range fs {
			if f.Severity == Error {
				t.Errorf("%s: healthy, but %v", p, f)
			}
		}
		for _, key := range countKeys(files) {
			name := p.Library + " " + key
			if ratios[name] == nil {
				ratios[name] = &ratio{}
			}
			ratios[name].n++
			_, fs := checkLibraries(doubled(files, key), infos, st)
			hit := false
			for _, f := range fs {
				hit = hit || f.Severity == Error && f.Key == key
			}
			if hit {
				ratios[name].hit++
			} else {
				ratios[name].missed = append(ratios[name].missed, p.String())
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ratios)) {
		r := ratios[name]
		t.Logf("doubled %s: detected in %d of %d; missed: %s", name, r.hit, r.n, strings.Join(r.missed, " "))
	}
	for _, lib := range slices.Sorted(maps.Keys(checkedBy)) {
		t.Logf("%s: keys checked: %s", lib, strings.Join(slices.Sorted(maps.Keys(checkedBy[lib])), ", "))
	}
	t.Logf("%d records", len(parts))
	if librariesPath() != librariesFile {
		return
	}
	// The shares measured when the rules were made.
	for name, share := range map[string]float64{
		"diffusers num_layers": 0.93, "diffusers num_single_layers": 1, "timm num_classes": 1,
		"peft adapter_config.json:num_virtual_tokens": 1, "open_clip open_clip_config.json:model_cfg.vision_cfg.layers": 1,
	} {
		r := ratios[name]
		require.NotNil(t, r, name)
		assert.GreaterOrEqual(t, float64(r.hit)/float64(r.n), share, "%s: %d of %d", name, r.hit, r.n)
	}
}

// tensors builds infos from "name d0 d1 ..." lines.
func tensors(lines ...string) []info {
	var out []info
	for _, l := range lines {
		f := strings.Fields(l)
		var shape []uint64
		for _, d := range f[1:] {
			var n uint64
			for _, c := range d {
				n = n*10 + uint64(c-'0')
			}
			shape = append(shape, n)
		}
		out = append(out, info{Name: f[0], DType: safetensors.F32, Shape: shape})
	}
	return out
}

// parse parses a configuration written in JSON.
func parse(t *testing.T, s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// flux is a FluxTransformer2DModel of 2 double and 3 single blocks, as
// diffusers saves it (the tensors each block has, abridged).
func flux() []info {
	var lines []string
	lines = append(lines, "x_embedder.weight 32 16", "context_embedder.weight 32 32", "proj_out.weight 16 32")
	for i := range 2 {
		p := fmt.Sprintf("transformer_blocks.%d.", i)
		lines = append(lines, p+"attn.to_q.weight 32 32", p+"attn.to_k.weight 32 32", p+"ff.net.0.proj.weight 128 32", p+"ff.net.2.weight 32 128", p+"norm1.linear.weight 192 32")
	}
	for i := range 3 {
		p := fmt.Sprintf("single_transformer_blocks.%d.", i)
		lines = append(lines, p+"attn.to_q.weight 32 32", p+"attn.to_k.weight 32 32", p+"proj_mlp.weight 128 32", p+"proj_out.weight 32 160", p+"norm.linear.weight 96 32")
	}
	return tensors(lines...)
}

// unet is a UNet2DConditionModel of block_out_channels [32, 64],
// layers_per_block 2, a cross-attention down block and a plain one.
func unet() []info {
	var lines []string
	lines = append(lines, "conv_in.weight 32 4 3 3", "conv_out.weight 4 32 3 3")
	widths := []int{32, 64}
	for i, w := range widths {
		for j := range 2 {
			p := fmt.Sprintf("down_blocks.%d.resnets.%d.", i, j)
			lines = append(lines, p+fmt.Sprintf("conv1.weight %d %d 3 3", w, w), p+fmt.Sprintf("conv2.weight %d %d 3 3", w, w), p+fmt.Sprintf("norm1.weight %d", w))
		}
		up := fmt.Sprintf("up_blocks.%d.resnets.", len(widths)-1-i)
		for j := range 3 {
			lines = append(lines, up+fmt.Sprintf("%d.conv1.weight %d %d 3 3", j, w, 2*w), up+fmt.Sprintf("%d.conv2.weight %d %d 3 3", j, w, w), up+fmt.Sprintf("%d.norm1.weight %d", j, 2*w))
		}
	}
	p := "down_blocks.0.attentions.%d.transformer_blocks.0."
	for j := range 2 {
		q := fmt.Sprintf(p, j)
		lines = append(lines, q+"attn1.to_q.weight 32 32", q+"attn2.to_q.weight 32 32", q+"attn2.to_k.weight 32 24", q+"norm1.weight 32",
			fmt.Sprintf("down_blocks.0.attentions.%d.proj_in.weight 32 32 1 1", j))
	}
	return tensors(lines...)
}

// TestCheckLibraries checks each library's rules on small models written
// by hand from the shapes their libraries save: healthy, and with one
// key changed.
func TestCheckLibraries(t *testing.T) {
	lora := func() []info {
		var lines []string
		for i := range 2 {
			p := fmt.Sprintf("base_model.model.model.layers.%d.self_attn.", i)
			lines = append(lines, p+"q_proj.lora_A.weight 4 32", p+"q_proj.lora_B.weight 32 4", p+"v_proj.lora_A.weight 4 32", p+"v_proj.lora_B.weight 16 4")
		}
		return tensors(lines...)
	}
	timm := tensors("conv1.weight 64 3 7 7", "bn1.weight 64", "layer1.0.conv1.weight 64 64 3 3", "layer1.0.bn1.weight 64",
		"layer4.0.conv1.weight 512 256 3 3", "layer4.0.bn1.weight 512", "fc.weight 1000 512", "fc.bias 1000")
	openCLIP := tensors("positional_embedding 77 32", "token_embedding.weight 1000 32", "text_projection 32 16", "ln_final.weight 32",
		"transformer.resblocks.0.attn.in_proj_weight 96 32", "transformer.resblocks.1.attn.in_proj_weight 96 32",
		"visual.class_embedding 48", "visual.proj 48 16", "visual.ln_post.weight 48", "visual.conv1.weight 48 3 16 16",
		"visual.transformer.resblocks.0.attn.in_proj_weight 144 48")
	const fluxCfg = `{"_class_name": "FluxTransformer2DModel", "num_layers": %d, "num_single_layers": %d, "num_attention_heads": 2, "attention_head_dim": 16, "in_channels": %d, "patch_size": 1, "joint_attention_dim": 32}`
	const unetCfg = `{"_class_name": "UNet2DConditionModel", "layers_per_block": %d, "block_out_channels": [32, 64], "in_channels": 4, "cross_attention_dim": %d, "transformer_layers_per_block": 1}`
	const loraCfg = `{"peft_type": "LORA", "r": %d, "target_modules": %s, "rank_pattern": %s}`
	cases := []struct {
		name   string
		file   string
		config string
		infos  []info
		key    string   // the key of the error wanted, "" for none
		warn   string   // the key of a warning wanted
		check  []string // keys that must be checked
	}{
		{"flux", "config.json", fmt.Sprintf(fluxCfg, 2, 3, 16), flux(), "", "", []string{"num_layers", "num_single_layers", "num_attention_heads", "in_channels", "joint_attention_dim"}},
		{"flux num_layers doubled", "config.json", fmt.Sprintf(fluxCfg, 4, 3, 16), flux(), "num_layers", "", nil},
		{"flux num_single_layers doubled", "config.json", fmt.Sprintf(fluxCfg, 2, 6, 16), flux(), "num_single_layers", "", nil},
		{"flux in_channels doubled", "config.json", fmt.Sprintf(fluxCfg, 2, 3, 64), flux(), "in_channels", "", nil},
		{"unet", "config.json", fmt.Sprintf(unetCfg, 2, 24), unet(), "", "", []string{"layers_per_block", "block_out_channels", "cross_attention_dim", "transformer_layers_per_block", "in_channels"}},
		{"unet layers_per_block doubled", "config.json", fmt.Sprintf(unetCfg, 4, 24), unet(), "layers_per_block", "", nil},
		{"unet cross_attention_dim", "config.json", fmt.Sprintf(unetCfg, 2, 32), unet(), "cross_attention_dim", "", nil},
		{"timm", "config.json", `{"architecture": "resnet18", "num_classes": 1000, "num_features": 512, "pretrained_cfg": {"classifier": "fc"}}`, timm, "", "", []string{"num_classes", "num_features"}},
		{"timm num_classes", "config.json", `{"architecture": "resnet18", "num_classes": 10, "num_features": 512, "pretrained_cfg": {"classifier": "fc"}}`, timm, "num_classes", "", nil},
		{"timm num_features", "config.json", `{"architecture": "resnet18", "num_classes": 1000, "num_features": 1024, "pretrained_cfg": {"classifier": "fc"}}`, timm, "num_features", "", nil},
		{"timm without head", "config.json", `{"architecture": "resnet18", "num_classes": 0, "num_features": 512, "pretrained_cfg": {"classifier": "fc"}}`, timm[:len(timm)-2], "", "", []string{"num_features"}},
		{"transformers config left to checkSizes", "config.json", `{"model_type": "llama", "num_hidden_layers": 9}`, flux(), "", "", nil},
		{"lora", "adapter_config.json", fmt.Sprintf(loraCfg, 4, `["q_proj", "v_proj"]`, `{}`), lora(), "", "", []string{"adapter_config.json:r", "adapter_config.json:target_modules"}},
		{"lora r doubled", "adapter_config.json", fmt.Sprintf(loraCfg, 8, `["q_proj", "v_proj"]`, `{}`), lora(), "adapter_config.json:r", "", nil},
		{"lora rank_pattern", "adapter_config.json", fmt.Sprintf(loraCfg, 8, `["q_proj", "v_proj"]`, `{"q_proj": 4, "v_proj": 4}`), lora(), "", "", []string{"adapter_config.json:rank_pattern"}},
		{"lora rank_pattern wrong", "adapter_config.json", fmt.Sprintf(loraCfg, 4, `["q_proj", "v_proj"]`, `{"v_proj": 2}`), lora(), "adapter_config.json:rank_pattern", "", nil},
		{"lora module not targeted", "adapter_config.json", fmt.Sprintf(loraCfg, 4, `["q_proj"]`, `{}`), lora(), "adapter_config.json:target_modules", "", nil},
		{"lora regex targets", "adapter_config.json", fmt.Sprintf(loraCfg, 4, `".*\\.(q|v)_proj"`, `{}`), lora(), "", "", []string{"adapter_config.json:target_modules"}},
		{"lora target absent", "adapter_config.json", fmt.Sprintf(loraCfg, 4, `["q_proj", "v_proj", "k_proj"]`, `{}`), lora(), "", "adapter_config.json:target_modules", nil},
		{"prompt tuning", "adapter_config.json", `{"peft_type": "PROMPT_TUNING", "num_virtual_tokens": 4, "token_dim": 32, "num_layers": 2, "num_transformer_submodules": 1}`, tensors("prompt_embeddings 4 32"), "", "", []string{"adapter_config.json:num_virtual_tokens", "adapter_config.json:token_dim"}},
		{"prefix tuning", "adapter_config.json", `{"peft_type": "PREFIX_TUNING", "num_virtual_tokens": 4, "token_dim": 16, "num_layers": 2}`, tensors("prompt_embeddings 4 64"), "", "", nil},
		{"prompt tuning tokens", "adapter_config.json", `{"peft_type": "PROMPT_TUNING", "num_virtual_tokens": 8, "token_dim": 32, "num_layers": 2}`, tensors("prompt_embeddings 4 32"), "adapter_config.json:num_virtual_tokens", "", nil},
		{"dense", "config.json", `{"in_features": 32, "out_features": 16, "bias": true}`, tensors("linear.weight 16 32", "linear.bias 16"), "", "", []string{"in_features", "out_features"}},
		{"dense out_features", "config.json", `{"in_features": 32, "out_features": 8, "bias": true}`, tensors("linear.weight 16 32", "linear.bias 16"), "out_features", "", nil},
		{"open_clip", "open_clip_config.json", `{"model_cfg": {"embed_dim": 16, "vision_cfg": {"layers": 1, "width": 48}, "text_cfg": {"layers": 2, "width": 32, "vocab_size": 1000, "context_length": 77}}}`, openCLIP, "", "",
			[]string{"open_clip_config.json:model_cfg.embed_dim", "open_clip_config.json:model_cfg.text_cfg.layers", "open_clip_config.json:model_cfg.vision_cfg.width", "open_clip_config.json:model_cfg.text_cfg.context_length"}},
		{"open_clip text layers", "open_clip_config.json", `{"model_cfg": {"embed_dim": 16, "text_cfg": {"layers": 4, "width": 32}}}`, openCLIP, "open_clip_config.json:model_cfg.text_cfg.layers", "", nil},
		{"open_clip embed_dim", "open_clip_config.json", `{"model_cfg": {"embed_dim": 32}}`, openCLIP, "open_clip_config.json:model_cfg.embed_dim", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]map[string]any{c.file: parse(t, c.config)}
			checked, fs := checkLibraries(files, c.infos, structure(c.infos))
			for _, k := range c.check {
				if !slices.Contains(checked, k) {
					t.Errorf("%s not checked; checked: %v", k, checked)
				}
			}
			var errs, warns []Finding
			for _, f := range fs {
				if f.Kind != KindConfig {
					t.Errorf("finding of kind %s: %v", f.Kind, f)
				}
				if f.Severity == Error {
					errs = append(errs, f)
				} else {
					warns = append(warns, f)
				}
			}
			switch {
			case c.key == "" && len(errs) > 0:
				t.Errorf("errors: %v", errs)
			case c.key != "" && (len(errs) != 1 || errs[0].Key != c.key):
				t.Errorf("errors: %v; want one of key %s", errs, c.key)
			case c.key != "" && !strings.HasPrefix(errs[0].Message, c.key[strings.IndexByte(c.key, ':')+1:]) && !strings.Contains(errs[0].Message, "target_modules"):
				t.Errorf("message %q does not lead with the key", errs[0].Message)
			}
			if c.warn != "" && (len(warns) != 1 || warns[0].Key != c.warn) {
				t.Errorf("warnings: %v; want one of key %s", warns, c.warn)
			}
			if c.key != "" && !slices.Contains(checked, c.key) {
				t.Errorf("%s has an error but is not in checked %v", c.key, checked)
			}
		})
	}
}
