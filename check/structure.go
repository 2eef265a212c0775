package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/role"
)

// containers are the names under which models number their blocks:
// model.layers.N, h.N, transformer.h.N, blocks.N, encoder.layer.N,
// model.decoder.layers.N, encoder.block.N, ...
var containers = map[string]bool{"layers": true, "layer": true, "h": true, "blocks": true, "block": true}

// A stack is a sequence of numbered blocks under one prefix, such as
// "model.layers", or "encoder.layers.2.blocks" inside a stage of a
// hierarchical model.
type stack struct {
	prefix string
	blocks map[int]map[string]info // block number → suffix → tensor
	n      int                     // the number of blocks present
	nested bool                    // inside a block of another stack, or of any numbered list
	// modules is set for a list of single modules ("layers.0.weight",
	// "layers.0.bias"), which is not a stack of blocks: its entries are
	// different layers.
	modules bool
}

// block returns the name of block i: "model.layers.3".
func (s *stack) block(i int) string { return s.prefix + "." + strconv.Itoa(i) }

type structureResult struct {
	stacks   []*stack // by prefix
	findings []Finding
}

// main returns the outermost stack of blocks with the most blocks, or
// nil; a list of single modules only where there is no stack of blocks.
func (r structureResult) main() *stack {
	var best *stack
	for _, s := range r.stacks {
		if !s.nested && (best == nil || best.modules && !s.modules || best.modules == s.modules && s.n > best.n) {
			best = s
		}
	}
	return best
}

// splitBlock splits a tensor name at its first numbered block: the prefix
// ("model.layers"), the number's text and the suffix
// ("self_attn.q_proj.weight").
func splitBlock(name string) (prefix, num, suffix string, ok bool) {
	splits := splitBlocks(name, 1)
	if len(splits) == 0 {
		return "", "", "", false
	}
	return splits[0].prefix, splits[0].num, splits[0].suffix, true
}

type split struct{ prefix, num, suffix string }

// splitBlocks splits a tensor name at each of its numbered blocks, the
// outermost first, at most max of them. A number right after a block's
// number is a block too: SegFormer's encoder.block.1.0 is block 0 of
// stage 1.
func splitBlocks(name string, max int) []split {
	var out []split
	segs := strings.Split(name, ".")
	for i := 1; i+1 < len(segs) && len(out) < max; i++ {
		inner := len(out) > 0 // a numbered list inside a block: experts.N, stage.N.M
		if (containers[segs[i-1]] || inner) && segs[i] != "" && strings.Trim(segs[i], "0123456789") == "" {
			out = append(out, split{strings.Join(segs[:i], "."), segs[i], strings.Join(segs[i+1:], ".")})
		}
	}
	return out
}

// structure groups the tensors by block, at every level of nesting, and
// judges each stack of blocks as its model makes it: blocks of several
// kinds (attention and SSM or convolution mixers, MoE and dense MLPs,
// cross-attention in some layers), tensors in the first or last block
// only, and stages of a hierarchy whose shapes grow from stage to stage
// are all healthy. What it reports is what the rest of the stack shows to
// be a defect: a block that lacks one tensor that blocks otherwise like it
// have, a tensor whose shape or dtype differs from that of the other
// blocks where nothing else in its block does, a tensor transposed, and a
// gap in the numbering of blocks alike.
func structure(infos []info) structureResult {
	var res structureResult
	byPrefix := map[string]*stack{}
	embedNorm := false // a norm of the embeddings, outside the blocks
	for _, t := range infos {
		if _, _, _, ok := splitBlock(t.Name); !ok && role.InEmbedding(t.Name) && role.IsNorm(role.Module(t.Name)) {
			embedNorm = true
		}
		for depth, sp := range splitBlocks(t.Name, 4) {
			i, err := strconv.Atoi(sp.num)
			if err != nil || strconv.Itoa(i) != sp.num {
				if depth == 0 {
					res.findings = append(res.findings, Finding{Severity: Error, Kind: KindStructure, Tensor: t.Name,
						Message: fmt.Sprintf("block number %q is not a number written without leading zeros", sp.num)})
				}
				break
			}
			s := byPrefix[sp.prefix]
			if s == nil {
				s = &stack{prefix: sp.prefix, blocks: map[int]map[string]info{}, nested: depth > 0 || numbered(sp.prefix)}
				byPrefix[sp.prefix] = s
			}
			if s.blocks[i] == nil {
				s.blocks[i] = map[string]info{}
				s.n++
			}
			s.blocks[i][sp.suffix] = t
		}
	}
	for _, p := range slices.Sorted(maps.Keys(byPrefix)) {
		s := byPrefix[p]
		s.modules = true
		for _, b := range s.blocks {
			for suf := range b {
				s.modules = s.modules && !strings.Contains(suf, ".")
			}
		}
		res.stacks = append(res.stacks, s)
		res.findings = append(res.findings, s.check(embedNorm)...)
	}
	return res
}

