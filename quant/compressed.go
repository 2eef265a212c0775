package quant

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/parallel"
)

// Strategy is the granularity of compressed-tensors' weight scales.
type Strategy int

const (
	// PerChannel gives each output channel (each row of an [out, in]
	// weight) its own scale, of shape [out, 1]: compressed-tensors'
	// "channel" strategy, the W8A8 preset's.
	PerChannel Strategy = iota
	// PerTensor gives the weight one scale, of shape [1]: the "tensor"
	// strategy.
	PerTensor
)

// String returns "channel" or "tensor", the strategy's name in
// compressed-tensors' configuration.
func (s Strategy) String() string {
	switch s {
	case PerChannel:
		return "channel"
	case PerTensor:
		return "tensor"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy parses "channel" or "tensor".
func ParseStrategy(s string) (Strategy, error) {
	switch strings.ToLower(s) {
	case "channel":
		return PerChannel, nil
	case "tensor":
		return PerTensor, nil
	}
	return 0, fmt.Errorf("%w: strategy %q is not channel or tensor", ErrUnsupported, s)
}

// ScaleName returns the name of the scale tensor that goes with the weight
// named name: "x.weight" gives "x.weight_scale".
func ScaleName(name string) string { return name + "_scale" }

// CompressWeight quantizes a Linear layer's weight, an F32, F16 or BF16
// tensor of shape [out, in], as compressed-tensors 0.20.0 does for the
// int-quantized format with a symmetric int8 scheme:
//
//	scale = max(|min(min x, 0)|, max(max x, 0)) / 127.5   over a row (PerChannel) or the tensor
//	scale = eps(dtype)                                     if that is 0
//	q     = round_half_even(clamp(x / scale, -128, 127))
//
// where every operation is that of PyTorch on a CPU for tensors of the
// weight's dtype: computed in float32 and rounded to the dtype (to nearest
// even), and eps is torch.finfo(dtype).eps (2^-7 for BF16, 2^-10 for F16,
// 2^-23 for F32). q is an I8 tensor of the weight's name and shape; scale,
// named ScaleName(w.Name), has the weight's dtype and shape [out, 1] or [1].
// A NaN or ±Inf in w gives an error wrapping ErrNotFinite. The rows are
// quantized in parallel.
func CompressWeight(w safetensors.Tensor, s Strategy) (q, scale safetensors.Tensor, err error) {
	return compressWeight(context.Background(), w, s)
}

// compressWeight is CompressWeight, stopped by ctx between blocks of rows
// with the error of parallel.For.
func compressWeight(ctx context.Context, w safetensors.Tensor, s Strategy) (q, scale safetensors.Tensor, err error) {
	if err := checkWeight(w); err != nil {
		return q, scale, err
	}
	out, in := int(w.Shape[0]), int(w.Shape[1])
	q = safetensors.Tensor{Name: w.Name, DType: safetensors.I8, Shape: []uint64{uint64(out), uint64(in)}, Data: make([]byte, out*in)}
	scales, m, err := weightScales(ctx, w, s)
	if err != nil {
		return q, scale, err
	}
	if err := quantRows(ctx, w, s, m, 0, out, q.Data, scales); err != nil {
		return q, scale, err
	}
	return q, scaleOfWeight(w, s, scales), nil
}

// weightScales returns the memory for the scales of the weight w, checked
// by checkWeight, one per row, and for PerTensor its max|x| and the scale
// of every row, all the same.
func weightScales(ctx context.Context, w safetensors.Tensor, s Strategy) (scales []float32, m float32, err error) {
	out, in := int(w.Shape[0]), int(w.Shape[1])
	scales = make([]float32, out)
	if s != PerTensor {
		return scales, 0, nil
	}
	if m, err = maxAbs(ctx, w, out, in); err != nil {
		return nil, 0, err
	}
	sc := scaleOf(m, w.DType)
	for i := range scales {
		scales[i] = sc
	}
	return scales, m, nil
}

// scaleOfWeight returns the scale tensor of the weight w from the scales
// of its rows.
func scaleOfWeight(w safetensors.Tensor, s Strategy, scales []float32) safetensors.Tensor {
	if s == PerTensor {
		return scaleTensor(w, scales[:1], []uint64{1})
	}
	return scaleTensor(w, scales, []uint64{w.Shape[0], 1})
}

// quantRows quantizes the rows [lo, hi) of the weight w, checked by
// checkWeight, into dst, their (hi-lo)*in int8 values, in parallel (see
// forRows). For PerChannel it sets their scales in scales; for PerTensor,
// scales holds them already (weightScales), and m is the tensor's max|x|.
func quantRows(ctx context.Context, w safetensors.Tensor, s Strategy, m float32, lo, hi int, dst []byte, scales []float32) error {
	in := int(w.Shape[1])
	return forRows(ctx, hi-lo, in, func(a, b int, buf []float32) error {
		for r := lo + a; r < lo+b; r++ {
			q := dst[(r-lo)*in : (r-lo+1)*in]
			if s == PerTensor {
				if readsBF16Bytes(w.DType) {
					quantRowBF16(q, w.Data[2*r*in:2*(r+1)*in], scales[r], m)
					continue
				}
				quantRow(q, row(w, r, in, buf), scales[r], m, w.DType)
				continue
			}
			if readsBF16Bytes(w.DType) {
				raw := w.Data[2*r*in : 2*(r+1)*in]
				rm, bad := rowMaxAbsBF16(raw)
				if bad >= 0 {
					return notFinite(w.Name, r*in+bad, safetensors.BF16ToF32(binary.LittleEndian.Uint16(raw[2*bad:])))
				}
				scales[r] = scaleOf(rm, w.DType)
				quantRowBF16(q, raw, scales[r], rm)
				continue
			}
			x := row(w, r, in, buf)
			rm, bad := rowMaxAbs(x)
			if bad >= 0 {
				return notFinite(w.Name, r*in+bad, x[bad])
			}
			scales[r] = scaleOf(rm, w.DType)
			quantRow(q, x, scales[r], rm, w.DType)
		}
		return nil
	})
}

// DecompressWeight is the inverse of CompressWeight, as compressed-tensors
// computes it: q converted to the scale's dtype and multiplied by the
// scale, rounded to that dtype. scale has shape [out, 1] or [1].
func DecompressWeight(q, scale safetensors.Tensor) (safetensors.Tensor, error) {
	if q.DType != safetensors.I8 || len(q.Shape) != 2 || uint64(len(q.Data)) != q.Shape[0]*q.Shape[1] {
		return safetensors.Tensor{}, fmt.Errorf("%w: tensor %q: want an I8 [out, in] weight, got %v %v", ErrUnsupported, q.Name, q.DType, q.Shape)
	}
	out, in := int(q.Shape[0]), int(q.Shape[1])
	scales, err := scale.Float32s()
	if err != nil {
		return safetensors.Tensor{}, err
	}
	if len(scales) != 1 && len(scales) != out || !quantizable(scale.DType) {
		return safetensors.Tensor{}, fmt.Errorf("%w: scale %q: want an F32, F16 or BF16 tensor of %d or 1 values, got %v %v", ErrUnsupported, scale.Name, out, scale.DType, scale.Shape)
	}
	vals := make([]float32, out*in)
	rnd := rounder(scale.DType)
	for r := range out {
		s := scales[min(r, len(scales)-1)]
		for i, v := range q.Data[r*in : (r+1)*in] {
			vals[r*in+i] = rnd(float32(int8(v)) * s)
		}
	}
	return safetensors.TensorFromFloat32s(q.Name, scale.DType, q.Shape, vals, safetensors.RoundNearestEven)
}

// quantizable reports whether weights of dtype d are quantized, and
// scales of dtype d taken: F32, F16 and BF16, the float dtypes that
// safetensors.TensorFromFloat32s writes, in which the scales and
// decompressed weights are stored. The other floats (F64, the F8, F6 and
// F4 types) are kept as they are.
func quantizable(d safetensors.DType) bool {
	return d == safetensors.F32 || d == safetensors.F16 || d == safetensors.BF16
}

func checkWeight(w safetensors.Tensor) error {
	if !quantizable(w.DType) || len(w.Shape) != 2 {
		return fmt.Errorf("%w: tensor %q: want an F32, F16 or BF16 [out, in] weight, got %v %v", ErrUnsupported, w.Name, w.DType, w.Shape)
	}
	out, in := w.Shape[0], w.Shape[1]
	size := uint64(w.DType.Bits() / 8)
	if in != 0 && out > math.MaxInt/in/size || uint64(len(w.Data)) != out*in*size {
		return fmt.Errorf("%w: tensor %q: %d bytes for %v %v", ErrUnsupported, w.Name, len(w.Data), w.DType, w.Shape)
	}
	return nil
}

func notFinite(name string, i int, v float32) error {
	return fmt.Errorf("%w: tensor %q: element %d is %v", ErrNotFinite, name, i, v)
}

// row returns row r of w decoded to float32, in buf.
func row(w safetensors.Tensor, r, in int, buf []float32) []float32 {
	size := w.DType.Bits() / 8
	b := w.Data[r*in*size : (r+1)*in*size]
	switch w.DType {
	case safetensors.BF16:
		return safetensors.BF16BytesToF32s(buf[:0], b)
	case safetensors.F16:
		return safetensors.F16BytesToF32s(buf[:0], b)
	}
	if v, err := safetensors.View[float32](safetensors.Tensor{DType: safetensors.F32, Data: b}); err == nil {
		return v // aligned, on a little-endian machine: no copy
	}
	buf = buf[:in]
	for i := range buf {
		buf[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return buf
}

// readsBF16Bytes reports whether the rows of a weight of dtype d are
// quantized from their BF16 bytes (by table, in pure Go) rather than
// decoded to float32 first: for BF16 without the AVX2 loops, which decode
// and divide faster than the table looks up.
func readsBF16Bytes(d safetensors.DType) bool { return d == safetensors.BF16 && !useAVX2 }

// rowMaxAbs returns max|x| over x, or the index of a NaN or ±Inf.
func rowMaxAbs(x []float32) (m float32, bad int) {
	hi := maxAbsBits(x)
	if hi >= 0x7f800000 {
		for i, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, i
			}
		}
	}
	return math.Float32frombits(hi), -1
}

// maxAbsBitsGo returns the largest float32 bits of x, sign cleared.
func maxAbsBitsGo(x []float32) uint32 {
	var h0, h1, h2, h3 uint32 // four chains of max, not one
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		h0 = max(h0, math.Float32bits(v[0])&0x7fffffff)
		h1 = max(h1, math.Float32bits(v[1])&0x7fffffff)
		h2 = max(h2, math.Float32bits(v[2])&0x7fffffff)
		h3 = max(h3, math.Float32bits(v[3])&0x7fffffff)
	}
	for _, v := range x[i:] {
		h0 = max(h0, math.Float32bits(v)&0x7fffffff)
	}
	return max(h0, h1, h2, h3)
}

// rowMaxAbsBF16 returns max|x| over a row of BF16 bytes, or the index of
// a NaN or ±Inf: four elements at a time in 64-bit words, whose 16-bit
// lanes keep their own maximum.
func rowMaxAbsBF16(b []byte) (m float32, bad int) {
	le := binary.LittleEndian
	var m0, m1 uint64
	i := 0
	for ; i+16 <= len(b); i += 16 {
		m0 = laneMax16(m0, le.Uint64(b[i:])&0x7fff7fff7fff7fff)
		m1 = laneMax16(m1, le.Uint64(b[i+8:])&0x7fff7fff7fff7fff)
	}
	w := laneMax16(m0, m1)
	top := max(uint16(w), uint16(w>>16), uint16(w>>32), uint16(w>>48))
	for ; i < len(b); i += 2 {
		top = max(top, le.Uint16(b[i:])&0x7fff)
	}
	if top >= 0x7f80 {
		for k := 0; k < len(b); k += 2 {
			if le.Uint16(b[k:])&0x7fff >= 0x7f80 {
				return 0, k / 2
			}
		}
	}
	return math.Float32frombits(uint32(top) << 16), -1
}

// laneMax16 returns the lane-wise maximum of four 15-bit values in 16-bit
// lanes (their top bits clear): in each lane, (a | 0x8000) - b has its top
// bit set when a >= b, and no lane borrows from the next.
func laneMax16(a, b uint64) uint64 {
	const high = 0x8000800080008000
	ge := ((a | high) - b) & high
	mask := ge - ge>>15 | ge
	return a&mask | b&^mask
}

// quantRowBF16 is quantRow for a row of BF16 bytes, decoded as it goes,
// whose max|x| is at most m: by table where bf16Fast allows.
func quantRowBF16(q, raw []byte, scale, m float32) {
	if t, off, ok := bf16Fast(scale, m); ok {
		quantRowBF16Table(q, raw, t, off)
		return
	}
	q = q[:len(raw)/2]
	raw = raw[:2*len(q)]
	inv := 1 / scale
	if inv > math.MaxFloat32 {
		for i := range q {
			v := math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
			q[i] = toInt8(roundBF16(float32(v / scale)))
		}
		return
	}
	for i := range q {
		v := math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		y := float32(v * inv)
		if uint16(math.Float32bits(y)-0x8000+nearMidpoint) <= 2*nearMidpoint {
			y = float32(v / scale)
		}
		q[i] = toInt8(roundBF16(y))
	}
}

// maxAbs returns max|x| over the whole of w, in parallel.
func maxAbs(ctx context.Context, w safetensors.Tensor, out, in int) (float32, error) {
	var mu sync.Mutex
	var m float32
	err := forRows(ctx, out, in, func(lo, hi int, buf []float32) error {
		var local float32
		for r := lo; r < hi; r++ {
			if readsBF16Bytes(w.DType) {
				raw := w.Data[2*r*in : 2*(r+1)*in]
				rm, bad := rowMaxAbsBF16(raw)
				if bad >= 0 {
					return notFinite(w.Name, r*in+bad, safetensors.BF16ToF32(binary.LittleEndian.Uint16(raw[2*bad:])))
				}
				local = max(local, rm)
				continue
			}
			x := row(w, r, in, buf)
			rm, bad := rowMaxAbs(x)
			if bad >= 0 {
				return notFinite(w.Name, r*in+bad, x[bad])
			}
			local = max(local, rm)
		}
		mu.Lock()
		m = max(m, local)
		mu.Unlock()
		return nil
	})
	return m, err
}

// scaleOf returns the scale of a row or tensor whose max|x| is m: m / 127.5
// rounded to d, or d's epsilon if that is 0. max(|min(lo, 0)|, max(hi, 0))
// is max|x|.
func scaleOf(m float32, d safetensors.DType) float32 {
	s := rounder(d)(m / 127.5)
	if s == 0 {
		return eps(d)
	}
	return s
}

// eps returns torch.finfo(d).eps.
func eps(d safetensors.DType) float32 {
	switch d {
	case safetensors.BF16:
		return 0x1p-7
	case safetensors.F16:
		return 0x1p-10
	}
	return 0x1p-23
}

// rounder returns the function that rounds a float32 to the nearest value
// of d, ties to even.
func rounder(d safetensors.DType) func(float32) float32 {
	switch d {
	case safetensors.BF16:
		return roundBF16
	case safetensors.F16:
		return roundF16
	}
	return func(f float32) float32 { return f }
}

// roundBF16 rounds a finite or infinite f to the nearest BF16, ties to
// even.
func roundBF16(f float32) float32 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}

