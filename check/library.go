package check

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// libraryFiles are the configuration files other than config.json that
// the libraries write beside a model's weights, which Model and
// Checkpoint read and check: peft's adapter_config.json, open_clip's
// open_clip_config.json, sentence-transformers' sentence_bert_config.json.
var libraryFiles = []string{"adapter_config.json", "open_clip_config.json", "sentence_bert_config.json"}

// checkLibraries checks the configuration files of the libraries other
// than transformers against the weights: files holds each file present
// by name, config.json included. It returns the keys checked, each
// written "file:key" for a file other than config.json, and the findings.
// A transformers config.json (one with a model_type) is left to
// checkConfig and checkSizes; a key whose role the weights do not show is
// not checked.
func checkLibraries(files map[string]map[string]any, infos []info, st structureResult) (checked []string, out []Finding) {
	byName := make(map[string]info, len(infos))
	for _, t := range infos {
		byName[t.Name] = t
	}
	l := &libCheck{infos: infos, byName: byName, st: st}
	if cfg := files["config.json"]; cfg != nil {
		_, isTransformers := cfg["model_type"]
		_, diffusers := cfg["_class_name"].(string)
		_, arch := cfg["architecture"].(string)
		_, nc := cfg["num_classes"]
		_, nf := cfg["num_features"]
		switch {
		case diffusers:
			l.diffusers(cfg)
		case arch && (nc || nf) && !isTransformers:
			l.timm(cfg)
		case !isTransformers:
			l.dense(cfg)
		}
	}
	if a := files["adapter_config.json"]; a != nil {
		if _, ok := a["peft_type"].(string); ok {
			l.file = "adapter_config.json:"
			l.peft(a)
		}
	}
	if o := files["open_clip_config.json"]; o != nil {
		l.file = "open_clip_config.json:"
		l.openCLIP(o)
	}
	return l.checked, l.out
}

// libCheck gathers the keys checked and the findings of checkLibraries.
type libCheck struct {
	infos   []info
	byName  map[string]info
	st      structureResult
	file    string // the prefix of the keys: "" for config.json, "adapter_config.json:"
	checked []string
	out     []Finding
}

// judge records key as checked and, where the weights contradict it, a
// finding of severity sev whose message is the diagnosis.
func (l *libCheck) judge(key string, ok bool, sev Severity, tensor, format string, args ...any) {
	l.checked = append(l.checked, l.file+key)
	if !ok {
		l.out = append(l.out, Finding{Severity: sev, Kind: KindConfig, Key: l.file + key, Tensor: tensor, Message: fmt.Sprintf(format, args...)})
	}
}

// topStacks returns the stacks of blocks that are not inside another
// numbered entry ("transformer_blocks", "encoder.down_blocks"), nor an
// nn.Sequential of layers and blocks (a feed-forward's net.0, net.2), nor
// numbered in their names (attn1).
func (l *libCheck) topStacks() []*stack {
	var out []*stack
	for _, s := range l.st.stacks {
		if !s.nested && !s.modules && !s.mixed && !s.named {
			out = append(out, s)
		}
	}
	return out
}

// lookalike reports whether a module outside every stack holds the
// tensors of a block of one of stacks, half of them or more: a block of
// the model's layers that no stack numbers (UniDiffuser's mid block).
func (l *libCheck) lookalike(stacks []*stack) bool {
	for _, s := range stacks {
		first := slices.Min(slices.Collect(maps.Keys(s.blocks)))
		block := s.blocks[first]
		count := map[string]int{}
		for _, t := range l.infos {
			if numbered(t.Name) {
				continue
			}
			for suf := range block {
				if p, ok := strings.CutSuffix(t.Name, "."+suf); ok {
					count[p]++
				}
			}
		}
		for _, c := range count {
			if 2*c >= len(block) {
				return true
			}
		}
	}
	return false
}

// layerWords are the words of a layer count's key that say nothing of
// which stack it counts.
var layerWords = map[string]bool{"num": true, "n": true, "layers": true, "layer": true, "blocks": true, "block": true, "depth": true, "per": true, "transformer": true, "hidden": true}

// affinity returns the words of a layer count's key that name its stack:
// "single" for num_single_layers, "refiner" for num_refiner_layers.
func affinity(key string) []string {
	var out []string
	for _, w := range strings.Split(key, "_") {
		if w != "" && !layerWords[w] {
			out = append(out, w)
		}
	}
	return out
}