// numbered reports whether a name has a numbered segment ("heads.2.layers").
func numbered(name string) bool {
	for _, seg := range strings.Split(name, ".") {
		if seg != "" && strings.Trim(seg, "0123456789") == "" {
			return true
		}
	}
	return false
}

// variant is a tensor's dtype and shape.
type variant struct {
	dtype safetensors.DType
	shape string
}

func variantOf(t info) variant { return variant{t.DType, fmt.Sprint(t.Shape)} }

// check judges the stack; embedNorm says whether the model normalizes
// its embeddings, so that its first block may go without a norm.
func (s *stack) check(embedNorm bool) []Finding {
	nums := slices.Sorted(maps.Keys(s.blocks))
	first, last := nums[0], nums[len(nums)-1]

	// The blocks' kinds, as far as the names tell: blocks with the same
	// tensors are of one kind.
	sig := map[int]string{}
	for _, i := range nums {
		sig[i] = strings.Join(slices.Sorted(maps.Keys(s.blocks[i])), "\x00")
	}
	var out []Finding
	out = append(out, s.gaps(nums, sig)...)
	out = append(out, s.missing(nums, first, last, embedNorm)...)
	out = append(out, s.shapes(nums)...)
	return out
}

// gaps reports block numbers missing between blocks alike (the same
// tensors, dtypes and shapes). A gap between blocks that differ is how
// nn.Sequential numbers modules without parameters (activations between
// convolutions of other sizes), and so is any gap in a list of single
// modules ("layers.0.weight", "layers.2.weight"). A block
// missing between blocks of different kinds goes unreported here; the
// layer count of config.json finds it.
func (s *stack) gaps(nums []int, sig map[int]string) []Finding {
	if s.modules {
		return nil
	}
	var missing []string
	for j := 1; j < len(nums) && len(missing) <= 10; j++ {
		a, b := nums[j-1], nums[j]
		if b == a+1 || !s.alike(a, b, sig) {
			continue
		}
		for i := a + 1; i < b && len(missing) <= 10; i++ {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Finding{{Severity: Error, Kind: KindStructure, Block: s.prefix,
		Message: fmt.Sprintf("blocks %s.N run from %d to %d but block(s) %s are missing", s.prefix, nums[0], nums[len(nums)-1], strings.Join(missing, ", "))}}
}

// alike reports whether blocks a and b hold the same tensors, of the same
// dtypes and shapes.
func (s *stack) alike(a, b int, sig map[int]string) bool {
	if sig[a] != sig[b] {
		return false
	}
	for suf, t := range s.blocks[a] {
		if variantOf(t) != variantOf(s.blocks[b][suf]) {
			return false
		}
	}
	return true
}

// missing reports the blocks that lack one tensor which blocks otherwise
// like them have. A block of a kind of its own (its tensors those of no
// other block) is compared with the blocks whose tensors include all of
// its own; when they have just one tensor more, that tensor is missing.
// Blocks of other kinds (an attention layer among SSM layers, a dense MLP
// among MoE layers) have tensors the others lack, and blocks without a
// whole module that others have (cross-attention every other layer, a
// stage without downsampling) lack more than one, so neither is reported.
// Three cases stay warnings, since models do them: a first block
// without a norm that the others have (the first layer of a pre-norm
// model whose input is already normalized), a block lacking a whole
// module that only the first or last block has (T5's relative attention
// bias in a two-block stack), and a first block without a scale or state
// vector of its own (a router scaling the state of the previous layer).
func (s *stack) missing(nums []int, first, last int, embedNorm bool) []Finding {
	reported := map[int]bool{}
	out := s.lacking(nums, first, last, embedNorm, reported, false, func(b int) map[string]info { return s.blocks[b] })
	// Then module by module (self_attn, mlp, ...), for a block of a kind of
	// its own whose module is like the same module of other blocks: an MoE
	// layer among dense ones whose attention lacks a projection.
	mods := map[string]bool{}
	for _, b := range s.blocks {
		for suf := range b {
			if i := strings.IndexByte(suf, '.'); i > 0 {
				mods[suf[:i+1]] = true
			}
		}
	}
	for _, m := range slices.Sorted(maps.Keys(mods)) {
		var have []int
		for _, b := range nums {
			for suf := range s.blocks[b] {
				if strings.HasPrefix(suf, m) {
					have = append(have, b)
					break
				}
			}
		}
		out = append(out, s.lacking(have, first, last, embedNorm, reported, true, func(b int) map[string]info {
			sub := map[string]info{}
			for suf, t := range s.blocks[b] {
				if strings.HasPrefix(suf, m) {
					sub[suf] = t
				}
			}
			return sub
		})...)
	}
	return out
}

// lacking reports the blocks among nums whose tensors, as view shows them,
// are those of no other block and those of other blocks but one. With
// sameShapes, only where the tensors they have in common have the same
// dtypes and shapes. A block reported is not reported again.
func (s *stack) lacking(nums []int, first, last int, embedNorm bool, reported map[int]bool, sameShapes bool, view func(int) map[string]info) []Finding {
	views := map[int]map[string]info{}
	sig := map[int]string{}
	group := map[string][]int{}
	for _, b := range nums {
		views[b] = view(b)
		sig[b] = strings.Join(slices.Sorted(maps.Keys(views[b])), "\x00")
		group[sig[b]] = append(group[sig[b]], b)
	}
	var out []Finding
	for _, b := range nums {
		if len(group[sig[b]]) > 1 || reported[b] {
			continue
		}
		own := views[b]
		var peer []int // the blocks of the closest superset
		var extra string
		for k, g := range group {
			other := views[g[0]]
			if len(other) != len(own)+1 || k == sig[b] {
				continue
			}
			var d []string
			for suf, t := range other {
				o, ok := own[suf]
				switch {
				case !ok:
					d = append(d, suf)
				case sameShapes && variantOf(o) != variantOf(t):
					d = append(d, suf, suf) // not alike
				}
			}
			if len(d) != 1 {
				continue
			}
			if peer == nil || len(g) > len(peer) || len(g) == len(peer) && d[0] < extra {
				peer, extra = g, d[0]
			}
		}
		if peer == nil {
			continue
		}
		reported[b] = true
		holders := 0
		for _, i := range nums {
			if _, ok := views[i][extra]; ok {
				holders++
			}
		}
		whole := !hasModule(s.blocks[b], extra)
		sev := Error
		switch {
		case whole && b == first && embedNorm && role.IsNorm(role.Module(extra)),
			whole && len(peer) == 1 && (peer[0] == first || peer[0] == last),
			b == first && isBare(extra, views[peer[0]][extra]):
			sev = Warning
		}
		out = append(out, Finding{Severity: sev, Kind: KindStructure, Block: s.block(b),
			Message: fmt.Sprintf("lacks %s.%d.%s, which %d of the %d blocks have", s.prefix, b, extra, holders, len(s.blocks))})
	}
	return out
}

// hasModule reports whether a block holds another tensor of the module
// that holds suffix ("self_attn.q_proj.bias" for "self_attn.q_proj.weight",
// or "self_attn.k_proj.weight" for "self_attn.q_proj.weight" when the
// projection has no bias).
func hasModule(own map[string]info, suffix string) bool {
	for dir := suffix; ; {
		i := strings.LastIndexByte(dir, '.')
		if i < 0 {
			return false
		}
		dir = dir[:i]
		for suf := range own {
			if strings.HasPrefix(suf, dir+".") {
				return true
			}
		}
	}
}

// isBare reports whether a tensor is a parameter of its own, not the
// weight or bias of a layer, of at most one dimension: a scale, a gate.
func isBare(suffix string, t info) bool {
	last := suffix[strings.LastIndexByte(suffix, '.')+1:]
	return last != "weight" && last != "bias" && len(t.Shape) <= 1
}

// shapes reports, per tensor name, a block whose tensor has another dtype
// than in the other blocks, is transposed, or has another shape where
// nothing else of its block differs from the other blocks. Shapes that
// differ in several tensors of a block are a kind of their own (a global
// attention layer among sliding-window ones, the stages of a hierarchy).
// A convolution's kernel of another shape alone is a warning: the first
// block of a stage takes the previous stage's channels. In a list of
// single modules (an MLP's layers.0 and layers.1, whose shapes may well be
// each other's reversed) only dtypes are compared.
func (s *stack) shapes(nums []int) []Finding {
	suffixes := map[string][]int{}
	for _, i := range nums {
		for suf := range s.blocks[i] {
			suffixes[suf] = append(suffixes[suf], i)
		}
	}
	// For each suffix, its most common variant (ties go to the lowest
	// block) and how many blocks have it.
	type common struct {
		v     variant
		count int
		of    int
	}
	majority := map[string]common{}
	for suf, have := range suffixes {
		slices.Sort(have)
		count := map[variant]int{}
		firstAt := map[variant]int{}
		for _, i := range have {
			v := variantOf(s.blocks[i][suf])
			if count[v] == 0 {
				firstAt[v] = i
			}
			count[v]++
		}
		vs := slices.Collect(maps.Keys(count))
		slices.SortFunc(vs, func(a, b variant) int {
			return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(firstAt[a], firstAt[b]))
		})
		majority[suf] = common{vs[0], count[vs[0]], len(have)}
	}
	// deviates counts, per block, its tensors unlike the majority.
	deviates := map[int]int{}
	for suf, have := range suffixes {
		m := majority[suf]
		for _, i := range have {
			if variantOf(s.blocks[i][suf]) != m.v {
				deviates[i]++
			}
		}
	}
	var out []Finding
	for _, suf := range slices.Sorted(maps.Keys(suffixes)) {
		have := suffixes[suf]
		m := majority[suf]
		if len(have) == 2 && m.count == 1 && !s.modules {
			out = append(out, s.transposedPair(suf, have)...)
			continue
		}
		if m.count == len(have) || m.count < 2 {
			continue
		}
		for _, i := range have {
			t := s.blocks[i][suf]
			v := variantOf(t)
			if v == m.v {
				continue
			}
			var why string
			sev := Error
			switch {
			case v.dtype != m.v.dtype:
			case s.modules:
				continue
			case transposed(t.Shape, i, suf, have, s.blocks):
				why = " (transposed)"
			case deviates[i] == 1 && len(s.blocks[i]) > 1 && 2*m.count > len(have):
				if len(t.Shape) > 2 {
					sev = Warning
				}
			default:
				continue
			}
			out = append(out, Finding{Severity: sev, Kind: KindStructure, Tensor: t.Name, Block: s.block(i),
				Message: fmt.Sprintf("%v %v%s, where %d of the %d blocks have %v %v", t.DType, t.Shape, why, m.count, len(have), m.v.dtype, m.v.shape)})
		}
	}
	return out
}

// transposedPair reports, in a stack of two blocks whose tensor named
// suffix has reversed shapes, the one transposed: the one whose first
// dimension is not the length of its bias, or else the second.
func (s *stack) transposedPair(suffix string, have []int) []Finding {
	a, b := s.blocks[have[0]][suffix], s.blocks[have[1]][suffix]
	rev := slices.Clone(a.Shape)
	slices.Reverse(rev)
	if a.DType != b.DType || len(rev) < 2 || !slices.Equal(rev, b.Shape) || slices.Equal(rev, a.Shape) {
		return nil
	}
	bad, good := have[1], have[0]
	if strings.HasSuffix(suffix, ".weight") {
		bias := strings.TrimSuffix(suffix, ".weight") + ".bias"
		if ba, ok := s.blocks[have[0]][bias]; ok && len(ba.Shape) == 1 && ba.Shape[0] != a.Shape[0] && ba.Shape[0] == rev[0] {
			bad, good = have[0], have[1]
		}
	}
	t, want := s.blocks[bad][suffix], s.blocks[good][suffix]
	return []Finding{{Severity: Error, Kind: KindStructure, Tensor: t.Name, Block: s.block(bad),
		Message: fmt.Sprintf("%v %v (transposed), where the other block has %v %v", t.DType, t.Shape, want.DType, want.Shape)}}
}

// transposed reports whether shape, the shape of suffix in block self, is
// another block's shape reversed, or keeps at the wrong axis a dimension
// that all other blocks have at the same axis while their other axis
// varies (the input dimension of a projection whose output dimension
// varies by layer kind).
func transposed(shape []uint64, self int, suffix string, have []int, blocks map[int]map[string]info) bool {
	if len(shape) < 2 {
		return false
	}
	rev := slices.Clone(shape)
	slices.Reverse(rev)
	if slices.Equal(rev, shape) {
		return false
	}
	var others [][]uint64
	for _, i := range have {
		if i == self {
			continue
		}
		o := blocks[i][suffix].Shape
		if slices.Equal(o, shape) {
			return false // another block has it too
		}
		if slices.Equal(o, rev) {
			return true
		}
		if len(o) == len(shape) {
			others = append(others, o)
		}
	}
	if len(shape) != 2 || len(others) < 2 {
		return false
	}
	for j := range 2 {
		v := others[0][j]
		stable := true
		for _, o := range others[1:] {
			stable = stable && o[j] == v
		}
		// The other axis must vary, and never be v: where the others
		// are all alike, or square, a dimension of v says nothing of
		// the orientation of a block of another kind.
		square, varies := false, false
		for _, o := range others {
			square = square || o[1-j] == v
			varies = varies || o[1-j] != others[0][1-j]
		}
		if stable && varies && !square && shape[j] != v && shape[1-j] == v {
			return true
		}
	}
	return false
}
