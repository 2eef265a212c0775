package check

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Families lists the model_type values of config.json whose figures Run
// checks against the shapes, as each family's transformers modeling code
// shapes its tensors. For other families it checks no shape against the
// configuration, and says so in the report's notes.
var Families = []string{
	"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3",
	"gpt2", "gpt_neox", "falcon", "bert",
}

// dim is an expected dimension and how it follows from the configuration.
type dim struct {
	v    uint64
	expr string
}

// rule gives the expected shape of the tensors named suffix: those of
// every block of the main stack when inBlock, else the one tensor whose
// name is suffix or ends with "."+suffix outside the blocks. A required
// tensor that is absent is an error.
type rule struct {
	suffix   string
	inBlock  bool
	required bool
	shape    []dim
}

// config reads figures from config.json, recording the keys it misses.
type config struct {
	m       map[string]any
	missing []string
}

// num returns the value of the first of keys present as a positive
// integer, recording the first key as missing if none is.
func (c *config) num(keys ...string) (dim, bool) {
	for _, k := range keys {
		v, ok := c.m[k].(float64)
		if ok && v > 0 && v == math.Trunc(v) && v < 1<<53 {
			return dim{uint64(v), k}, true
		}
	}
	if !slices.Contains(c.missing, keys[0]) {
		c.missing = append(c.missing, keys[0])
	}
	return dim{}, false
}

// opt returns the value of key if it is a positive integer.
func (c *config) opt(key string) (dim, bool) {
	v, ok := c.m[key].(float64)
	if ok && v > 0 && v == math.Trunc(v) && v < 1<<53 {
		return dim{uint64(v), key}, true
	}
	return dim{}, false
}

func (c *config) flag(key string, def bool) bool {
	if v, ok := c.m[key].(bool); ok {
		return v
	}
	return def
}

func mul(a, b dim) dim { return dim{a.v * b.v, a.expr + "*" + b.expr} }
func times(k uint64, a dim) dim {
	return dim{k * a.v, fmt.Sprintf("%d*%s", k, a.expr)}
}
func sum(ds ...dim) dim {
	var d dim
	parts := make([]string, len(ds))
	for i, x := range ds {
		d.v += x.v
		parts[i] = x.expr
	}
	d.expr = strings.Join(parts, "+")
	return d
}

// div returns a/b, or false if b does not divide a.
func div(a, b dim) (dim, bool) {
	if b.v == 0 || a.v%b.v != 0 {
		return dim{}, false
	}
	return dim{a.v / b.v, a.expr + "/" + b.expr}, true
}

// headDim returns head_dim if the configuration gives it, else
// hidden_size / num_attention_heads.
func (c *config) headDim(h, heads dim) (dim, []Finding) {
	if d, ok := c.opt("head_dim"); ok {
		return d, nil
	}
	return headSize(h, heads)
}

// headSize returns h / heads, or an error finding if heads does not
// divide h.
func headSize(h, heads dim) (dim, []Finding) {
	d, ok := div(h, heads)
	if !ok {
		return dim{}, []Finding{{Severity: Error, Kind: KindConfig, Key: heads.expr,
			Message: fmt.Sprintf("%s = %d does not divide %s = %d", heads.expr, heads.v, h.expr, h.v)}}
	}
	return d, nil
}

