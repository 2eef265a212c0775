// Package quant quantizes weights to int8 with two exact rules, and writes
// model directories that vLLM and the compressed-tensors library load.
//
// The first rule, [Quantize], is a weight validator's: one scale per tensor,
// max|x| / 127, and values rounded half away from zero. [Dequantize] undoes
// it within half a scale.
//
// The second, [CompressWeight], is that of compressed-tensors' int-quantized
// format with the W8A8 scheme (int8 weights, symmetric, per output channel or
// per tensor; activations quantized dynamically per token at inference): the
// scale is max(|min|, |max|) / 127.5 and the division x / scale is computed in
// the weight's dtype, each operation rounded to it as PyTorch does on a CPU,
// then clamped to [-128, 127] and rounded half to even. [WriteModel] applies
// it to the Linear layers of a model directory and writes the directory in
// that library's layout, config.json included.
package quant

import (
	"errors"
	"fmt"
	"math"
)

// ErrNotFinite is returned for a tensor holding NaN or ±Inf, which has no
// int8 quantization.
var ErrNotFinite = errors.New("quant: value is NaN or infinite")

// ErrUnsupported is returned for a tensor whose dtype or shape a rule does
// not take.
var ErrUnsupported = errors.New("quant: unsupported tensor")

// Quantize quantizes x with one scale for the whole tensor:
//
//	max_abs = max |x|
//	q       = round(clamp(x * (127 / max_abs), -128, 127))   rounding half away from zero
//	scale   = max_abs / 127
//
// each operation in float32, so that [-0.5, -0.25, 0.1, 0.5] gives
// [-127, -64, 25, 127] and scale 0.5/127. An all-zero (or empty) x gives all
// zeros and scale 0, which Dequantize turns back into zeros. q is appended to
// dst[:0]. A NaN or ±Inf in x gives an error wrapping ErrNotFinite, naming
// its index.
func Quantize(dst []int8, x []float32) (q []int8, scale float32, err error) {
	var maxAbs float32
	for i, v := range x {
		a := float32(math.Abs(float64(v)))
		if !(a <= math.MaxFloat32) {
			return dst[:0], 0, fmt.Errorf("%w: element %d is %v", ErrNotFinite, i, v)
		}
		maxAbs = max(maxAbs, a)
	}
	q = dst[:0]
	if cap(q) < len(x) {
		q = make([]int8, 0, len(x))
	}
	q = q[:len(x)]
	if maxAbs == 0 {
		clear(q)
		return q, 0, nil
	}
	factor := 127 / maxAbs
	for i, v := range x {
		q[i] = roundAway(v * factor)
	}
	return q, maxAbs / 127, nil
}

// roundAway clamps v to [-128, 127] and rounds it half away from zero.
func roundAway(v float32) int8 {
	v = min(max(v, -128), 127)
	return int8(math.Round(float64(v)))
}

// Dequantize appends q times scale, in float32, to dst and returns the
// extended slice: each value is within scale/2 of the one Quantize was given.
func Dequantize(dst []float32, q []int8, scale float32) []float32 {
	for _, v := range q {
		dst = append(dst, float32(v)*scale)
	}
	return dst
}