// hasWord reports whether one of the components of a stack's prefix,
// split at dots and underscores, is w.
func hasWord(prefix, w string) bool {
	for _, seg := range strings.FieldsFunc(prefix, func(r rune) bool { return r == '.' || r == '_' }) {
		if seg == w {
			return true
		}
	}
	return false
}

// isDiffusersLayerKey reports whether a key of a diffusers configuration
// counts the blocks of one stack: num_layers, num_single_layers,
// num_refiner_layers, num_encoder_layers, depth, num_blocks; not a
// spacing (global_attn_every_n_layers) nor a per-stage count
// (layers_per_block, checked apart).
func isDiffusersLayerKey(k string) bool {
	if k == "depth" || k == "num_blocks" {
		return true
	}
	if !strings.HasSuffix(k, "_layers") || !isLayerCount(k) {
		return false
	}
	for _, w := range []string{"head", "dual", "skip", "cross", "attention_layers", "mid"} {
		if strings.Contains(k, w) {
			return false
		}
	}
	return true
}

// diffusers checks a diffusers model's config.json: the layer counts
// against the stacks of blocks they count, layers_per_block and
// transformer_layers_per_block against the blocks of each stage, and the
// widths (heads × head size, in_channels, block_out_channels,
// cross_attention_dim, joint_attention_dim, latent_channels) against the
// layers that take them.
func (l *libCheck) diffusers(cfg map[string]any) {
	tops := l.topStacks()
	var keys []string
	for k, v := range cfg {
		if _, ok := positive(v); ok && isDiffusersLayerKey(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	control := false
	for _, s := range l.st.stacks {
		control = control || hasWord(s.prefix, "controlnet") || hasWord(s.prefix, "control")
	}
	// The words that name the stacks of the other counts.
	claimed := map[string]bool{}
	for _, k := range keys {
		for _, w := range affinity(k) {
			claimed[w] = true
		}
	}
	for _, k := range keys {
		v, _ := positive(cfg[k])
		words := affinity(k)
		var cands []*stack
		for _, s := range tops {
			match := len(words) == 0
			for _, w := range words {
				match = match || hasWord(s.prefix, w)
			}
			if len(words) == 0 {
				for w := range claimed {
					if hasWord(s.prefix, w) {
						match = false
					}
				}
			}
			if match {
				cands = append(cands, s)
			}
		}
		if len(cands) == 0 {
			continue
		}
		best, seen, sev := cands[0], false, Error
		for _, s := range cands {
			seen = seen || uint64(s.n) == v
			if s.n > best.n {
				best = s
			}
		}
		// The model's layers split among stacks and a block outside them
		// (UniDiffuser's in, mid and out blocks, num_layers // 2 each
		// side) count otherwise: in doubt, a warning.
		if !seen && len(words) == 0 && len(cands) > 1 && l.lookalike(cands) {
			sev = Warning
		}
		// A ControlNet copies a part of the base model whose
		// configuration it keeps: the first half of its blocks or fewer
		// (HunyuanDiT's, half less one).
		if control && uint64(best.n)*2 < v {
			sev = Warning
		}
		l.judge(k, seen, sev, "", "%s = %d, but %s has %d blocks", k, v, best.prefix, best.n)
	}
	l.perBlock(cfg)
	l.diffusersWidths(cfg)
}

// perStage returns a per-stage setting (layers_per_block: 2, or [1, 2,
// 2]) for stage i of n, and whether it is one.
func perStage(v any, i, n int) (uint64, bool) {
	if x, ok := positive(v); ok {
		return x, true
	}
	l, ok := v.([]any)
	if !ok || len(l) != n || i >= n {
		return 0, false
	}
	return positive(l[i])
}

// stage returns the stage a nested stack belongs to: the stack of stages
// ("down_blocks", "encoder.up_blocks"), its number and the rest of the
// prefix after it ("resnets", "attentions.0.transformer_blocks").
func stage(s *stack) (stages string, i int, rest string, ok bool) {
	splits := splitBlocks(s.prefix+".x.y", 6)
	if len(splits) == 0 || splits[0].named {
		return "", 0, "", false
	}
	i, err := strconv.Atoi(splits[0].num)
	if err != nil {
		return "", 0, "", false
	}
	return splits[0].prefix, i, strings.TrimSuffix(splits[0].suffix, ".x.y"), true
}

// perBlock checks layers_per_block (the resnets of each down block; an up
// block has one more) and transformer_layers_per_block (the transformer
// blocks of each attention of a down block).
func (l *libCheck) perBlock(cfg map[string]any) {
	stages := map[string]int{} // stack of stages → its number of stages
	for _, s := range l.topStacks() {
		stages[s.prefix] = s.n
	}
	type miss struct {
		s         *stack
		want, got uint64
	}
	for _, key := range []string{"layers_per_block", "transformer_layers_per_block"} {
		v, ok := cfg[key]
		if !ok {
			continue
		}
		judged := false
		var bad *miss
		got := map[int]uint64{}
		for _, s := range l.st.stacks {
			if !s.nested || s.modules {
				continue
			}
			p, i, rest, ok := stage(s)
			n, isStage := stages[p]
			if !ok || !isStage {
				continue
			}
			down := hasWord(p, "down")
			up := hasWord(p, "up")
			var want uint64
			switch {
			case key == "layers_per_block" && rest == "resnets" && (down || up):
				j := i
				if up {
					j = n - 1 - i // the up blocks go through the stages backwards
					got[-1-j] = uint64(s.n)
				} else {
					got[i] = uint64(s.n)
				}
				w, ok := perStage(v, j, n)
				if !ok {
					continue
				}
				want = w
				if up {
					want++
				}
			case key == "transformer_layers_per_block" && down && strings.HasSuffix(rest, ".transformer_blocks") && strings.HasPrefix(rest, "attentions."):
				w, ok := perStage(v, i, n)
				if !ok {
					continue
				}
				want = w
			default:
				continue
			}
			judged = true
			if uint64(s.n) != want && bad == nil {
				bad = &miss{s, want, uint64(s.n)}
			}
		}
		if !judged {
			continue
		}
		if key == "layers_per_block" && !resnetPattern(got) {
			continue // blocks of another rule (UNet1D's), which the key does not count
		}
		if bad != nil {
			l.judge(key, false, Error, "", "%s = %v, but %s has %d blocks, not %d", key, jsonText(v), bad.s.prefix, bad.got, bad.want)
		} else {
			l.judge(key, true, Error, "", "")
		}
	}
}

// resnetPattern reports whether the resnets of the stages of a model
// follow the rule of layers_per_block: each up block has one more than
// the down block of its stage. got holds the count of each down block
// (by stage, keys 0..n-1) and of each up block (keys -1-stage).
func resnetPattern(got map[int]uint64) bool {
	for k, up := range got {
		if k >= 0 {
			continue
		}
		if down, ok := got[-1-k]; ok && up != down+1 {
			return false
		}
	}
	return true
}

// jsonText writes a configuration value as JSON writes it.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// diffusersWidths checks the widths of a diffusers configuration that one
// layer takes, where that layer is in the weights.
func (l *libCheck) diffusersWidths(cfg map[string]any) {
	top := func(t info) bool { return !numbered(t.Name) }
	// num_attention_heads × attention_head_dim: the width of the queries.
	if h, ok := positive(cfg["num_attention_heads"]); ok {
		if d, ok := positive(cfg["attention_head_dim"]); ok {
			var qs []info
			seen := false
			for _, t := range l.infos {
				if len(t.Shape) == 2 && strings.HasSuffix(t.Name, ".to_q.weight") {
					qs = append(qs, t)
					seen = seen || t.Shape[0] == h*d
				}
			}
			if len(qs) > 0 {
				l.judge("num_attention_heads", seen, Error, qs[0].Name, "num_attention_heads × attention_head_dim = %d × %d = %d, but no query projection has that width (%s has shape %v)", h, d, h*d, qs[0].Name, qs[0].Shape)
				l.checked = append(l.checked, "attention_head_dim")
			}
		}
	}
	// in_channels: the input of the first layer, a convolution or the
	// linear embedding of patches, which may take more (the pixels of a
	// patch, a mask or a condition concatenated), never fewer.
	if c, ok := positive(cfg["in_channels"]); ok {
		var firsts []info
		seen := false
		for _, t := range l.infos {
			mod, ok := strings.CutSuffix(t.Name, ".weight")
			if !ok || len(t.Shape) < 2 || !top(t) || strings.Contains(mod, "decoder") {
				continue
			}
			segs := strings.Split(mod, ".")
			last := segs[len(segs)-1]
			if !(len(segs) == 1 && (last == "conv_in" || last == "x_embedder" || last == "img_in" || last == "proj_in") ||
				len(segs) == 2 && (mod == "encoder.conv_in" || mod == "pos_embed.proj" || mod == "patch_embed.proj")) {
				continue
			}
			firsts = append(firsts, t)
			seen = seen || t.Shape[1] >= c
		}
		if len(firsts) > 0 {
			l.judge("in_channels", seen, Error, firsts[0].Name, "in_channels = %d, but the first layer %s takes %d (shape %v), fewer", c, firsts[0].Name, firsts[0].Shape[1], firsts[0].Shape)
		}
	}
	// block_out_channels: one width per down block.
	if boc, ok := cfg["block_out_channels"].([]any); ok && len(boc) > 0 {
		for _, s := range l.topStacks() {
			// An autoencoder's encoder may have other stages than its
			// block_out_channels: the UNet's own down blocks only.
			if s.named || s.prefix != "down_blocks" {
				continue
			}
			nums := slices.Sorted(maps.Keys(s.blocks))
			if len(nums) == 0 || nums[len(nums)-1]+1 != s.n {
				break // gaps are the structure's to report
			}
			if s.n != len(boc) {
				l.judge("block_out_channels", false, Error, "", "block_out_channels has %d entries, but %s has %d blocks", len(boc), s.prefix, s.n)
				break
			}
			bad := ""
			for i, x := range boc {
				w, ok := positive(x)
				if !ok {
					bad = "-"
					break
				}
				found := false
				for _, t := range s.blocks[i] {
					found = found || len(t.Shape) >= 2 && t.Shape[0] == w
				}
				if !found && bad == "" {
					bad = fmt.Sprintf("block_out_channels[%d] = %d, but no layer of %s has %d outputs", i, w, s.block(i), w)
				}
			}
			if bad != "-" {
				l.judge("block_out_channels", bad == "", Error, "", "%s", bad)
			}
			break
		}
	}
	// cross_attention_dim, joint_attention_dim, latent_channels: the
	// input of the layers that take the text and the latents.
	inputs := []struct {
		key  string
		take func(t info) bool
	}{
		{"cross_attention_dim", func(t info) bool { return strings.HasSuffix(t.Name, ".attn2.to_k.weight") }},
		{"joint_attention_dim", func(t info) bool { return t.Name == "context_embedder.weight" }},
		{"latent_channels", func(t info) bool { return t.Name == "post_quant_conv.weight" || t.Name == "decoder.conv_in.weight" }},
	}
	for _, in := range inputs {
		v, ok := positive(cfg[in.key])
		if !ok {
			continue
		}
		var ts []info
		seen := false
		for _, t := range l.infos {
			if len(t.Shape) >= 2 && in.take(t) {
				ts = append(ts, t)
				seen = seen || t.Shape[1] == v
			}
		}
		if len(ts) > 0 {
			l.judge(in.key, seen, Error, ts[0].Name, "%s = %d, but %s takes %d (shape %v)", in.key, v, ts[0].Name, ts[0].Shape[1], ts[0].Shape)
		}
	}
}

// timm checks the config.json of timm's hub code: num_classes is the
// number of rows of the classifier that pretrained_cfg.classifier names
// (no classifier for 0), and num_features the width of the features it
// takes (the sum of their inputs for several heads), or of a
// normalization where a pre-logits layer comes between.
func (l *libCheck) timm(cfg map[string]any) {
	pc, _ := cfg["pretrained_cfg"].(map[string]any)
	var heads []info
	var names []string
	switch c := pc["classifier"].(type) {
	case string:
		names = []string{c}
	case []any:
		for _, x := range c {
			if s, ok := x.(string); ok {
				names = append(names, s)
			}
		}
	}
	for _, n := range names {
		if t, ok := l.byName[n+".weight"]; ok && len(t.Shape) >= 2 {
			heads = append(heads, t)
		}
	}
	if v, ok := cfg["num_classes"].(float64); ok && v >= 0 && len(heads) > 0 {
		// timm replaces the classifier by nn.Identity for 0 classes.
		n := uint64(v)
		seen := true
		for _, h := range heads {
			seen = seen && h.Shape[0] == n
		}
		l.judge("num_classes", seen, Error, heads[0].Name, "num_classes = %d, but the classifier %s has %d rows (shape %v)", n, heads[0].Name, heads[0].Shape[0], heads[0].Shape)
	}
	if nf, ok := positive(cfg["num_features"]); ok && len(l.infos) > 0 {
		seen := false
		// A model of several heads (one per branch or stage: heads.0,
		// heads.1, ...; a distilled model's heads_dist.N beside them)
		// concatenates the features of each list.
		sums := map[string]uint64{}
		for _, h := range heads {
			seen = seen || h.Shape[1] == nf
			list := strings.TrimSuffix(h.Name, ".weight")
			if i := strings.LastIndexByte(list, '.'); i >= 0 {
				list = list[:i]
			}
			sums[list] += h.Shape[1]
		}
		for _, sum := range sums {
			seen = seen || len(heads) > 1 && sum == nf
		}
		for _, t := range l.infos {
			seen = seen || len(t.Shape) == 1 && t.Shape[0] == nf && !strings.HasSuffix(t.Name, ".bias")
		}
		ref := "no normalization has that width"
		if len(heads) > 0 {
			ref = fmt.Sprintf("the classifier %s takes %d and no normalization has that width", heads[0].Name, heads[0].Shape[1])
		}
		l.judge("num_features", seen, Error, "", "num_features = %d, but %s", nf, ref)
	}
}

// dense checks the config.json of a sentence-transformers Dense module,
// {"in_features": 384, "out_features": 256, ...}, against its
// linear.weight [out, in].
func (l *libCheck) dense(cfg map[string]any) {
	t, ok := l.byName["linear.weight"]
	if !ok || len(t.Shape) != 2 {
		return
	}
	if v, ok := positive(cfg["in_features"]); ok {
		l.judge("in_features", t.Shape[1] == v, Error, t.Name, "in_features = %d, but %s takes %d (shape %v)", v, t.Name, t.Shape[1], t.Shape)
	}
	if v, ok := positive(cfg["out_features"]); ok {
		l.judge("out_features", t.Shape[0] == v, Error, t.Name, "out_features = %d, but %s gives %d (shape %v)", v, t.Name, t.Shape[0], t.Shape)
	}
}

// openCLIP checks open_clip_config.json: model_cfg.embed_dim against the
// projections' outputs, and the widths, layer counts, vocabulary and
// context length of vision_cfg and text_cfg against the towers of
// open_clip's own transformer (a tower of timm or transformers is not
// checked).
func (l *libCheck) openCLIP(o map[string]any) {
	mc, _ := o["model_cfg"].(map[string]any)
	if mc == nil {
		return
	}
	if e, ok := positive(mc["embed_dim"]); ok {
		var projs []info
		seen := true
		for _, n := range []string{"text_projection", "visual.proj"} {
			if t, ok := l.byName[n]; ok && len(t.Shape) == 2 {
				projs = append(projs, t)
				seen = seen && t.Shape[1] == e
			}
		}
		if len(projs) > 0 {
			l.judge("model_cfg.embed_dim", seen, Error, projs[0].Name, "model_cfg.embed_dim = %d, but the projection %s gives %d (shape %v)", e, projs[0].Name, projs[0].Shape[1], projs[0].Shape)
		}
	}
	stacks := map[string]*stack{}
	for _, s := range l.st.stacks {
		stacks[s.prefix] = s
	}
	tower := func(cfgKey, prefix string) {
		c, _ := mc[cfgKey].(map[string]any)
		if c == nil {
			return
		}
		key := "model_cfg." + cfgKey + "."
		if s := stacks[prefix+"transformer.resblocks"]; s != nil {
			if v, ok := positive(c["layers"]); ok {
				l.judge(key+"layers", uint64(s.n) == v, Error, "", "%slayers = %d, but %s has %d blocks", key, v, s.prefix, s.n)
			}
		}
		var w *info
		for _, n := range []string{"token_embedding.weight", "class_embedding", "ln_final.weight", "ln_post.weight"} {
			if t, ok := l.byName[prefix+n]; ok && w == nil {
				w = &t
			}
		}
		if v, ok := positive(c["width"]); ok && w != nil {
			got := w.Shape[len(w.Shape)-1]
			l.judge(key+"width", got == v, Error, w.Name, "%swidth = %d, but %s has width %d (shape %v)", key, v, w.Name, got, w.Shape)
		}
		if t, ok := l.byName[prefix+"token_embedding.weight"]; ok && len(t.Shape) == 2 {
			if v, ok := positive(c["vocab_size"]); ok {
				l.judge(key+"vocab_size", t.Shape[0] == v, Error, t.Name, "%svocab_size = %d, but %s has %d rows", key, v, t.Name, t.Shape[0])
			}
			if t, ok := l.byName[prefix+"positional_embedding"]; ok && len(t.Shape) == 2 {
				if v, ok := positive(c["context_length"]); ok {
					l.judge(key+"context_length", t.Shape[0] == v, Error, t.Name, "%scontext_length = %d, but %s has %d rows", key, v, t.Name, t.Shape[0])
				}
			}
		}
	}
	tower("vision_cfg", "visual.")
	tower("text_cfg", "")
}

// peftRoot is the prefix of the names of the tensors of peft's tuner
// layers: PeftModel.base_model (the tuner) .model (the model adapted).
const peftRoot = "base_model.model."

// peft checks a peft adapter's adapter_config.json: the prompt tensor of
// the prompt learning methods against num_virtual_tokens and token_dim,
// and for the methods that adapt modules, that each adapter tensor is of
// a module that target_modules names, that each module named has some
// (a warning: the base model may lack it), and the rank of each pair of
// low-rank factors against r, init_r or rank_pattern.
func (l *libCheck) peft(a map[string]any) {
	l.peftPrompt(a)
	match := peftTargets(a)
	if match == nil {
		return
	}
	type adapted struct {
		module string
		params map[string]info // the adapter's tensors, by name after the module
	}
	modules := map[string]*adapted{}
	var order []string
	tags := map[string]bool{}
	var unmatched []string
	saved := modulesToSave(a)
	for _, t := range l.infos {
		rel, ok := strings.CutPrefix(t.Name, peftRoot)
		if !ok {
			continue
		}
		segs := strings.Split(rel, ".")
		i := len(segs) - 1
		for ; i > 0 && !match(strings.Join(segs[:i], ".")); i-- {
		}
		if i == 0 {
			if !saved(rel) {
				unmatched = append(unmatched, rel)
			}
			continue
		}
		m := strings.Join(segs[:i], ".")
		if modules[m] == nil {
			modules[m] = &adapted{module: m, params: map[string]info{}}
			order = append(order, m)
		}
		modules[m].params[strings.Join(segs[i:], ".")] = t
		if segs[i] != "base_layer" && strings.Contains(segs[i], "_") {
			tags[segs[i][:strings.IndexByte(segs[i], '_')]] = true
		}
	}
	if len(modules) > 0 {
		// An adapter tensor of a module not targeted: a tensor whose
		// name has a component of the adapter's ("lora_A"), outside
		// every module that target_modules names.
		var stray []string
		for _, rel := range unmatched {
			segs := strings.Split(rel, ".")
			for i, seg := range segs {
				if j := strings.IndexByte(seg, '_'); j > 0 && i > 0 && tags[seg[:j]] {
					stray = append(stray, strings.Join(segs[:i], "."))
					break
				}
			}
		}
		stray = slices.Compact(stray)
		msg := ""
		if len(stray) > 0 {
			msg = fmt.Sprintf("the adapter has tensors of %s, which target_modules does not name", stray[0])
			if len(stray) > 1 {
				msg += fmt.Sprintf(" (and of %d other modules)", len(stray)-1)
			}
		}
		l.judge("target_modules", len(stray) == 0, Error, peftRoot+stray0(stray), "%s", msg)
		if list, ok := a["target_modules"].([]any); ok {
			var absent []string
			for _, x := range list {
				s, _ := x.(string)
				found := false
				for _, m := range order {
					found = found || m == s || strings.HasSuffix(m, "."+s)
				}
				if !found {
					absent = append(absent, s)
				}
			}
			if len(absent) > 0 {
				l.out = append(l.out, Finding{Severity: Warning, Kind: KindConfig, Key: l.file + "target_modules",
					Message: fmt.Sprintf("target_modules names %s, but no adapter tensor is of a module of that name (the base model may have none)", strings.Join(absent, ", "))})
			}
		}
	}
	// The rank of each module's pairs of factors.
	key := "r"
	if _, ok := positive(a["init_r"]); ok {
		key = "init_r" // AdaLoRA starts at init_r and prunes toward target_r
	}
	r, hasR := positive(a[key])
	patterns, _ := a["rank_pattern"].(map[string]any)
	type mismatch struct {
		key, module, tensor string
		want, got           uint64
		shape               []uint64
	}
	var bad []mismatch
	agree := map[string]int{}
	judged := map[string]bool{}
	shared := map[string]info{}
	for _, t := range l.infos {
		if rest, ok := strings.CutPrefix(t.Name, "base_model."); ok && !strings.HasPrefix(t.Name, peftRoot) {
			shared[rest] = t
		}
	}
	if len(shared) > 0 {
		modules["base_model"] = &adapted{module: "base_model", params: shared}
		order = append(order, "base_model")
	}
	for _, m := range order {
		want, k := r, key
		known := hasR
		if m != "base_model" {
			for _, pk := range slices.Sorted(maps.Keys(patterns)) {
				re, err := regexp.Compile(`^(.*\.)?(` + pk + `)$`)
				if err != nil {
					known = false
					break
				}
				if re.MatchString(m) {
					want, known = rankOf(patterns[pk])
					k = "rank_pattern"
					break
				}
			}
		}
		if !known {
			continue
		}
		for name, got := range pairRanks(modules[m].params) {
			judged[k] = true
			if got != want {
				t := modules[m].params[name]
				bad = append(bad, mismatch{k, m, t.Name, want, got, t.Shape})
			} else {
				agree[k]++
			}
		}
	}
	for _, k := range []string{key, "rank_pattern"} {
		if !judged[k] {
			continue
		}
		var first *mismatch
		n := 0
		for i := range bad {
			if bad[i].key == k {
				if first == nil {
					first = &bad[i]
				}
				n++
			}
		}
		if first == nil {
			l.judge(k, true, Error, "", "")
			continue
		}
		sev := Error
		if agree[k] > 0 && len(patterns) > 0 {
			sev = Warning // a pattern of rank_pattern matched otherwise than peft matches it
		}
		msg := fmt.Sprintf("%s = %d, but the adapter of %s has rank %d (%s has shape %v)", k, first.want, first.module, first.got, first.tensor, first.shape)
		if k == "rank_pattern" {
			msg = fmt.Sprintf("rank_pattern gives %s rank %d, but its adapter has rank %d (%s has shape %v)", first.module, first.want, first.got, first.tensor, first.shape)
		}
		if n > 1 {
			msg += fmt.Sprintf(", and %d more pairs of factors differ", n-1)
		}
		l.judge(k, false, sev, first.tensor, "%s", msg)
	}
}

// stray0 returns the first module of a list, or "".
func stray0(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// peftTargets returns the test of peft's check_target_module_exists for
// the name of a module: target_modules is a regular expression that the
// name must match in full, or a list of names that the name is or ends
// with; target_parameters names parameters, whose modules are targeted.
// It returns nil for a configuration without targets.
func peftTargets(a map[string]any) func(string) bool {
	var names []string
	var re *regexp.Regexp
	switch t := a["target_modules"].(type) {
	case string:
		names = append(names, t)
		re, _ = regexp.Compile(`^(?:` + t + `)$`)
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				names = append(names, s)
			}
		}
	}
	if ps, ok := a["target_parameters"].([]any); ok {
		for _, x := range ps {
			if s, ok := x.(string); ok {
				if i := strings.LastIndexByte(s, '.'); i > 0 {
					names = append(names, s[:i])
				}
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	return func(m string) bool {
		if re != nil && re.MatchString(m) {
			return true
		}
		for _, n := range names {
			if m == n || strings.HasSuffix(m, "."+n) {
				return true
			}
		}
		return false
	}
}

// modulesToSave returns the test of whether a tensor's name is within a
// module of modules_to_save, or of the layers peft saves beside the
// adapter (the embedding of trainable_token_indices, the embeddings and
// heads saved with save_embedding_layers).
func modulesToSave(a map[string]any) func(string) bool {
	var res []*regexp.Regexp
	if l, ok := a["modules_to_save"].([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				if re, err := regexp.Compile(`(^|.*\.)` + s + `($|\..*)`); err == nil {
					res = append(res, re)
				}
			}
		}
	}
	return func(name string) bool {
		m := name[:max(strings.LastIndexByte(name, '.'), 0)]
		for _, re := range res {
			if re.MatchString(m) {
				return true
			}
		}
		return false
	}
}

// rankOf returns the rank a rank_pattern entry gives: a number, or
// AdaLoRA's list of which ranks are kept.
func rankOf(v any) (uint64, bool) {
	if n, ok := positive(v); ok {
		return n, true
	}
	l, ok := v.([]any)
	if !ok {
		return 0, false
	}
	var n uint64
	for _, x := range l {
		b, ok := x.(bool)
		if !ok {
			return 0, false
		}
		if b {
			n++
		}
	}
	return n, true
}

// pairRanks returns the rank of each pair of low-rank factors among an
// adapter's tensors, by the name of the first factor, where the two
// factors agree on it: X_A [r, in] and X_B [out, r] (LoRA, AdaLoRA,
// VeRA's shared pair; X_B [out, r, 1, 1] for a convolution), X_a [out,
// r] and X_b [r, in] (LoHa, LoKr), X_down [r, in] and X_up [out, r].
// Tensors of other shapes (the 3-D and 4-D factors of other methods) are
// not pairs.
func pairRanks(params map[string]info) map[string]uint64 {
	norm := map[string]string{} // factor name, without ".weight" and ".default" → tensor key
	for k := range params {
		n := strings.TrimSuffix(k, ".weight")
		n = strings.TrimSuffix(n, ".default")
		norm[n] = k
	}
	out := map[string]uint64{}
	for n, k := range norm {
		a := params[k]
		var partner string
		var ra func(b info) (uint64, uint64, bool)
		two := func(b info) bool { return len(a.Shape) == 2 && len(b.Shape) == 2 }
		switch {
		case strings.HasSuffix(n, "_A"):
			partner = strings.TrimSuffix(n, "_A") + "_B"
			ra = func(b info) (uint64, uint64, bool) {
				conv := len(a.Shape) == len(b.Shape) && len(a.Shape) > 2 && len(a.Shape) <= 5
				for _, d := range b.Shape[min(2, len(b.Shape)):] {
					conv = conv && d == 1
				}
				return a.Shape[0], b.Shape[1], two(b) || conv
			}
		case strings.HasSuffix(n, "_a"):
			partner = strings.TrimSuffix(n, "_a") + "_b"
			ra = func(b info) (uint64, uint64, bool) { return a.Shape[1], b.Shape[0], two(b) }
		case strings.HasSuffix(n, "_down"):
			partner = strings.TrimSuffix(n, "_down") + "_up"
			ra = func(b info) (uint64, uint64, bool) { return a.Shape[0], b.Shape[1], two(b) }
		default:
			continue
		}
		pk, ok := norm[partner]
		if !ok || len(a.Shape) < 2 {
			continue
		}
		b := params[pk]
		if len(b.Shape) < 2 {
			continue
		}
		x, y, ok := ra(b)
		if ok && x == y {
			out[k] = x
		}
	}
	return out
}

// peftPrompt checks the prompt tensor of the prompt learning methods:
// prompt_embeddings has num_virtual_tokens rows (times
// num_transformer_submodules), each of token_dim values, or, for a
// prefix of keys and values, num_layers × 2 × token_dim.
func (l *libCheck) peftPrompt(a map[string]any) {
	t, ok := l.byName["prompt_embeddings"]
	if !ok || len(t.Shape) != 2 {
		return
	}
	rows, cols := t.Shape[0], t.Shape[1]
	if v, ok := positive(a["num_virtual_tokens"]); ok {
		subs, ok := positive(a["num_transformer_submodules"])
		if !ok {
			subs = 1
		}
		l.judge("num_virtual_tokens", rows == v || rows == v*subs, Error, t.Name, "num_virtual_tokens = %d, but %s has %d rows (shape %v)", v, t.Name, rows, t.Shape)
	}
	if v, ok := positive(a["token_dim"]); ok {
		seen := cols == v
		if n, ok := positive(a["num_layers"]); ok {
			seen = seen || cols == 2*n*v
		}
		l.judge("token_dim", seen, Error, t.Name, "token_dim = %d, but %s has %d columns (shape %v)", v, t.Name, cols, t.Shape)
	}
}

// dedupeConfig drops a configuration's finding about a block or tensor
// that a structure finding names too: the structure's says where the
// defect is, and one defect is reported once.
func dedupeConfig(fs []Finding) []Finding {
	named := map[string]bool{}
	for _, f := range fs {
		if f.Kind == KindStructure && f.Severity == Error {
			named[f.Block] = true
			named[f.Tensor] = true
		}
	}
	out := fs[:0]
	for _, f := range fs {
		if f.Kind == KindConfig && (f.Block != "" && named[f.Block] || f.Tensor != "" && named[f.Tensor] || lacksNamed(f, named)) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// lacksNamed reports whether a finding says a block lacks a tensor of a
// block a structure finding names.
func lacksNamed(f Finding, named map[string]bool) bool {
	rest, ok := strings.CutPrefix(f.Message, "lacks ")
	if !ok {
		return false
	}
	for b := range named {
		if b != "" && strings.HasPrefix(rest, b+".") {
			return true
		}
	}
	return false
}