// checkConfig checks the configuration's figures against the tensors. It
// returns the family checked ("" if none), notes on what was not checked,
// and the findings.
func checkConfig(m map[string]any, infos []info, st structureResult) (family string, notes []string, out []Finding) {
	mt, _ := m["model_type"].(string)
	switch mt {
	case "RefinedWebModel": // Falcon-7B's first configuration
		mt = "falcon"
	case "RefinedWeb": // Falcon-40B's: the new decoder architecture
		mt = "falcon"
		if _, ok := m["new_decoder_architecture"]; !ok {
			m["new_decoder_architecture"] = true
		}
	}
	if mt == "" {
		return "", []string{"config.json has no model_type: the configuration was not checked"}, nil
	}
	if !slices.Contains(Families, mt) {
		return "", []string{fmt.Sprintf("model_type %q is not one of the families checked (%s): no shape was checked against the configuration", mt, strings.Join(Families, ", "))}, nil
	}
	c := &config{m: m}
	rules, head, layers, fs := familyRules(mt, c)
	out = append(out, fs...)
	for _, k := range c.missing {
		out = append(out, Finding{Severity: Error, Kind: KindConfig, Key: k, Message: fmt.Sprintf("missing, or not a positive integer; a %s configuration needs it", mt)})
	}
	if len(c.missing) > 0 || len(fs) > 0 {
		return mt, nil, out
	}
	if q, ok := m["quantization_config"].(map[string]any); ok {
		switch f, _ := q["format"].(string); f {
		case "int-quantized", "float-quantized", "naive-quantized", "dense", "":
		default:
			notes = append(notes, fmt.Sprintf("quantization format %q packs the weights: their shapes were not checked", f))
			rules = slices.DeleteFunc(rules, func(r rule) bool { return r.inBlock && strings.HasSuffix(r.suffix, ".weight") && len(r.shape) == 2 })
		}
	}
	main := st.main()
	// The layer count.
	if main == nil {
		out = append(out, Finding{Severity: Error, Kind: KindConfig, Key: layers.expr,
			Message: fmt.Sprintf("%s = %d, but no tensor is in a numbered block", layers.expr, layers.v)})
	} else if uint64(main.n) != layers.v {
		out = append(out, Finding{Severity: Error, Kind: KindConfig, Key: layers.expr, Block: main.prefix,
			Message: fmt.Sprintf("%s = %d, but the weights have %d blocks %s.N", layers.expr, layers.v, main.n, main.prefix)})
	}
	// The tensors outside the blocks.
	outside := map[string]info{}
	for _, t := range infos {
		if _, _, _, ok := splitBlock(t.Name); !ok {
			outside[t.Name] = t
		}
	}
	find := func(suffix string) (info, bool) {
		if t, ok := outside[suffix]; ok {
			return t, true
		}
		for _, t := range infos {
			if strings.HasSuffix(t.Name, "."+suffix) {
				if _, ok := outside[t.Name]; ok {
					return t, true
				}
			}
		}
		return info{}, false
	}
	for _, r := range append(rules, head...) {
		if r.inBlock {
			if main == nil {
				continue
			}
			for _, i := range slices.Sorted(mapsKeys(main.blocks)) {
				t, ok := main.blocks[i][r.suffix]
				if !ok {
					if r.required {
						out = append(out, Finding{Severity: Error, Kind: KindConfig, Block: main.block(i),
							Message: fmt.Sprintf("lacks %s.%d.%s, which a %s model has", main.prefix, i, r.suffix, mt)})
					}
					continue
				}
				out = append(out, compareShape(t, r.shape)...)
			}
			continue
		}
		t, ok := find(r.suffix)
		if !ok {
			if r.required {
				out = append(out, Finding{Severity: Error, Kind: KindConfig, Tensor: r.suffix,
					Message: fmt.Sprintf("missing: a %s model has it", mt)})
			}
			continue
		}
		out = append(out, compareShape(t, r.shape)...)
	}
	return mt, notes, out
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// compareShape reports a tensor whose shape is not the one the
// configuration gives, naming the keys involved.
func compareShape(t info, want []dim) []Finding {
	ok := len(t.Shape) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = t.Shape[i] == want[i].v
	}
	if ok {
		return nil
	}
	parts := make([]string, len(want))
	keys := make([]string, 0, len(want))
	for i, d := range want {
		parts[i] = fmt.Sprintf("%s = %d", d.expr, d.v)
		keys = append(keys, d.expr)
	}
	return []Finding{{Severity: Error, Kind: KindConfig, Tensor: t.Name, Key: strings.Join(keys, ", "),
		Message: fmt.Sprintf("shape %v, but config.json gives [%s]", t.Shape, strings.Join(parts, ", "))}}
}

func shp(ds ...dim) []dim { return ds }

