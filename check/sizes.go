package check

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors/internal/role"
)

// sizeKeys are the figures of a configuration that the general rule
// checks against the weights, each under the names transformers'
// configurations store it as (the targets of their attribute_map: GPT-2's
// n_embd, BART's d_model, T5's num_layers, ...).
var sizeKeys = []struct {
	role  string
	names []string
}{
	{"layers", []string{"num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers", "num_encoder_layers", "num_decoder_layers"}},
	{"hidden", []string{"hidden_size", "n_embd", "n_embed", "d_model", "dim", "model_dim"}},
	{"vocab", []string{"vocab_size", "n_vocab"}},
	{"intermediate", []string{"intermediate_size", "n_inner", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim", "ffn_hidden_size"}},
}

// subConfigs returns the configuration and those nested in it (text_config,
// vision_config, audio_config, encoder, decoder, ...), each with the path
// of its keys ("" for the top, "text_config." for a nested one).
func subConfigs(m map[string]any) (paths []string, cfgs []map[string]any) {
	var walk func(prefix string, m map[string]any, depth int)
	walk = func(prefix string, m map[string]any, depth int) {
		paths, cfgs = append(paths, prefix), append(cfgs, m)
		if depth == 3 {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if sub, ok := m[k].(map[string]any); ok && k != "quantization_config" {
				walk(prefix+k+".", sub, depth+1)
			}
		}
	}
	walk("", m, 0)
	return paths, cfgs
}

func positive(v any) (uint64, bool) {
	f, ok := v.(float64)
	if !ok || f < 1 || f != math.Trunc(f) || f >= 1<<53 {
		return 0, false
	}
	return uint64(f), true
}

// witnesses is what the weights say of the sizes a configuration may give.
type witnesses struct {
	dims     map[uint64]bool // every dimension of every tensor
	norms    map[uint64]bool // the sizes of 1-D normalization weights
	embeds   map[uint64]bool // the widths of embedding tables
	mlp      map[uint64]bool // the dimensions of dense MLP weights
	lists    map[uint64]bool // the lengths of numbered lists (x.0, x.1, ...)
	vocabRef []info          // tables that would have vocab_size rows
	widthRef []info          // a normalization and an embedding, to name
	stacks   []*stack
	blocks   bool // a stack of 2 or more blocks
}

func newWitnesses(infos []info, st structureResult) *witnesses {
	w := &witnesses{dims: map[uint64]bool{}, norms: map[uint64]bool{}, embeds: map[uint64]bool{}, mlp: map[uint64]bool{}, lists: map[uint64]bool{}, stacks: st.stacks}
	listMax := map[string]int{}
	listCount := map[string]map[int]bool{}
	for _, t := range infos {
		for _, d := range t.Shape {
			w.dims[d] = true
		}
		lower := strings.ToLower(t.Name)
		segs := strings.Split(t.Name, ".")
		if len(t.Shape) == 1 && role.IsNorm(role.Module(t.Name)) {
			if len(w.norms) == 0 {
				w.widthRef = append(w.widthRef, t)
			}
			w.norms[t.Shape[0]] = true
		}
		if len(t.Shape) == 2 && role.InEmbedding(t.Name) {
			if len(w.embeds) == 0 {
				w.widthRef = append(w.widthRef, t)
			}
			w.embeds[t.Shape[1]] = true
		}
		if len(t.Shape) == 2 && isTokenTable(t.Name) {
			w.vocabRef = append(w.vocabRef, t)
		}
		if len(t.Shape) == 2 && !strings.Contains(lower, "expert") && isMLP(lower) {
			w.mlp[t.Shape[0]] = true
			w.mlp[t.Shape[1]] = true
		}
		for i := 1; i < len(segs); i++ {
			n, err := strconv.Atoi(segs[i])
			if err != nil || n < 0 {
				continue
			}
			p := strings.Join(segs[:i], ".")
			listMax[p] = max(listMax[p], n+1)
			if listCount[p] == nil {
				listCount[p] = map[int]bool{}
			}
			listCount[p][n] = true
		}
	}
	stacks := map[string]bool{}
	for _, s := range st.stacks {
		stacks[s.prefix] = true
		w.lists[uint64(s.n)] = true
		w.blocks = w.blocks || !s.modules && s.n >= 2
	}
	// Other numbered lists (experts, a Sequential's modules) count by
	// their entries and by their numbering, which may skip the modules
	// without parameters; a stack of blocks counts by its blocks alone.
	for p, m := range listMax {
		if !stacks[p] {
			w.lists[uint64(m)] = true
			w.lists[uint64(len(listCount[p]))] = true
		}
	}
	return w
}

// isTokenTable reports whether a 2-D tensor is a token embedding table or
// an output head, whose rows are the vocabulary, from the name of its
// module ("embed_tokens", "word_embeddings", "wte", "lm_head", a CTC
// head's "out", ...): not a table of positions, token types, segments or
// patches.
func isTokenTable(name string) bool {
	segs := strings.Split(strings.ToLower(name), ".")
	if len(segs) < 2 || segs[len(segs)-1] != "weight" {
		return false
	}
	mod := segs[len(segs)-2]
	for _, w := range []string{"pos", "patch", "type", "class", "norm", "rel", "bucket", "speaker", "lang", "segment", "task", "spk", "image", "vision", "audio", "per_layer", "proj"} {
		if strings.Contains(mod, w) {
			return false
		}
	}
	switch mod {
	case "wte", "shared", "lm_head", "embed", "embeddings", "embedding", "embed_in", "embed_out", "input_embedding", "out", "ctc", "ctc_head", "output_layer":
		return true
	}
	return strings.Contains(mod, "tok") || strings.Contains(mod, "word") || strings.Contains(mod, "vocab")
}

// isMLP reports whether a tensor's name is that of a dense MLP's weight.
func isMLP(lower string) bool {
	for _, w := range []string{"mlp.", "ffn.", "feed_forward", "intermediate.dense", "output.dense", ".fc1.", ".fc2.", "up_proj", "down_proj", "gate_proj", ".wi.", ".wo.", "c_fc", "dense_h_to_4h", "dense_4h_to_h", "densereludense"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// checkSizes is the general rule: the sizes that any configuration and its
// sub-configurations give (the layer count, the hidden size, the
// vocabulary, the MLP's width) must be sizes the weights have, where the
// weights have something of that role: a list of that many blocks, a
// normalization or embedding of that width, a token table of that many
// rows, an MLP weight of that size. A sub-configuration none of whose
// sizes the weights show is of a part that is not in them (a vision tower
// of a model saved without it) and is left out. It returns the keys
// checked and the findings.
func checkSizes(m map[string]any, infos []info, st structureResult) (checked []string, out []Finding) {
	w := newWitnesses(infos, st)
	var gaps []Finding
	defer func() {
		// One finding for a gap, however many keys show it.
		for _, g := range gaps {
			dup := false
			for _, f := range out {
				dup = dup || f.Block == g.Block && strings.Contains(f.Message, " missing: ")
			}
			if !dup {
				out = append(out, g)
			}
		}
	}()
	paths, cfgs := subConfigs(m)
	for ci, c := range cfgs {
		type claim struct {
			key, role string
			v         uint64
			seen      bool // the weights show it
			judged    bool // the weights have something of its role
			doubt     bool // the configuration itself says the size is not the weights'
		}
		var claims []claim
		active := false
		for _, sk := range sizeKeys {
			for _, name := range sk.names {
				v, ok := positive(c[name])
				if !ok {
					continue
				}
				cl := claim{key: paths[ci] + name, role: sk.role, v: v}
				switch sk.role {
				case "layers":
					cl.judged, cl.seen = w.blocks, w.lists[v]
				case "hidden":
					cl.judged, cl.seen = len(w.norms)+len(w.embeds) > 0, w.norms[v] || w.embeds[v]
				case "vocab":
					// A table may have more rows than the vocabulary
					// (padded to a multiple, or extra tokens), not fewer.
					cl.judged = len(w.vocabRef) > 0
					for _, t := range w.vocabRef {
						cl.seen = cl.seen || t.Shape[0] >= v
					}
				case "intermediate":
					// MoE layers and computed widths make this one a
					// warning.
					cl.judged, cl.seen, cl.doubt = len(w.mlp) > 0, w.mlp[v] || w.mlp[2*v], true
				}
				active = active || cl.seen
				claims = append(claims, cl)
			}
		}
		// The layer lists count layers too, for the gaps they show.
		for k, n := range layerLists(c) {
			f := Finding{Severity: Error, Kind: KindConfig, Key: paths[ci] + k}
			if gappedStack(st, n, &f) {
				f.Message = strings.Replace(f.Message, fmt.Sprintf("%s = %d", f.Key, n), fmt.Sprintf("%s has %d entries", f.Key, n), 1)
				gaps = append(gaps, f)
			}
		}
		if !active {
			continue
		}
		// A composite configuration's own sizes (CLAP's, beside its
		// text_config and audio_config) are often those of no part.
		composite := false
		for cj := ci + 1; cj < len(cfgs); cj++ {
			if strings.HasPrefix(paths[cj], paths[ci]) {
				_, hasType := cfgs[cj]["model_type"]
				composite = composite || hasType
			}
		}
		_, hierarchical := c["depths"].([]any)
		// Another count of layers in the configuration that is the main
		// stack's (Blenderbot's decoder_layers beside an encoder_layers
		// of a part not in the weights, HRM's num_layers_per_stack).
		otherLayers := func(key string) bool {
			main := st.main()
			if main == nil {
				return false
			}
			for k, v := range c {
				n, ok := positive(v)
				if ok && k != key && n == uint64(main.n) && isLayerCount(k) {
					return true
				}
			}
			return false
		}
		for _, cl := range claims {
			if !cl.judged {
				continue
			}
			checked = append(checked, cl.key)
			f := sizeFinding(cl.key, cl.role, cl.v, w, st)
			if cl.role == "layers" && gappedStack(st, cl.v, &f) {
				out = append(out, f)
				continue
			}
			if cl.seen {
				continue
			}
			switch {
			case cl.doubt, composite,
				cl.role == "layers" && (otherLayers(strings.TrimPrefix(cl.key, paths[ci])) || hasList(c, cl.v)),
				cl.role == "hidden" && (hierarchical):
				f.Severity = Warning
			}
			out = append(out, f)
		}
	}
	return checked, out
}

// gappedStack reports whether an outermost stack of blocks is numbered
// 0..n-1 with blocks missing, n the layer count of the configuration, and
// if so makes f say which.
func gappedStack(st structureResult, n uint64, f *Finding) bool {
	for _, s := range st.stacks {
		if !s.nested && !s.modules && !s.named && gapped(s, n, f) {
			return true
		}
	}
	return false
}

func gapped(s *stack, n uint64, f *Finding) bool {
	first, last := slices.Min(slices.Collect(maps.Keys(s.blocks))), slices.Max(slices.Collect(maps.Keys(s.blocks)))
	if uint64(last)+1 != n || uint64(s.n) == n || uint64(last-first+1) == uint64(s.n) {
		return false // no gap between the blocks: an nn.Sequential's first modules without parameters
	}
	var missing []string
	for i := first; i < last && len(missing) < 10; i++ {
		if s.blocks[i] == nil {
			missing = append(missing, s.block(i))
		}
	}
	f.Block = s.prefix
	f.Message = fmt.Sprintf("%s missing: %s = %d, but %s has %d blocks", strings.Join(missing, ", "), f.Key, n, s.entries(), s.n)
	return true
}

// layerLists returns the keys of a configuration that describe its layers
// one entry a layer (layer_types, layers_block_type, depths,
// hybrid_override_pattern, ...), with their lengths: layer counts of their
// own where the configuration has no num_hidden_layers.
func layerLists(c map[string]any) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range c {
		if !strings.Contains(k, "layer") && !strings.Contains(k, "depth") && !strings.Contains(k, "pattern") && !strings.Contains(k, "block_type") {
			continue
		}
		switch l := v.(type) {
		case []any:
			if len(l) > 1 {
				out[k] = uint64(len(l))
			}
		case string:
			if strings.Contains(k, "pattern") && len(l) > 1 {
				out[k] = uint64(len(l))
			}
		}
	}
	return out
}

// hasList reports whether a configuration has a list of n entries, such
// as layer_types or a hybrid pattern ("M-M*"): a configuration that
// describes n layers, whatever the weights number.
func hasList(c map[string]any, n uint64) bool {
	for k, v := range c {
		if l, ok := v.([]any); ok && uint64(len(l)) == n {
			return true
		}
		if l, ok := v.(string); ok && uint64(len(l)) == n && n > 1 && (strings.Contains(k, "pattern") || strings.Contains(k, "layer")) {
			return true
		}
	}
	return false
}

// isLayerCount reports whether a configuration key counts layers
// ("num_layers_per_stack", "decoder_layers"), rather than spacing them
// ("global_attn_every_n_layers").
func isLayerCount(k string) bool {
	if !strings.Contains(k, "layers") {
		return false
	}
	for _, w := range []string{"every", "freq", "period", "step", "interval", "window"} {
		if strings.Contains(k, w) {
			return false
		}
	}
	return true
}

func sizeFinding(key, role string, v uint64, w *witnesses, st structureResult) Finding {
	f := Finding{Severity: Error, Kind: KindConfig, Key: key}
	sizes := func(m map[uint64]bool) string {
		ks := slices.Sorted(maps.Keys(m))
		if len(ks) > 8 {
			ks = ks[:8]
		}
		return strings.Trim(fmt.Sprint(ks), "[]")
	}
	switch role {
	case "layers":
		if s := st.main(); s != nil {
			f.Block = s.prefix
			f.Message = fmt.Sprintf("%s = %d, but no list in the weights has %d entries (%s has %d blocks)", key, v, v, s.prefix, s.n)
		} else {
			f.Message = fmt.Sprintf("%s = %d, but no list in the weights has %d entries", key, v, v)
		}
	case "hidden":
		ref := w.widthRef[0]
		f.Tensor = ref.Name
		f.Message = fmt.Sprintf("%s = %d, but no normalization or embedding has that width (%s has shape %v; the widths are %s)", key, v, ref.Name, ref.Shape, sizes(mergeSets(w.norms, w.embeds)))
	case "vocab":
		t := w.vocabRef[0]
		f.Tensor = t.Name
		f.Message = fmt.Sprintf("%s = %d, but no tensor has that many rows or columns; the token table %s has shape %v", key, v, t.Name, t.Shape)
	case "intermediate":
		f.Message = fmt.Sprintf("%s = %d, but no MLP weight has that size (they have %s)", key, v, sizes(w.mlp))
	}
	return f
}

func mergeSets(a, b map[uint64]bool) map[uint64]bool {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}
