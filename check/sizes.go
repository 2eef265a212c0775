package check

import (
	"cmp"
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

// roleNames returns the names of the keys of a role of sizeKeys.
func roleNames(role string) []string {
	for _, sk := range sizeKeys {
		if sk.role == role {
			return sk.names
		}
	}
	return nil
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
	vocabRef []info          // tables and heads that would have vocab_size rows
	heads    []info          // output heads: their rows are the logits
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
		if table, head := isTokenTable(t.Name, t.Shape); table {
			w.vocabRef = append(w.vocabRef, t)
			if head {
				w.heads = append(w.heads, t)
			}
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

// isTokenTable reports whether a tensor is a token embedding table or an
// output head, whose rows are the vocabulary, from the name of its module
// ("embed_tokens", "word_embeddings", "wte", "lm_head", a CTC head's "out",
// ...): not a table of positions, token types, segments or patches. A
// table is 2-D ("weight", or a bare "embedding"); a head may also be a
// 1x1 convolution ([vocab, width, 1]) or its bias. head reports an output
// head: its rows are the logits, which the vocabulary must not outnumber.
func isTokenTable(name string, shape []uint64) (table, head bool) {
	segs := strings.Split(strings.ToLower(name), ".")
	if len(segs) < 2 {
		return false, false
	}
	last, mod := segs[len(segs)-1], segs[len(segs)-2]
	head = role.IsHead(strings.Join(segs[:len(segs)-1], ".")) || slices.Contains([]string{"lm_head", "ctc", "ctc_head", "output_layer"}, mod)
	switch {
	case last == "weight" && len(shape) == 2, strings.HasSuffix(last, "embedding") && len(shape) == 2:
	case head && last == "weight" && len(shape) == 3 && shape[2] == 1, head && last == "bias" && len(shape) == 1:
	default:
		return false, false
	}
	for _, w := range []string{"pos", "patch", "type", "class", "norm", "rel", "bucket", "speaker", "lang", "segment", "task", "spk", "image", "vision", "audio", "per_layer", "proj"} {
		if strings.Contains(mod, w) {
			return false, false
		}
	}
	switch mod {
	case "wte", "shared", "lm_head", "embed", "embeddings", "embedding", "embed_in", "embed_out", "input_embedding", "out", "ctc", "ctc_head", "output_layer":
		return true, head
	}
	return head || strings.Contains(mod, "tok") || strings.Contains(mod, "word") || strings.Contains(mod, "vocab"), head
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
		// The stacks whose blocks number one of the configuration's layer
		// counts are the ones it may describe: its hidden size is the
		// width of one of them, not merely that of some normalization
		// elsewhere (a feature extractor's, a stream concatenated to twice
		// the width). A hierarchy's stages (depths) have widths of their
		// own. A stack whose tensors have no dimension above 1 shows no
		// width, and judges none.
		var own []*stack
		_, hierarchical := c["depths"].([]any)
		for _, name := range roleNames("layers") {
			if hierarchical {
				break
			}
			if n, ok := positive(c[name]); ok {
				for _, s := range st.stacks {
					if !s.nested && !s.modules && !s.named && uint64(s.n) == n && !slices.Contains(own, s) && len(stackWidths(s)) > 0 {
						own = append(own, s)
					}
				}
			}
		}
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
					if len(own) > 0 {
						cl.judged, cl.seen = true, false
						for _, s := range own {
							cl.seen = cl.seen || slices.Contains(stackWidths(s), v)
						}
					}
				case "vocab":
					// A table may have more rows than the vocabulary
					// (padded to a multiple, or extra tokens), not fewer.
					// An output head's rows are the logits: the
					// vocabulary has no more tokens than it.
					cl.judged = len(w.vocabRef) > 0
					for _, t := range w.vocabRef {
						cl.seen = cl.seen || t.Shape[0] >= v
					}
					if len(w.heads) > 0 && !slices.ContainsFunc(w.heads, func(t info) bool { return t.Shape[0] >= v }) {
						cl.seen = false
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
		// A nested configuration none of whose sizes the weights show is
		// of a part not in them. The top one is the model's own: its
		// vocabulary is still judged by the token tables, and its hidden
		// size, where the weights have a single width, by every tensor;
		// its other sizes may be of parts not saved (a head) or figures of
		// no tensor (the unused hidden_size of a CNN), and are doubtful.
		if !active {
			if ci > 0 {
				continue
			}
			for i, cl := range claims {
				if cl.role == "hidden" {
					claims[i].seen = w.dims[cl.v]
				}
				claims[i].doubt = cl.doubt || cl.role != "vocab" && !(cl.role == "hidden" && len(mergeSets(w.norms, w.embeds)) == 1)
			}
		}
		// A composite configuration's own sizes (CLAP's, beside its
		// text_config and audio_config) are often those of no part: one
		// whose text model is a part of its own, with its vocabulary.
		// One with towers only beside it (GIT's vision_config) is the
		// text model's.
		composite := false
		for cj := ci + 1; cj < len(cfgs); cj++ {
			if strings.HasPrefix(paths[cj], paths[ci]) {
				_, hasType := cfgs[cj]["model_type"]
				hasVocab := slices.ContainsFunc(roleNames("vocab"), func(k string) bool { _, ok := cfgs[cj][k]; return ok })
				composite = composite || hasType && hasVocab
			}
		}
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
			f := sizeFinding(cl.key, cl.role, cl.v, w, st, own)
			if cl.role == "layers" && gappedStack(st, cl.v, &f) {
				out = append(out, f)
				continue
			}
			if cl.seen {
				continue
			}
			switch {
			case cl.doubt, composite && cl.role != "vocab",
				cl.role == "layers" && (otherLayers(strings.TrimPrefix(cl.key, paths[ci])) || hasList(c, cl.v)),
				cl.role == "hidden" && (hierarchical):
				f.Severity = Warning
			}
			out = append(out, f)
		}
	}
	return checked, out
}

// stackWidths returns the widths a stack of blocks may have: the lengths
// of its blocks' 1-D normalization weights, but for batch norms (a
// convolution's channels, not the residual width), and its blocks' most
// common dimension (the residual width, where the norms are of other
// widths: of queries and keys, of a concatenation), that first; none for
// a stack without tensors of more than one element.
func stackWidths(s *stack) []uint64 {
	var norms []uint64
	dims := map[uint64]int{}
	for _, b := range s.blocks {
		for suf, t := range b {
			for _, d := range t.Shape {
				if d > 1 {
					dims[d]++
				}
			}
			mod := suf[:strings.LastIndexByte(suf, '.')+1]
			if len(t.Shape) == 1 && t.Shape[0] > 1 && role.IsNorm(role.Module("x."+suf)) && b[mod+"running_mean"].Shape == nil {
				norms = append(norms, t.Shape[0])
			}
		}
	}
	var out []uint64
	if len(dims) > 0 {
		out = append(out, mostCommon(dims))
	}
	slices.Sort(norms)
	return append(out, slices.Compact(norms)...)
}

// gappedStack reports whether an outermost stack of blocks is numbered
// 0..n-1 with blocks missing, n the layer count of the configuration, and
// if so makes f say which.
func gappedStack(st structureResult, n uint64, f *Finding) bool {
	for _, s := range st.stacks {
		if !s.nested && !s.modules && !s.mixed && !s.named && gapped(s, n, f) {
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

// sizeFinding says why a size is not the weights', naming a tensor that
// shows the real one: for a hidden size, one of own, the stacks of the
// configuration's layer count, where there are any.
func sizeFinding(key, sizeRole string, v uint64, w *witnesses, st structureResult, own []*stack) Finding {
	f := Finding{Severity: Error, Kind: KindConfig, Key: key}
	sizes := func(m map[uint64]bool) string {
		ks := slices.Sorted(maps.Keys(m))
		if len(ks) > 8 {
			ks = ks[:8]
		}
		return strings.Trim(fmt.Sprint(ks), "[]")
	}
	switch {
	case sizeRole == "layers":
		if s := st.main(); s != nil {
			f.Block = s.prefix
			f.Message = fmt.Sprintf("%s = %d, but no list in the weights has %d entries (%s has %d blocks)", key, v, v, s.prefix, s.n)
		} else {
			f.Message = fmt.Sprintf("%s = %d, but no list in the weights has %d entries", key, v, v)
		}
	case sizeRole == "hidden" && len(own) > 0 && len(stackWidths(own[0])) > 0:
		s := own[0]
		width := stackWidths(s)[0]
		f.Block = s.prefix
		// A normalization of that width names it best, else any tensor.
		var ref info
		refNorm := false
		for _, i := range slices.Sorted(maps.Keys(s.blocks)) {
			for _, suf := range slices.Sorted(maps.Keys(s.blocks[i])) {
				t := s.blocks[i][suf]
				norm := len(t.Shape) == 1 && role.IsNorm(role.Module(t.Name))
				if slices.Contains(t.Shape, width) && (ref.Name == "" || norm && !refNorm) {
					ref, refNorm = t, norm
				}
			}
		}
		f.Tensor = ref.Name
		f.Message = fmt.Sprintf("%s = %d, but the %d blocks of %s are %d wide (%s has shape %v)", key, v, s.n, s.prefix, width, ref.Name, ref.Shape)
	case sizeRole == "hidden" && len(w.widthRef) > 0:
		ref := w.widthRef[0]
		f.Tensor = ref.Name
		f.Message = fmt.Sprintf("%s = %d, but no normalization or embedding has that width (%s has shape %v; the widths are %s)", key, v, ref.Name, ref.Shape, sizes(mergeSets(w.norms, w.embeds)))
	case sizeRole == "hidden":
		f.Message = fmt.Sprintf("%s = %d, but no normalization or embedding has that width", key, v)
	case sizeRole == "vocab" && len(w.vocabRef) > 0:
		// The output head, whose rows the vocabulary outnumbers, else the
		// largest token table.
		what, refs := "output head", w.heads
		if len(refs) == 0 || slices.ContainsFunc(refs, func(t info) bool { return t.Shape[0] >= v }) {
			what, refs = "token table", w.vocabRef
		}
		t := slices.MaxFunc(refs, func(a, b info) int {
			return cmp.Or(cmp.Compare(a.Shape[0], b.Shape[0]), cmp.Compare(len(a.Shape), len(b.Shape)))
		})
		f.Tensor = t.Name
		f.Message = fmt.Sprintf("%s = %d, but the %s %s has %d rows (shape %v)", key, v, what, t.Name, t.Shape[0], t.Shape)
	case sizeRole == "intermediate":
		f.Message = fmt.Sprintf("%s = %d, but no MLP weight has that size (they have %s)", key, v, sizes(w.mlp))
	}
	return f
}

func mergeSets(a, b map[uint64]bool) map[uint64]bool {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}