func roundF16(f float32) float32 {
	return safetensors.F16ToF32(safetensors.F32ToF16(f, safetensors.RoundNearestEven))
}

// quantRow writes round_half_even(clamp(round_d(x / scale), -128, 127))
// into q; m is at least max|x| over x.
func quantRow(q []byte, x []float32, scale, m float32, d safetensors.DType) {
	q = q[:len(x)]
	// With AVX2, eight quotients at a time, each rounded as the rule says.
	switch d {
	case safetensors.BF16:
		if quantRoundDiv(q, x, scale, 16) > 0 {
			return
		}
	case safetensors.F16:
		if quantRoundDiv(q, x, scale, 13) > 0 {
			return
		}
	default:
		if quantF32Div(q, x, scale) > 0 {
			return
		}
	}
	inv := 1 / scale
	if inv > math.MaxFloat32 {
		rnd := rounder(d)
		for i, v := range x {
			q[i] = toInt8(rnd(float32(v / scale)))
		}
		return
	}
	switch d {
	case safetensors.BF16:
		// x * (1/scale) is within a few float32 units in the last place
		// of x / scale, so it rounds to the same BF16 value unless it lies
		// that close to a midpoint between two BF16 values, whose low 16
		// bits are 0x8000; then the quotient is computed. The BF16 value
		// decides the rest, and a multiplication costs less than a
		// division.
		for i, v := range x {
			y := float32(v * inv)
			if uint16(math.Float32bits(y)-0x8000+nearMidpoint) <= 2*nearMidpoint {
				y = float32(v / scale)
			}
			q[i] = toInt8(roundBF16(y))
		}
	case safetensors.F16:
		// As for BF16, with F16's midpoints: low 13 bits 0x1000. The
		// rounding to F16's 10 bits of mantissa is that of a normal F16;
		// below F16's normal range (2^-14) both it and the true rounding
		// give values below 1/2, which q rounds to 0, and above it
		// (65504) both give q's clamp.
		for i, v := range x {
			u := math.Float32bits(float32(v * inv))
			if (u-0x1000+nearMidpoint)&0x1fff <= 2*nearMidpoint {
				u = math.Float32bits(float32(v / scale))
			}
			u += 0xfff + u>>13&1
			q[i] = toInt8(math.Float32frombits(u &^ 0x1fff))
		}
	default:
		quantRowF32(q, x, scale, inv, m)
	}
}

