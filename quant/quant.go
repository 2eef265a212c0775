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
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/safetensors-go/safetensors/internal/parallel"
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
// [-127, -64, 25, 127] and scale 0.5/127. Where max_abs is so small (below
// about 3.7e-37) that 127 / max_abs overflows float32, the factor is
// computed in float64 and each product rounded to float32, so that q still
// spans [-127, 127]. An all-zero (or empty) x gives all
// zeros and scale 0, which Dequantize turns back into zeros. q is appended to
// dst[:0]. A NaN or ±Inf in x gives an error wrapping ErrNotFinite, naming
// the index of the first. A large x is quantized in parallel.
func Quantize(dst []int8, x []float32) (q []int8, scale float32, err error) {
	q = dst[:0]
	if cap(q) < len(x) {
		q = make([]int8, 0, len(x))
	}
	q = q[:len(x)]
	var mu sync.Mutex
	var maxAbs float32
	bad := -1
	parts(len(x), func(lo, hi int) {
		m, b := rowMaxAbs(x[lo:hi])
		mu.Lock()
		maxAbs = max(maxAbs, m)
		if b >= 0 && (bad < 0 || lo+b < bad) {
			bad = lo + b
		}
		mu.Unlock()
	})
	if bad >= 0 {
		return dst[:0], 0, fmt.Errorf("%w: element %d is %v", ErrNotFinite, bad, x[bad])
	}
	if maxAbs == 0 {
		clear(q)
		return q, 0, nil
	}
	factor := 127 / maxAbs
	if math.IsInf(float64(factor), 1) {
		// max_abs below 127 / MaxFloat32 (about 3.7e-37): the factor
		// overflows float32, and is taken in float64.
		wide := 127 / float64(maxAbs)
		parts(len(x), func(lo, hi int) { roundAwayWide(q[lo:hi], x[lo:hi], wide) })
		return q, maxAbs / 127, nil
	}
	parts(len(x), func(lo, hi int) { roundAway(q[lo:hi], x[lo:hi], factor) })
	return q, maxAbs / 127, nil
}

// roundAwayWide is roundAwayRow for a factor beyond float32's range: each v
// * factor is computed in float64, then rounded to float32.
func roundAwayWide(q []int8, x []float32, factor float64) {
	q = q[:len(x)]
	for i, v := range x {
		y := float64(float32(float64(v) * factor))
		n := int64(math.Copysign(math.Floor(math.Abs(y)+0.5), y))
		q[i] = int8(max(min(n, 127), -128))
	}
}

// roundAwayRow writes round(clamp(v * factor, -128, 127)), rounding half
// away from zero, for each v of x into q. v * factor is rounded to float32;
// adding ±1/2 to it in float64 is exact, and the conversion truncates
// toward zero, which rounds the float32 half away from zero. x and factor
// must be finite.
func roundAwayRow(q []int8, x []float32, factor float32) {
	q = q[:len(x)]
	for i, v := range x {
		y := min(max(float32(v*factor), -128), 127)
		half := math.Float64frombits(0x3fe0000000000000 | uint64(math.Float32bits(y)>>31)<<63)
		q[i] = int8(int64(float64(y) + half))
	}
}

// parts calls f on contiguous shares of [0, n) from GOMAXPROCS goroutines,
// or on [0, n) from this one where n is small.
func parts(n int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < 1<<16 || workers == 1 {
		f(0, n)
		return
	}
	parallel.For(context.Background(), workers, workers, func(_, w int) error {
		f(n*w/workers, n*(w+1)/workers)
		return nil
	})
}

// Dequantize appends q times scale, in float32, to dst and returns the
// extended slice: each value is within scale/2 of the one Quantize was given.
func Dequantize(dst []float32, q []int8, scale float32) []float32 {
	for _, v := range q {
		dst = append(dst, float32(v)*scale)
	}
	return dst
}
