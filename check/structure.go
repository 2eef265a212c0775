package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
)

// containers are the names under which models number their blocks:
// model.layers.N, h.N, transformer.h.N, blocks.N, encoder.layer.N,
// model.decoder.layers.N, encoder.block.N, ...
var containers = map[string]bool{"layers": true, "layer": true, "h": true, "blocks": true, "block": true}

// A stack is a sequence of numbered blocks under one prefix, such as
// "model.layers".
type stack struct {
	prefix string
	blocks map[int]map[string]info // block number → suffix → tensor
	n      int                     // the number of blocks present
}

// block returns the name of block i: "model.layers.3".
func (s *stack) block(i int) string { return s.prefix + "." + strconv.Itoa(i) }

type structureResult struct {
	stacks   []*stack // by prefix
	findings []Finding
}

// main returns the stack with the most blocks, or nil.
func (r structureResult) main() *stack {
	var best *stack
	for _, s := range r.stacks {
		if best == nil || s.n > best.n {
			best = s
		}
	}
	return best
}

// splitBlock splits a tensor name at its first numbered block: the prefix
// ("model.layers"), the number's text and the suffix
// ("self_attn.q_proj.weight").
func splitBlock(name string) (prefix, num, suffix string, ok bool) {
	segs := strings.Split(name, ".")
	for i := 1; i+1 < len(segs); i++ {
		if containers[segs[i-1]] && segs[i] != "" && strings.Trim(segs[i], "0123456789") == "" {
			return strings.Join(segs[:i], "."), segs[i], strings.Join(segs[i+1:], "."), true
		}
	}
	return "", "", "", false
}

// structure groups the tensors by block and reports the blocks that lack a
// tensor the others have, or hold one the others lack, or whose tensor has
// another shape or dtype than in the others, and gaps in the numbering.
func structure(infos []info) structureResult {
	var res structureResult
	byPrefix := map[string]*stack{}
	for _, t := range infos {
		prefix, num, suffix, ok := splitBlock(t.Name)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil || strconv.Itoa(i) != num {
			res.findings = append(res.findings, Finding{Severity: Error, Kind: KindStructure, Tensor: t.Name,
				Message: fmt.Sprintf("block number %q is not a number written without leading zeros", num)})
			continue
		}
		s := byPrefix[prefix]
		if s == nil {
			s = &stack{prefix: prefix, blocks: map[int]map[string]info{}}
			byPrefix[prefix] = s
		}
		if s.blocks[i] == nil {
			s.blocks[i] = map[string]info{}
			s.n++
		}
		s.blocks[i][suffix] = t
	}
	for _, p := range slices.Sorted(maps.Keys(byPrefix)) {
		s := byPrefix[p]
		res.stacks = append(res.stacks, s)
		res.findings = append(res.findings, s.check()...)
	}
	return res
}

func (s *stack) check() []Finding {
	var out []Finding
	nums := slices.Sorted(maps.Keys(s.blocks))
	last := nums[len(nums)-1]
	var missing []string
	for i := 0; i <= last && len(missing) <= 10; i++ {
		if s.blocks[i] == nil {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		out = append(out, Finding{Severity: Error, Kind: KindStructure, Block: s.prefix,
			Message: fmt.Sprintf("blocks %s.N run from %d to %d but block(s) %s are missing", s.prefix, nums[0], last, strings.Join(missing, ", "))})
	}
	// For each suffix, the blocks holding it and the most common
	// dtype and shape (ties go to the lowest block).
	type variant struct {
		dtype safetensors.DType
		shape string
	}
	suffixes := map[string][]int{}
	for _, i := range nums {
		for suf := range s.blocks[i] {
			suffixes[suf] = append(suffixes[suf], i)
		}
	}
	for _, suf := range slices.Sorted(maps.Keys(suffixes)) {
		have := suffixes[suf]
		slices.Sort(have)
		if len(have) < len(nums) {
			if 2*len(have) > len(nums) {
				for _, i := range nums {
					if _, ok := s.blocks[i][suf]; !ok {
						out = append(out, Finding{Severity: Error, Kind: KindStructure, Block: s.block(i),
							Message: fmt.Sprintf("lacks %s.%d.%s, which %d of the %d blocks have", s.prefix, i, suf, len(have), len(nums))})
					}
				}
			} else {
				for _, i := range have {
					out = append(out, Finding{Severity: Error, Kind: KindStructure, Block: s.block(i), Tensor: s.block(i) + "." + suf,
						Message: fmt.Sprintf("only %d of the %d blocks of %s have %s", len(have), len(nums), s.prefix, suf)})
				}
			}
		}
		count := map[variant]int{}
		first := map[variant]int{}
		for _, i := range have {
			t := s.blocks[i][suf]
			v := variant{t.DType, fmt.Sprint(t.Shape)}
			if count[v] == 0 {
				first[v] = i
			}
			count[v]++
		}
		if len(count) < 2 {
			continue
		}
		vs := slices.Collect(maps.Keys(count))
		slices.SortFunc(vs, func(a, b variant) int {
			return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(first[a], first[b]))
		})
		want := vs[0]
		for _, i := range have {
			t := s.blocks[i][suf]
			if v := (variant{t.DType, fmt.Sprint(t.Shape)}); v != want {
				out = append(out, Finding{Severity: Error, Kind: KindStructure, Tensor: t.Name, Block: s.block(i),
					Message: fmt.Sprintf("%v %v, where %d of the %d blocks have %v %v", t.DType, t.Shape, count[want], len(have), want.dtype, want.shape)})
			}
		}
	}
	return out
}