// quantRowF32 is quantRow for F32, where q = round_half_even(clamp(x /
// scale)). x * inv is within 3 float32 units in the last place of x /
// scale, less than 2^-15 below 128. Adding 1.5·2^11 rounds it to a
// multiple of 2^-12 (exact while |x * inv| < 2^10) whose float32 bits, less
// those of 1.5·2^11, are F = x * inv · 2^12 as an integer: unless F is
// within 4 of a half-integer (F mod 2^12 near 2^11), x / scale rounds to
// the same integer as F / 2^12, (F + 2^11) >> 12; otherwise the quotient is
// computed. m * inv < 128, where m bounds max|x|, keeps q in [-128, 128];
// other rows divide.
func quantRowF32(q []byte, x []float32, scale, inv, m float32) {
	if !(m*inv < 128) {
		for i, v := range x {
			q[i] = toInt8(float32(v / scale))
		}
		return
	}
	quantRowF32Fixed(q, x, scale, inv, fixedMagic)
}

// slowF32 returns round_half_even(v / scale) · 2^12, for quantRowF32Fixed's
// values near a tie.
//
//go:noinline
func slowF32(v, scale float32) int32 {
	k := float32(float32(v/scale) + roundMagic)
	return (int32(math.Float32bits(k)) - 0x4b400000) << 12
}

