package check

import (
	"fmt"

	"github.com/safetensors-go/safetensors/internal/plural"
)

// byDesign takes out of findings the all-zero tensors that a model holds
// by design, and returns the others and the names of those taken out.
// Models start many tensors at zero: biases, normalization weights and
// statistics, gates and scales (a vector, or a few: every dimension but
// one of at most 8), learnt tokens and positions, the matrix of a
// low-rank adapter that starts at zero (LoRA's B, LoKr's w1), and the
// layers that a diffusion model starts at zero so that a branch adds
// nothing at first (a ControlNet's zero convolutions, an adaLN-Zero
// modulation, an output projection). So a matrix of all zeros is reported
// only where the model shows that it should hold values: in a block whose
// like in another block of its stack holds values, or as a token
// embedding or a language model's head. Any other is zero by design.
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
	// The zero tensors whose like in another block holds values.
	unlike := map[string]bool{}
	for _, s := range st.stacks {
		if s.modules || s.named {
			continue // different layers (conv1 to conv4, the last at zero), not blocks alike
		}
		bySuffix := map[string][]string{}
		for i, b := range s.blocks {
			if s.mixed && s.single(i) {
				continue
			}
			for suf, t := range b {
				bySuffix[suf] = append(bySuffix[suf], t.Name)
			}
		}
		for _, names := range bySuffix {
			values := false
			for _, n := range names {
				values = values || !zero[n]
			}
			for _, n := range names {
				unlike[n] = unlike[n] || values && zero[n]
			}
		}
	}
	expected := map[string]bool{}
	shapes := map[string][]uint64{}
	for _, t := range infos {
		if zero[t.Name] {
			shapes[t.Name] = t.Shape
			table, head := isTokenTable(t.Name, t.Shape)
			expected[t.Name] = table || head
		}
	}
	for _, f := range findings {
		if f.Kind == KindZero && (vectors(shapes[f.Tensor]) || !unlike[f.Tensor] && !expected[f.Tensor]) {
			design = append(design, f.Tensor)
			continue
		}
		kept = append(kept, f)
	}
	return kept, design
}

// designNote is the report's note on the tensors zero by design.
func designNote(design []string) string {
	return fmt.Sprintf("%s all zeros, as models start biases, statistics, gates, tokens, adapter matrices and zero-initialized layers (e.g. %q): not reported", plural.Of(len(design), "tensor"), design[0])
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
