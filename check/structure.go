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

// containers are the names under which transformers models number their
// blocks (model.layers.N, h.N, blocks.N, encoder.layer.N, encoder.block.N):
// the stack under one of them is the model's main stack before any other.
var containers = map[string]bool{"layers": true, "layer": true, "h": true, "blocks": true, "block": true}

// A stack is a sequence of numbered entries under one prefix, found from
// the names alone: "model.layers" (model.layers.N), "down_blocks.1.resnets"
// inside a stage of a UNet, "stages.0.blocks" in timm, or, for entries
// numbered in their own name (ResNet's layer1..layer4, diffusers' attn1 and
// attn2), "layer" with Named set. Its entries are blocks (modules of
// modules) or single layers.
type stack struct {
	prefix string
	named  bool                    // the numbers end the entries' names: prefix+"3"
	blocks map[int]map[string]info // block number → suffix → tensor
	n      int                     // the number of blocks present
	nested bool                    // inside a block of another stack, or of any numbered list
	// modules is set for a list of single modules ("layers.0.weight",
	// "layers.0.bias"), which is not a stack of blocks: its entries are
	// different layers. mixed is set for a list of blocks and single
	// modules (an nn.Sequential of unlike layers).
	modules, mixed bool
	// skippedElsewhere reports whether the gap at number i is one that
	// the stacks of the same pattern show by design: another skips it too,
	// or each skips a number of its own (HRNet's fuse_layers.i, without
	// entry i).
	skippedElsewhere func(i int) bool
	// heldElsewhere reports whether another stack of the same pattern,
	// numbered without gaps, has an entry i between entries of the kinds
	// this one has at i-1 and i+1 (the resnets of the other up blocks of
	// a UNet, where one lacks its middle one).
	heldElsewhere func(i int, sig map[int]string) bool
}

// block returns the name of block i: "model.layers.3", or "layer3".
func (s *stack) block(i int) string {
	if s.named {
		return s.prefix + strconv.Itoa(i)
	}
	return s.prefix + "." + strconv.Itoa(i)
}

// entries names the stack's blocks: "model.layers.N", or "layerN".
func (s *stack) entries() string {
	if s.named {
		return s.prefix + "N"
	}
	return s.prefix + ".N"
}

// single reports whether entry i is one layer (its tensors its own
// parameters, "weight" and "bias"), not a block of modules.
func (s *stack) single(i int) bool {
	for suf := range s.blocks[i] {
		if strings.Contains(suf, ".") {
			return false
		}
	}
	return true
}

type structureResult struct {
	stacks   []*stack // by prefix
	findings []Finding
}