// fixedMagic is 1.5·2^11, whose float32 units in the last place are 2^-12.
const fixedMagic = 0x1.8p11

// quantRowF32Fixed is quantRowF32's loop, eight elements an iteration; magic
// is fixedMagic, passed in so that it stays in a register.
func quantRowF32Fixed(q []byte, x []float32, scale, inv, magic float32) {
	n := min(len(q), len(x))
	q, x = q[:n], x[:n]
	// t is F + 2^11, so that q = t >> 12 and the ties are at t ≡ 0 mod 2^12.
	mb := math.Float32bits(magic) - 0x800
	one := func(v float32) byte {
		t := int32(math.Float32bits(float32(v*inv)+magic) - mb)
		if uint32(t+4)&0xfff <= 8 {
			t = slowF32(v, scale)
		}
		return byte(int8(min(t>>12, 127)))
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		v := x[i : i+8 : i+8]
		o := q[i : i+8 : i+8]
		o[0], o[1], o[2], o[3] = one(v[0]), one(v[1]), one(v[2]), one(v[3])
		o[4], o[5], o[6], o[7] = one(v[4]), one(v[5]), one(v[6]), one(v[7])
	}
	for ; i < n; i++ {
		q[i] = one(x[i])
	}
}

// nearMidpoint is how many float32 units in the last place from a BF16
// midpoint a product x * (1/scale) must be for quantRow to compute x /
// scale instead: the two differ by at most 3, and by at most 6 in bits
// across a power of two.
const nearMidpoint = 64