// familyRules returns the rules of a family, the rules of its output head
// (none when the embeddings are tied and the head is absent), and its
// layer count.
func familyRules(mt string, c *config) (rules, head []rule, layers dim, fs []Finding) {
	req := func(suffix string, shape ...dim) rule { return rule{suffix: suffix, required: true, shape: shape} }
	blk := func(suffix string, shape ...dim) rule {
		return rule{suffix: suffix, inBlock: true, required: true, shape: shape}
	}
	optBlk := func(suffix string, shape ...dim) rule { return rule{suffix: suffix, inBlock: true, shape: shape} }
	headRule := func(name string, tiedDefault bool, shape ...dim) []rule {
		// An absent head is an error only when the embeddings are not
		// tied; a present one must have the shape either way.
		return []rule{{suffix: name, required: !c.flag("tie_word_embeddings", tiedDefault), shape: shape}}
	}
	switch mt {
	case "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3":
		h, _ := c.num("hidden_size")
		v, _ := c.num("vocab_size")
		layers, _ = c.num("num_hidden_layers")
		inter, _ := c.num("intermediate_size")
		heads, _ := c.num("num_attention_heads")
		kv, ok := c.opt("num_key_value_heads")
		if !ok {
			kv = heads
		}
		if len(c.missing) > 0 {
			return nil, nil, layers, nil
		}
		hd, f := c.headDim(h, heads)
		if f != nil {
			return nil, nil, layers, f
		}
		q, k := mul(heads, hd), mul(kv, hd)
		rules = []rule{
			req("embed_tokens.weight", v, h),
			req("norm.weight", h),
			blk("input_layernorm.weight", h),
			blk("post_attention_layernorm.weight", h),
			blk("self_attn.o_proj.weight", h, q),
			blk("mlp.down_proj.weight", h, inter),
		}
		if mt == "phi3" {
			rules = append(rules,
				blk("self_attn.qkv_proj.weight", sum(q, k, k), h),
				blk("mlp.gate_up_proj.weight", times(2, inter), h))
		} else {
			rules = append(rules,
				blk("self_attn.q_proj.weight", q, h),
				blk("self_attn.k_proj.weight", k, h),
				blk("self_attn.v_proj.weight", k, h),
				optBlk("self_attn.q_proj.bias", q),
				optBlk("self_attn.k_proj.bias", k),
				optBlk("self_attn.v_proj.bias", k),
				blk("mlp.gate_proj.weight", inter, h),
				blk("mlp.up_proj.weight", inter, h))
		}
		switch mt {
		case "qwen3", "gemma3_text":
			rules = append(rules, blk("self_attn.q_norm.weight", hd), blk("self_attn.k_norm.weight", hd))
		}
		switch mt {
		case "gemma2", "gemma3_text":
			rules = append(rules, blk("pre_feedforward_layernorm.weight", h), blk("post_feedforward_layernorm.weight", h))
		}
		tied := map[string]bool{"gemma": true, "gemma2": true, "gemma3_text": true}[mt]
		head = headRule("lm_head.weight", tied, v, h)
	case "gpt2":
		h, _ := c.num("n_embd", "hidden_size")
		v, _ := c.num("vocab_size")
		layers, _ = c.num("n_layer", "num_hidden_layers")
		heads, _ := c.num("n_head", "num_attention_heads")
		pos, _ := c.num("n_positions", "max_position_embeddings")
		if len(c.missing) > 0 {
			return nil, nil, layers, nil
		}
		if _, fs := headSize(h, heads); fs != nil {
			return nil, nil, layers, fs
		}
		inner, ok := c.opt("n_inner")
		if !ok {
			inner = times(4, h)
		}
		// GPT-2's Conv1D layers store their weights as [in, out].
		rules = []rule{
			req("wte.weight", v, h), req("wpe.weight", pos, h),
			req("ln_f.weight", h), req("ln_f.bias", h),
			blk("ln_1.weight", h), blk("ln_1.bias", h), blk("ln_2.weight", h), blk("ln_2.bias", h),
			blk("attn.c_attn.weight", h, times(3, h)), blk("attn.c_attn.bias", times(3, h)),
			blk("attn.c_proj.weight", h, h), blk("attn.c_proj.bias", h),
			blk("mlp.c_fc.weight", h, inner), blk("mlp.c_fc.bias", inner),
			blk("mlp.c_proj.weight", inner, h), blk("mlp.c_proj.bias", h),
		}
		head = headRule("lm_head.weight", true, v, h)
	case "gpt_neox":
		h, _ := c.num("hidden_size")
		v, _ := c.num("vocab_size")
		layers, _ = c.num("num_hidden_layers")
		inter, _ := c.num("intermediate_size")
		heads, _ := c.num("num_attention_heads")
		if len(c.missing) > 0 {
			return nil, nil, layers, nil
		}
		if _, fs := headSize(h, heads); fs != nil {
			return nil, nil, layers, fs
		}
		rules = []rule{
			req("embed_in.weight", v, h), req("final_layer_norm.weight", h),
			blk("input_layernorm.weight", h), blk("post_attention_layernorm.weight", h),
			blk("attention.query_key_value.weight", times(3, h), h), optBlk("attention.query_key_value.bias", times(3, h)),
			blk("attention.dense.weight", h, h),
			blk("mlp.dense_h_to_4h.weight", inter, h), optBlk("mlp.dense_h_to_4h.bias", inter),
			blk("mlp.dense_4h_to_h.weight", h, inter),
		}
		head = headRule("embed_out.weight", false, v, h)
	case "falcon":
		h, _ := c.num("hidden_size")
		v, _ := c.num("vocab_size")
		layers, _ = c.num("num_hidden_layers", "n_layer")
		heads, _ := c.num("num_attention_heads", "n_head")
		if len(c.missing) > 0 {
			return nil, nil, layers, nil
		}
		hd, fs := headSize(h, heads)
		if fs != nil {
			return nil, nil, layers, fs
		}
		ffn, ok := c.opt("ffn_hidden_size")
		if !ok {
			ffn = times(4, h)
		}
		var qkv dim
		switch {
		case c.flag("new_decoder_architecture", false):
			kv, ok := c.opt("num_kv_heads")
			if !ok {
				kv, ok = c.opt("n_head_kv")
			}
			if !ok {
				kv = heads
			}
			qkv = mul(sum(times(2, kv), heads), hd)
			qkv.expr = "(2*" + kv.expr + "+" + heads.expr + ")*" + hd.expr
		case c.flag("multi_query", true):
			qkv = sum(h, times(2, hd))
		default:
			qkv = times(3, h)
		}
		rules = []rule{
			req("word_embeddings.weight", v, h), req("ln_f.weight", h),
			blk("self_attention.query_key_value.weight", qkv, h), optBlk("self_attention.query_key_value.bias", qkv),
			blk("self_attention.dense.weight", h, h),
			blk("mlp.dense_h_to_4h.weight", ffn, h), blk("mlp.dense_4h_to_h.weight", h, ffn),
			optBlk("input_layernorm.weight", h), optBlk("ln_attn.weight", h), optBlk("ln_mlp.weight", h),
			optBlk("post_attention_layernorm.weight", h),
		}
		head = headRule("lm_head.weight", true, v, h)
	case "bert":
		h, _ := c.num("hidden_size")
		v, _ := c.num("vocab_size")
		layers, _ = c.num("num_hidden_layers")
		inter, _ := c.num("intermediate_size")
		heads, _ := c.num("num_attention_heads")
		pos, _ := c.num("max_position_embeddings")
		types, ok := c.opt("type_vocab_size")
		if !ok {
			types = dim{2, "type_vocab_size"}
		}
		if len(c.missing) > 0 {
			return nil, nil, layers, nil
		}
		if _, fs := headSize(h, heads); fs != nil {
			return nil, nil, layers, fs
		}
		rules = []rule{
			req("embeddings.word_embeddings.weight", v, h),
			req("embeddings.position_embeddings.weight", pos, h),
			{suffix: "embeddings.token_type_embeddings.weight", shape: shp(types, h)},
			blk("attention.self.query.weight", h, h), blk("attention.self.key.weight", h, h), blk("attention.self.value.weight", h, h),
			optBlk("attention.self.query.bias", h), optBlk("attention.self.key.bias", h), optBlk("attention.self.value.bias", h),
			blk("attention.output.dense.weight", h, h),
			blk("intermediate.dense.weight", inter, h), optBlk("intermediate.dense.bias", inter),
			blk("output.dense.weight", h, inter), optBlk("output.dense.bias", h),
			optBlk("attention.output.LayerNorm.weight", h), optBlk("output.LayerNorm.weight", h),
			{suffix: "pooler.dense.weight", shape: shp(h, h)},
			{suffix: "cls.predictions.bias", shape: shp(v)},
		}
	}
	return rules, head, layers, nil
}