// main returns the model's main stack: the outermost stack of blocks
// under one of the containers with the most blocks, else the outermost
// stack of blocks with the most blocks, or nil; a list of single modules
// only where there is no stack of blocks.
func (r structureResult) main() *stack {
	var best *stack
	rank := func(s *stack) []int {
		c := 0
		if containers[s.prefix[strings.LastIndexByte(s.prefix, '.')+1:]] && !s.named {
			c = 1
		}
		m := 1
		if s.modules {
			m = 0
		}
		return []int{m, c, s.n}
	}
	for _, s := range r.stacks {
		if s.nested {
			continue
		}
		if best == nil || slices.Compare(rank(s), rank(best)) > 0 {
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

type split struct {
	prefix, num, suffix string
	named               bool
}

// splitBlocks splits a tensor name at each of its numbered entries, the
// outermost first, at most max of them: at every component that is a
// number ("down_blocks.1.resnets.0.conv1.weight" at 1 and at 0), and at
// every component that ends in a number after a name and holds modules of
// its own ("layer2.0.conv1.weight" at layer2, prefix "layer"; not
// "conv1.weight", a single layer).
func splitBlocks(name string, max int) []split {
	var out []split
	segs := strings.Split(name, ".")
	for i := 0; i+1 < len(segs) && len(out) < max; i++ {
		seg := segs[i]
		if seg == "" {
			continue
		}
		if strings.Trim(seg, "0123456789") == "" {
			if i > 0 {
				out = append(out, split{prefix: strings.Join(segs[:i], "."), num: seg, suffix: strings.Join(segs[i+1:], ".")})
			}
			continue
		}
		stem := strings.TrimRight(seg, "0123456789")
		if stem == seg || i+2 >= len(segs) || !isStem(stem) || seg[len(stem)] == '0' && len(seg) > len(stem)+1 {
			continue
		}
		prefix := stem
		if i > 0 {
			prefix = strings.Join(segs[:i], ".") + "." + stem
		}
		out = append(out, split{prefix: prefix, num: seg[len(stem):], suffix: strings.Join(segs[i+1:], "."), named: true})
	}
	return out
}

// structure groups the tensors by block, at every level of nesting, and
// judges each stack of blocks as its model makes it: blocks of several
// kinds (attention and SSM or convolution mixers, MoE and dense MLPs,
// cross-attention in some layers, a stage's first block), tensors in the
// first or last block only, and stages of a hierarchy whose shapes grow
// from stage to stage are all healthy. What it reports is what the rest of
// the model shows to be a defect: a block that lacks one tensor that
// blocks like it have (in its stack or in the stacks of its pattern), a
// tensor whose shape or dtype differs from that of the other blocks where
// nothing else in its block does, a tensor transposed (against the other
// blocks, its bias, or its block's width), and a block missing (gaps).
// Each defect is reported once.
func structure(infos []info) structureResult {
	var res structureResult
	byPrefix := map[string]*stack{}
	embedNorm := false // a norm of the embeddings, outside the blocks
	for _, t := range infos {
		if _, _, _, ok := splitBlock(t.Name); !ok && role.InEmbedding(t.Name) && role.IsNorm(role.Module(t.Name)) {
			embedNorm = true
		}
		for depth, sp := range splitBlocks(t.Name, 6) {
			i, err := strconv.Atoi(sp.num)
			if err != nil || strconv.Itoa(i) != sp.num {
				if depth == 0 && containers[sp.prefix[strings.LastIndexByte(sp.prefix, '.')+1:]] {
					res.findings = append(res.findings, Finding{Severity: Error, Kind: KindStructure, Tensor: t.Name,
						Message: fmt.Sprintf("block number %q is not a number written without leading zeros", sp.num)})
				}
				break
			}
			key := sp.prefix
			if sp.named {
				key += "#"
			}
			s := byPrefix[key]
			if s == nil {
				s = &stack{prefix: sp.prefix, named: sp.named, blocks: map[int]map[string]info{}, nested: depth > 0 || numbered(sp.prefix)}
				byPrefix[key] = s
			}
			if s.blocks[i] == nil {
				s.blocks[i] = map[string]info{}
				s.n++
			}
			s.blocks[i][sp.suffix] = t
		}
	}
	// The numbers that each pattern of stacks skips, in each stack:
	// scale_heads.*.layers skipping 1 in several heads is by design.
	skipped := map[string]map[int]int{}
	gapped := map[string]int{}    // pattern → the stacks with a gap
	held := map[string][]*stack{} // pattern → the stacks without gaps
	for _, s := range byPrefix {
		nums := slices.Sorted(maps.Keys(s.blocks))
		p := pattern(s.prefix)
		if skipped[p] == nil {
			skipped[p] = map[int]int{}
		}
		if nums[len(nums)-1]-nums[0]+1 != len(nums) {
			gapped[p]++
		} else {
			held[p] = append(held[p], s)
		}
		for j := 1; j < len(nums); j++ {
			for i := nums[j-1] + 1; i < nums[j] && i < nums[j-1]+100; i++ {
				skipped[p][i]++
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(byPrefix)) {
		s := byPrefix[p]
		s.skippedElsewhere = func(i int) bool { p := pattern(s.prefix); return skipped[p][i] > 1 || gapped[p] > 2 }
		s.heldElsewhere = func(i int, sig map[int]string) bool {
			for _, o := range held[pattern(s.prefix)] {
				if o.blocks[i] != nil && o.blocks[i-1] != nil && o.blocks[i+1] != nil &&
					signature(o.blocks[i-1]) == sig[i-1] && signature(o.blocks[i+1]) == sig[i+1] {
					return true
				}
			}
			return false
		}
		singles := 0
		for i := range s.blocks {
			if s.single(i) {
				singles++
			}
		}
		s.modules = singles == len(s.blocks)
		s.mixed = singles > 0 && !s.modules
		res.stacks = append(res.stacks, s)
		res.findings = append(res.findings, s.check(embedNorm)...)
	}
	res.findings = append(res.findings, pooled(res.stacks, embedNorm)...)
	res.findings = append(res.findings, biasTransposed(infos)...)
	res.findings = dedupe(res.findings)
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

	// The blocks' kinds, as far as the names tell: blocks with the same
	// tensors are of one kind.
	sig := map[int]string{}
	for _, i := range nums {
		sig[i] = signature(s.blocks[i])
	}
	var out []Finding
	out = append(out, s.gaps(nums, sig)...)
	out = append(out, s.missing(nums, embedNorm)...)
	if !s.named {
		// conv1, conv2 and conv3 are layers of their own shapes (a
		// grouped convolution between two 1×1), and layer1 to layer4
		// stages of their own widths.
		out = append(out, s.shapes(nums)...)
	}
	return out
}

// gaps reports block numbers missing between blocks. A gap between blocks
// alike (the same tensors, dtypes and shapes) is an error. So is one in a
// list of blocks that is numbered as an nn.ModuleList is: from 0, with no
// pattern in its gaps. Modules without parameters are numbered too, and
// an nn.Sequential of blocks with activations between them has gaps that
// recur (SEANet's convolution, residual block, ELU), or no block 0; an
// nn.Sequential of single layers and blocks has gaps wherever, and a list
// of single modules ("layers.0.weight", "layers.2.weight") too: there,
// only gaps between blocks alike are reported. Between blocks that differ,
// a gap whose blocks chain (the second reads a width the first writes: a
// convolution, an upsampling without parameters, a convolution) is by
// design too, unless the kinds of the list's entries recur with a period
// that puts one there, or another stack of the same pattern has that
// entry. A number that other stacks of the same pattern skip too is by
// design, and entries numbered in their names (norm_sublayer1,
// norm_sublayer3) are not a list.
func (s *stack) gaps(nums []int, sig map[int]string) []Finding {
	if s.named || s.modules && !s.oneKind(sig) {
		return nil
	}
	regular := periodic(nums)
	list := !s.mixed && nums[0] == 0 && !regular && (!s.modules || len(nums) >= 3)
	var missing []string
	for j := 1; j < len(nums) && len(missing) <= 10; j++ {
		a, b := nums[j-1], nums[j]
		switch {
		case b == a+1:
			continue
		case !s.modules && !regular && s.alike(a, b, sig):
		case list && (!chained(s.blocks[a], s.blocks[b]) || len(nums) >= 3 && b == a+2 && predicted(a+1, s.blocks)):
		case !regular && b == a+2 && s.heldElsewhere(a+1, sig):
		default:
			continue
		}
		for i := a + 1; i < b && i < a+100 && len(missing) <= 10; i++ {
			if !s.skippedElsewhere(i) {
				missing = append(missing, s.block(i))
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Finding{{Severity: Error, Kind: KindStructure, Block: s.prefix,
		Message: fmt.Sprintf("%s missing: the blocks %s run from %d to %d", strings.Join(missing, ", "), s.entries(), nums[0], nums[len(nums)-1])}}
}

// chained reports whether block b reads the width that block a writes:
// b takes in a's width from outside (as the input dimension of one of its
// weights of 2 or more dimensions that none of its weights outputs), or
// has a's width. A module without parameters between them (an
// activation, a Flat(), an upsampling) keeps the width; a stage missing
// between stages of other widths does not.
func chained(a, b map[string]info) bool {
	wa := blockWidth(a)
	made := map[uint64]bool{}
	for _, t := range b {
		if len(t.Shape) >= 2 {
			made[t.Shape[0]] = true
		}
	}
	for _, t := range b {
		if len(t.Shape) >= 2 && t.Shape[1] == wa && !made[wa] {
			return true
		}
	}
	return wa == blockWidth(b)
}

// signature returns the names of a block's tensors, as one string: blocks
// of one kind have the same.
func signature(block map[string]info) string {
	return strings.Join(slices.Sorted(maps.Keys(block)), "\x00")
}

// predicted reports whether the kinds of the entries of a list recur
// with a period p that puts one at i: the entries i-p and i+p are of one
// kind, and wherever two entries p apart are present, as some are, they
// are of one kind (WAN's resnet, downsampler, resnet, ...; one kind of
// block throughout). Blocks are of one kind when half of their tensors or
// more are of the same names (a resnet with a shortcut is one, a
// downsampler with a temporal convolution too).
func predicted(i int, blocks map[int]map[string]info) bool {
	for p := 1; p <= 16; p++ {
		before, okb := blocks[i-p]
		after, oka := blocks[i+p]
		if !okb || !oka || !sameKind(before, after) {
			continue
		}
		ok, seen := true, false
		for n, k := range blocks {
			if m, has := blocks[n+p]; has {
				ok = ok && sameKind(m, k)
				seen = true
			}
		}
		if ok && seen {
			return true
		}
	}
	return false
}

// sameKind reports whether half of the tensors of each of two blocks, or
// more, are of names both have.
func sameKind(a, b map[string]info) bool {
	both := 0
	for suf := range a {
		if _, ok := b[suf]; ok {
			both++
		}
	}
	return both > 0 && 2*both >= len(a) && 2*both >= len(b)
}

// periodic reports whether the numbers present, from the first to the
// last, recur with a period of 2 or more (conv, block, ELU, conv, block,
// ELU, ...), throughout or, over three periods or more, but for the last
// (a Sequential may end otherwise), or are every other number, or every
// third.
func periodic(nums []int) bool {
	lo, hi := nums[0], nums[len(nums)-1]
	present := map[int]bool{}
	for _, n := range nums {
		present[n] = true
	}
	if hi-lo > 4096 {
		return false
	}
	if len(nums) >= 3 {
		step := nums[1] - nums[0]
		arithmetic := step >= 2
		for j := 2; j < len(nums) && arithmetic; j++ {
			arithmetic = nums[j]-nums[j-1] == step
		}
		if arithmetic {
			return true
		}
	}
	for p := 2; 2*p <= hi-lo+1 && p <= 16; p++ {
		// Throughout, or but for the last period where there are three.
		whole, head := true, 3*p <= hi-lo+1
		for n := lo; n+p <= hi && (whole || head); n++ {
			same := present[n] == present[n+p]
			whole = whole && same
			head = head && (same || n+p > hi-p)
		}
		if whole || head {
			return true
		}
	}
	return false
}

// sameRanks reports whether the tensors of one name have the same number
// of dimensions in every block.
func (s *stack) sameRanks() bool {
	rank := map[string]int{}
	for _, b := range s.blocks {
		for suf, t := range b {
			if r, ok := rank[suf]; ok && r != len(t.Shape) {
				return false
			}
			rank[suf] = len(t.Shape)
		}
	}
	return true
}

// oneKind reports whether the entries of a stack hold tensors of the same
// names and numbers of dimensions: a ModuleList of one layer (a norm for
// each stage), not an nn.Sequential of convolutions and norms.
func (s *stack) oneKind(sig map[int]string) bool {
	var first map[string]info
	for i, b := range s.blocks {
		if first == nil {
			first = b
		}
		if sig[i] != sig[slices.Min(slices.Collect(maps.Keys(s.blocks)))] {
			return false
		}
		for suf, t := range b {
			if len(t.Shape) != len(first[suf].Shape) {
				return false
			}
		}
	}
	return true
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

// An entry is a block of a stack, as the rule that lacking applies sees
// it: its name, where it stands in its stack, and its tensors by suffix.
type entry struct {
	name    string
	first   bool // the first block of its stack
	nested  bool // its stack is inside a block: a stage's
	tensors map[string]info
}

// entryList returns the blocks of s among nums, each seen through view,
// leaving out the single layers of an nn.Sequential of blocks and layers:
// they are different layers, not blocks to compare.
func (s *stack) entryList(nums []int, view func(int) map[string]info) []entry {
	first := slices.Min(slices.Collect(maps.Keys(s.blocks)))
	var out []entry
	for _, b := range nums {
		if s.mixed && s.single(b) {
			continue
		}
		out = append(out, entry{name: s.block(b), first: b == first, nested: s.nested, tensors: view(b)})
	}
	return out
}

// missing reports the blocks that lack one tensor which blocks otherwise
// like them have. A block of a kind of its own (its tensors those of no
// other block) is compared with the blocks whose tensors include all of
// its own; when they have just one tensor more, that tensor is missing.
// Blocks of other kinds (an attention layer among SSM layers, a dense MLP
// among MoE layers) have tensors the others lack, and blocks without a
// whole module that others have (cross-attention every other layer, a
// stage without downsampling) lack more than one, so neither is reported.
// Some cases stay warnings, since models do them: a first block without a
// norm that the others have (the first layer of a pre-norm model whose
// input is already normalized); a block lacking a whole module that only
// one other block has (T5's relative attention bias in its first block,
// the channel-changing shortcut of a stage's first block), unless the
// module's norm is there; a block lacking a shortcut's projection (a
// block has one only where its width changes); a first block without a
// scale or state vector of its own (a router scaling the state of the
// previous layer); a stage's first block whose list of modules is shorter
// (MixNet's kernels of the convolutions it mixes). A list of single
// layers of one type is judged too, a layer against two others or more.
func (s *stack) missing(nums []int, embedNorm bool) []Finding {
	all := func(b int) map[string]info { return s.blocks[b] }
	if s.named && len(nums) < 3 {
		return nil // attn1 and attn2: self- and cross-attention, of other kinds
	}
	if s.modules {
		// A list of single layers of one type (their tensors of the
		// same ranks: convolutions, norms): one lacking a tensor that two
		// others or more have is judged.
		if len(nums) < 3 || !s.sameRanks() {
			return nil
		}
		return lacking(s.entryList(nums, all), embedNorm, map[string]bool{}, false, s.n, 2)
	}
	reported := map[string]bool{}
	out := lacking(s.entryList(nums, all), embedNorm, reported, false, s.n, 1)
	// Then module by module (self_attn, mlp, ...), for a block of a kind of
	// its own whose module is like the same module of other blocks: an MoE
	// layer among dense ones whose attention lacks a projection.
	for _, m := range modulesOf(s.blocks) {
		var have []int
		for _, b := range nums {
			for suf := range s.blocks[b] {
				if strings.HasPrefix(suf, m) {
					have = append(have, b)
					break
				}
			}
		}
		out = append(out, lacking(s.entryList(have, func(b int) map[string]info { return within(s.blocks[b], m) }), embedNorm, reported, true, s.n, 1)...)
	}
	return out
}

// modulesOf returns the first components of the suffixes of blocks that
// have more ("self_attn.", "mlp.").
func modulesOf(blocks map[int]map[string]info) []string {
	mods := map[string]bool{}
	for _, b := range blocks {
		for suf := range b {
			if i := strings.IndexByte(suf, '.'); i > 0 {
				mods[suf[:i+1]] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(mods))
}

// within returns the tensors of a block under module m ("self_attn.").
func within(block map[string]info, m string) map[string]info {
	sub := map[string]info{}
	for suf, t := range block {
		if strings.HasPrefix(suf, m) {
			sub[suf] = t
		}
	}
	return sub
}

// pooled compares the blocks of the stacks that one pattern of names
// numbers ("down_blocks.*.resnets", "encoder.stages.*.blocks"): the blocks
// of a stage have the blocks of the other stages for peers where a stage
// holds too few alike to judge by. A block lacking a tensor that blocks
// of its kind in other stages have is reported, and a tensor transposed
// relative to the same tensor of the other stages, once the width of each
// block is divided out.
func pooled(stacks []*stack, embedNorm bool) []Finding {
	byPattern := map[string][]*stack{}
	for _, s := range stacks {
		if s.modules {
			continue
		}
		p := pattern(s.prefix)
		if s.named {
			p += "#"
		}
		byPattern[p] = append(byPattern[p], s)
	}
	var out []Finding
	for _, p := range slices.Sorted(maps.Keys(byPattern)) {
		group := byPattern[p]
		if len(group) < 2 {
			continue
		}
		var es []entry
		for _, s := range group {
			nums := slices.Sorted(maps.Keys(s.blocks))
			es = append(es, s.entryList(nums, func(b int) map[string]info { return s.blocks[b] })...)
		}
		out = append(out, lacking(es, embedNorm, map[string]bool{}, false, len(es), 1)...)
		out = append(out, relativeTransposed(es)...)
	}
	return out
}

// isStem reports whether a name's part before its number is a word
// ("layer", "attn_"): two letters or more, from a letter on.
func isStem(stem string) bool {
	c := stem[0]
	return len(strings.Trim(stem, "_")) >= 2 && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z')
}

// pattern returns a name with its numbers made "*": "down_blocks.*.resnets".
func pattern(name string) string {
	segs := strings.Split(name, ".")
	for i, seg := range segs {
		if seg != "" && strings.Trim(seg, "0123456789") == "" {
			segs[i] = "*"
		} else if stem := strings.TrimRight(seg, "0123456789"); stem != seg && isStem(stem) {
			segs[i] = stem + "*"
		}
	}
	return strings.Join(segs, ".")
}

// lacking reports the entries whose tensors are those of no other entry
// and those of other entries but one. With sameRanks, only where the
// tensors they have in common have the same dtypes and ranks (the same
// module of another stage is wider). A tensor of the first block of a
// list within the entries is left to that list's stack. An entry
// reported is not reported again. total is the number of blocks the
// message counts the holders among; peers, the fewest entries that the
// tensors of the closest superset must be those of.
func lacking(es []entry, embedNorm bool, reported map[string]bool, sameRanks bool, total, peers int) []Finding {
	sig := make([]string, len(es))
	group := map[string][]int{}
	for i, e := range es {
		sig[i] = strings.Join(slices.Sorted(maps.Keys(e.tensors)), "\x00")
		group[sig[i]] = append(group[sig[i]], i)
	}
	var out []Finding
	for b, e := range es {
		if len(group[sig[b]]) > 1 || reported[e.name] {
			continue
		}
		own := e.tensors
		var peer []int // the entries of the closest superset
		var extra string
		for _, k := range slices.Sorted(maps.Keys(group)) {
			g := group[k]
			other := es[g[0]].tensors
			if len(other) != len(own)+1 || k == sig[b] || len(g) < peers {
				continue
			}
			var d []string
			for suf, t := range other {
				o, ok := own[suf]
				switch {
				case !ok && firstSub(suf):
					// A tensor of the first block of the block: the
					// stack of those judges it, where a stage's first
					// block differs from the others.
					d = append(d, suf, suf)
				case !ok:
					d = append(d, suf)
				case sameRanks && (o.DType != t.DType || len(o.Shape) != len(t.Shape)):
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
		reported[e.name] = true
		holders := 0
		for _, x := range es {
			if _, ok := x.tensors[extra]; ok {
				holders++
			}
		}
		whole := !hasModule(own, extra)
		if whole && holders == 1 && len(es) > 2 && es[peer[0]].first && len(peer) == 1 {
			continue // a module of the first block only, as T5's relative attention bias
		}
		sev := Error
		switch {
		case whole && e.first && embedNorm && role.IsNorm(role.Module(extra)),
			whole && holders == 1 && !normed(own, extra),
			whole && shortcut(extra, es[peer[0]].tensors[extra]),
			e.first && isBare(extra, es[peer[0]].tensors[extra]),
			e.first && e.nested && shorterList(own, extra):
			sev = Warning
		}
		out = append(out, Finding{Severity: sev, Kind: KindStructure, Block: e.name,
			Message: fmt.Sprintf("lacks %s.%s, which %d of the %d blocks have", e.name, extra, holders, total)})
	}
	return out
}

// shorterList reports whether a block lacks a whole entry of a list
// ("conv_dw.3", of which it has conv_dw.0 to conv_dw.2) that suffix
// names a tensor of.
func shorterList(own map[string]info, suffix string) bool {
	segs := strings.Split(suffix, ".")
	for i, seg := range segs {
		if i > 0 && seg != "" && strings.Trim(seg, "0123456789") == "" {
			entry, list := strings.Join(segs[:i+1], ".")+".", strings.Join(segs[:i], ".")+"."
			has := false
			for suf := range own {
				if strings.HasPrefix(suf, entry) {
					return false
				}
				has = has || strings.HasPrefix(suf, list)
			}
			return has
		}
	}
	return false
}

// normed reports whether a block holds the normalization that follows the
// layer whose tensor suffix names: conv3_1x1.bn beside conv3_1x1.conv, a
// layer that cannot be missing by design where its norm is present.
func normed(own map[string]info, suffix string) bool {
	segs := strings.Split(suffix, ".")
	if len(segs) < 3 {
		return false
	}
	parent := strings.Join(segs[:len(segs)-2], ".") + "."
	for suf := range own {
		if rest, ok := strings.CutPrefix(suf, parent); ok {
			if m := rest[:strings.IndexByte(rest+".", '.')]; role.IsNorm(m) || strings.HasPrefix(strings.ToLower(m), "bn") {
				return true
			}
		}
	}
	return false
}

// shortcut reports whether t, named suffix, is a residual shortcut's
// projection (a skip, shortcut or downsample module's 1×1 convolution
// between two widths), which a block has only where its width changes.
func shortcut(name string, t info) bool {
	if len(t.Shape) < 3 || t.Shape[0] == t.Shape[1] {
		return false
	}
	mod := strings.ToLower(name)
	if !strings.Contains(mod, "skip") && !strings.Contains(mod, "shortcut") && !strings.Contains(mod, "downsample") {
		return false
	}
	for _, k := range t.Shape[2:] {
		if k != 1 {
			return false
		}
	}
	return true
}

// firstSub reports whether a suffix is that of a tensor of the first
// block of a list within a block ("blocks.0.conv.weight", not a single
// layer's "downsample.0.bias").
func firstSub(suffix string) bool {
	segs := strings.Split(suffix, ".")
	for i, seg := range segs {
		if seg != "" && strings.Trim(seg, "0123456789") == "" {
			return seg == "0" && i+2 < len(segs)
		}
	}
	return false
}

// hasModule reports whether a block holds another tensor of the module
// that holds suffix ("self_attn.q_proj.bias" for "self_attn.q_proj.weight").
func hasModule(own map[string]info, suffix string) bool {
	i := strings.LastIndexByte(suffix, '.')
	if i < 0 {
		return false
	}
	for suf := range own {
		if strings.HasPrefix(suf, suffix[:i+1]) {
			return true
		}
	}
	return false
}

// isBare reports whether a tensor is a parameter of its own, not the
// weight or bias of a layer, of at most one dimension: a scale, a gate.
func isBare(suffix string, t info) bool {
	last := suffix[strings.LastIndexByte(suffix, '.')+1:]
	switch last {
	case "weight", "bias", "running_mean", "running_var", "num_batches_tracked":
		return false // a layer's, or a batch norm's statistics
	}
	return len(t.Shape) <= 1
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
				if len(t.Shape) > 2 || i == nums[0] && s.nested && inputOnly(t.Shape, m.v.shape) {
					// A kernel, or the input of a stage's first
					// block: the skip connection it concatenates.
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

// inputOnly reports whether a shape differs from want, a shape as
// variant writes it, in its second dimension only, a layer's input.
func inputOnly(shape []uint64, want string) bool {
	if len(shape) < 2 {
		return false
	}
	fields := strings.Fields(strings.Trim(want, "[]"))
	var d uint64
	if len(fields) != len(shape) {
		return false
	}
	if _, err := fmt.Sscan(fields[1], &d); err != nil {
		return false
	}
	alt := slices.Clone(shape)
	alt[1] = d
	return fmt.Sprint(alt) == want
}

// transposedPair reports, in a stack of two blocks whose tensor named
// suffix has reversed shapes, the one transposed: the one whose first
// dimension is not the length of its bias, or else the second.
func (s *stack) transposedPair(suffix string, have []int) []Finding {
	a, b := s.blocks[have[0]][suffix], s.blocks[have[1]][suffix]
	// Two blocks are alike but for this tensor, or they are two branches
	// of their own widths (CrossViT's projections from each to the other).
	others := 0
	for suf, t := range s.blocks[have[0]] {
		if suf == suffix {
			continue
		}
		if u, ok := s.blocks[have[1]][suf]; !ok || variantOf(t) != variantOf(u) {
			return nil
		}
		others++
	}
	if others == 0 {
		return nil
	}
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

// relativeTransposed reports a 2-D tensor transposed relative to the same
// tensor of blocks of other stages whose widths differ: each block's
// shapes are divided by its width (the length of its normalizations, else
// its most common dimension), and a tensor whose shape so measured is the
// reverse of what every other block has, two or more, is transposed.
// Swin's or PVT's stages of one block each are judged so.
func relativeTransposed(es []entry) []Finding {
	type rel struct{ a, b float64 }
	rels := map[string]map[int]rel{} // suffix → entry → relative shape
	for i, e := range es {
		w := blockWidth(e.tensors)
		if w == 0 {
			continue
		}
		for suf, t := range e.tensors {
			if len(t.Shape) != 2 || t.Shape[0] == t.Shape[1] {
				continue
			}
			if rels[suf] == nil {
				rels[suf] = map[int]rel{}
			}
			rels[suf][i] = rel{float64(t.Shape[0]) / float64(w), float64(t.Shape[1]) / float64(w)}
		}
	}
	var out []Finding
	for _, suf := range slices.Sorted(maps.Keys(rels)) {
		m := rels[suf]
		count := map[rel]int{}
		for _, r := range m {
			count[r]++
		}
		if len(count) != 2 {
			continue // one shape for all, or several: no consensus to break
		}
		for _, i := range slices.Sorted(maps.Keys(m)) {
			r := m[i]
			same, reversed := count[r]-1, count[rel{r.b, r.a}]
			if same == 0 && reversed >= 2 && reversed == len(m)-1 {
				t := es[i].tensors[suf]
				out = append(out, Finding{Severity: Error, Kind: KindStructure, Tensor: t.Name, Block: es[i].name,
					Message: fmt.Sprintf("%v %v (transposed): in %d blocks of other widths, %s is shaped the other way round for their widths", t.DType, t.Shape, reversed, suf)})
			}
		}
	}
	return out
}

// blockWidth returns the width of a block: the most common length of its
// 1-D normalization weights, else the most common of the lengths of its
// vectors and the output dimensions of its other tensors, 1 left out; 0
// if it has none.
func blockWidth(tensors map[string]info) uint64 {
	norms, dims := map[uint64]int{}, map[uint64]int{}
	for suf, t := range tensors {
		if len(t.Shape) == 0 || t.Shape[0] == 1 {
			continue
		}
		dims[t.Shape[0]]++
		if len(t.Shape) == 1 && role.IsNorm(role.Module("x."+suf)) {
			norms[t.Shape[0]]++
		}
	}
	if len(norms) > 0 {
		return mostCommon(norms)
	}
	return mostCommon(dims)
}

// mostCommon returns the key of m with the highest count, the smallest
// on a tie; 0 for an empty m.
func mostCommon(m map[uint64]int) uint64 {
	var best uint64
	for k, c := range m {
		if c > m[best] || c == m[best] && k < best {
			best = k
		}
	}
	return best
}

// biasTransposed reports a layer's 2-D weight whose bias has the length of
// its input rather than its output: the weight is transposed. Which axis
// is the output is learnt from the model's own layers (nn.Linear's
// [out, in]; GPT-2's Conv1D [in, out]): the axis a bias matches in the
// layers of the same name, else in most layers of the model.
func biasTransposed(infos []info) []Finding {
	byName := map[string]info{}
	for _, t := range infos {
		byName[t.Name] = t
	}
	type layer struct {
		w    info
		bias uint64
		kind string // the layer's own name: "q_proj", "c_attn", "in_proj"
	}
	var layers []layer
	for _, t := range infos {
		if len(t.Shape) != 2 || t.Shape[0] == t.Shape[1] {
			continue
		}
		var bias string
		switch {
		case strings.HasSuffix(t.Name, ".weight"):
			bias = strings.TrimSuffix(t.Name, ".weight") + ".bias"
		case strings.HasSuffix(t.Name, "_weight"):
			bias = strings.TrimSuffix(t.Name, "_weight") + "_bias"
		default:
			continue
		}
		b, ok := byName[bias]
		if !ok || len(b.Shape) != 1 || b.Shape[0] != t.Shape[0] && b.Shape[0] != t.Shape[1] {
			continue
		}
		kind := strings.TrimSuffix(strings.TrimSuffix(t.Name, "weight"), ".")
		kind = kind[strings.LastIndexByte(kind, '.')+1:]
		layers = append(layers, layer{t, b.Shape[0], kind})
	}
	votes := map[string][2]int{} // layer name → layers whose bias is axis 0, axis 1
	var all [2]int
	for _, l := range layers {
		axis := 0
		if l.bias == l.w.Shape[1] {
			axis = 1
		}
		v := votes[l.kind]
		v[axis]++
		votes[l.kind] = v
		all[axis]++
	}
	var out []Finding
	for _, l := range layers {
		v := votes[l.kind]
		var want int
		switch {
		case v[0] > v[1]+1 || v[0] > 2*v[1]:
			want = 0
		case v[1] > v[0]+1 || v[1] > 2*v[0]:
			want = 1
		case all[0] > 2*all[1]+2:
			want = 0
		case all[1] > 2*all[0]+2:
			want = 1
		default:
			continue
		}
		if l.bias != l.w.Shape[want] {
			out = append(out, Finding{Severity: Error, Kind: KindStructure, Tensor: l.w.Name,
				Message: fmt.Sprintf("%v %v (transposed): its bias has %d values, its input's width, where the model's layers like it have a bias of their output's", l.w.DType, l.w.Shape, l.bias)})
		}
	}
	return out
}

// dedupe keeps one finding of each tensor and of each tensor a block
// lacks, the first error, else the first warning: a defect that several
// rules see is reported once.
func dedupe(fs []Finding) []Finding {
	key := func(f Finding) string {
		if f.Tensor != "" {
			return f.Tensor
		}
		if rest, ok := strings.CutPrefix(f.Message, "lacks "); ok {
			return rest[:strings.IndexByte(rest+",", ',')]
		}
		return ""
	}
	keep := map[string]int{} // key → index of the finding kept
	for i, f := range fs {
		k := key(f)
		if k == "" {
			continue
		}
		if j, ok := keep[k]; !ok || f.Severity > fs[j].Severity {
			keep[k] = i
		}
	}
	out := make([]Finding, 0, len(fs))
	for i, f := range fs {
		if k := key(f); k == "" || keep[k] == i {
			out = append(out, f)
		}
	}
	return out
}