// roundMagic is 1.5 * 2^23: adding it to a float32 of magnitude at most
// 2^22 leaves no fraction bits, so that the addition rounds to an integer,
// half to even, as IEEE 754 rounds.
const roundMagic = 0x1.8p23

// toInt8 clamps v, which is not NaN, to [-128, 127] and rounds it half to
// even. The explicit conversions keep each operation rounded to float32.
func toInt8(v float32) byte {
	if v < -128 {
		v = -128
	} else if v > 127 {
		v = 127
	}
	r := float32(float32(v+roundMagic) - roundMagic)
	return byte(int8(int32(r)))
}

func scaleTensor(w safetensors.Tensor, scales []float32, shape []uint64) safetensors.Tensor {
	t, _ := safetensors.TensorFromFloat32s(ScaleName(w.Name), w.DType, shape, scales, safetensors.RoundNearestEven) // exact: the scales are values of the dtype
	return t
}

// forRows calls f on ranges of the rows [0, out) from GOMAXPROCS goroutines,
// each with a buffer of in float32s, and returns the first error, or
// context.Cause(ctx) once ctx is done, as parallel.For does. Each
// call is guarded: a fault on the memory of a file truncated while mapped
// is an error wrapping safetensors.ErrFileChanged, not the end of the
// program.
func forRows(ctx context.Context, out, in int, f func(lo, hi int, buf []float32) error) error {
	workers := min(runtime.GOMAXPROCS(0), out)
	if out*in < 1<<16 {
		workers = 1
	}
	if workers <= 1 {
		if out == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx) // as parallel.For returns it
		}
		return safetensors.GuardFaults(func() error { return f(0, out, make([]float32, in)) })
	}
	// Small blocks of rows, handed out in turn, keep the goroutines busy
	// to the end.
	block := max(1, min(out/(workers*8), (1<<20)/max(in, 1)))
	bufs := make([][]float32, workers)
	return parallel.For(ctx, (out+block-1)/block, workers, func(w, k int) error {
		if bufs[w] == nil {
			bufs[w] = make([]float32, in)
		}
		lo := k * block
		return safetensors.GuardFaults(func() error { return f(lo, min(lo+block, out), bufs[w]) })
	})
}
