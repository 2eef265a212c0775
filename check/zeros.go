package check

import (
	"fmt"
	"slices"
)

// byDesign takes out of findings the all-zero tensors that a model holds
// by design, and returns the others and the names of those taken out. A
// tensor is zero by design when it is
//   - a vector, or a few vectors (every dimension but one of at most 8):
//     biases, normalization statistics, gates, scales, an AdaLoRA E, a
//     table of modulation shifts;
//   - a learnt token ([1, n, width]): a class or mask token, positions
//     that start at zero;
//   - zero in every block of its stack that has it, at least two: the
//     adapter matrix that a low-rank adapter starts at zero (LoRA's B,
//     LoKr's w1), the zero convolutions of a ControlNet, an adaLN-Zero
//     modulation.
//
// A weight matrix zero in one block where the blocks like it hold values
// is not by design, nor is one outside the blocks.
func byDesign(findings []Finding, infos []info, st structureResult) (kept []Finding, design []string) {
	zero := map[string]bool{}
	for _, f := range findings {
		if f.Kind == KindZero {
			zero[f.Tensor] = true
		}
	}
	if len(zero) == 0 {
		return findings, nil
	}
	// For each zero tensor, whether every tensor of its suffix in the
	// blocks of one of its stacks is zero, in two blocks or more.
	consistent := map[string]bool{}
	for _, s := range st.stacks {
		bySuffix := map[string][]string{}
		for _, b := range s.blocks {
			for suf, t := range b {
				bySuffix[suf] = append(bySuffix[suf], t.Name)
			}
		}
		for _, names := range bySuffix {
			if len(names) < 2 || !allOf(names, zero) {
				continue
			}
			for _, n := range names {
				consistent[n] = true
			}
		}
	}
	shapes := map[string][]uint64{}
	for _, t := range infos {
		if zero[t.Name] {
			shapes[t.Name] = t.Shape
		}
	}
	for _, f := range findings {
		if f.Kind == KindZero {
			if s := shapes[f.Tensor]; vectors(s) || len(s) >= 3 && s[0] == 1 || consistent[f.Tensor] {
				design = append(design, f.Tensor)
				continue
			}
		}
		kept = append(kept, f)
	}
	return kept, design
}

// vectors reports whether a shape is that of one vector or a few: every
// dimension but one is of at most 8.
func vectors(shape []uint64) bool {
	large := 0
	for _, d := range shape {
		if d > 8 {
			large++
		}
	}
	return large <= 1
}

func allOf(names []string, set map[string]bool) bool {
	return !slices.ContainsFunc(names, func(n string) bool { return !set[n] })
}

// designNote is the report's note on the tensors zero by design.
func designNote(design []string) string {
	return fmt.Sprintf("%d tensors all zeros by design, as models initialize biases, normalization statistics, gates, tokens and adapter matrices (e.g. %q): not reported", len(design), design[0])
}
