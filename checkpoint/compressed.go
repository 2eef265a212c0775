package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/safetensors-go/safetensors"
)

// compressed-tensors' formats whose weights Convert dequantizes.
const (
	formatInt    = "int-quantized"        // I8 values
	formatFloat  = "float-quantized"      // F8_E4M3 values
	formatPacked = "pack-quantized"       // integers of 1 to 8 bits packed in I32 words
	formatNVFP4  = "nvfp4-pack-quantized" // two E2M1 values a byte
)

// groupBits returns the num_bits of compressed-tensors' config groups'
// weights, where they agree, or 0.
func groupBits(qc map[string]any) int {
	groups, _ := qc["config_groups"].(map[string]any)
	bits := 0
	for _, g := range groups {
		g, _ := g.(map[string]any)
		w, _ := g["weights"].(map[string]any)
		n, ok := positiveInt(w["num_bits"])
		if !ok || n > 8 || bits != 0 && int(n) != bits {
			return 0
		}
		bits = int(n)
	}
	return bits
}

// recognizeCompressed lists compressed-tensors' weights: each module's
// "weight_scale" beside its "weight_packed" or its I8 or F8_E4M3
// "weight", with its "weight_zero_point", "weight_global_scale" and
// "weight_shape" where it has them.
func recognizeCompressed(q *Quantization, names []string, infos map[string]safetensors.TensorInfo) {
	has := func(n string) bool { _, ok := infos[n]; return ok }
	opt := func(n string) string {
		if has(n) {
			return n
		}
		return ""
	}
	for _, n := range names {
		m, ok := cutAny(n, ".weight_scale")
		if !ok {
			if m, ok := cutAny(n, ".input_scale", ".input_zero_point", ".input_global_scale", ".output_scale", ".output_zero_point"); ok && has(m+".weight_scale") {
				q.Others = append(q.Others, n)
			}
			continue
		}
		w := QuantizedWeight{Name: m + ".weight", Scale: n, ZeroPoint: opt(m + ".weight_zero_point"),
			GlobalScale: opt(m + ".weight_global_scale"), ShapeTensor: opt(m + ".weight_shape")}
		switch {
		case has(m + ".weight_packed"):
			w.Values = m + ".weight_packed"
			if p := infos[w.Values]; p.DType == safetensors.U8 { // NVFP4: two E2M1 values a byte
				w.Bits = 4
				if len(p.Shape) == 2 {
					w.Shape = []uint64{p.Shape[0], 2 * p.Shape[1]}
				}
			} else {
				w.Bits = q.numBits
			}
		case has(m + ".weight"):
			w.Values = m + ".weight"
			v := infos[w.Values]
			w.Shape, w.Bits = v.Shape, v.DType.Bits()
		default:
			continue
		}
		q.Weights = append(q.Weights, w)
	}
	for i := range q.Weights {
		q.Weights[i].Err = checkCompressed(&q.Weights[i], infos)
	}
}

// ReadShapes reads, from src, the shapes of the weights of compressed-
// tensors' pack-quantized format, which their "weight_shape" tensors hold,
// where RecognizeQuantization, which reads no values, left them out, and
// checks those weights' tensors against them (QuantizedWeight.Err).
// Checkpoint.Quantization calls it. It does nothing for other methods.
func (q *Quantization) ReadShapes(ctx context.Context, src safetensors.ElementSource) error {
	if q.Method != MethodCompressedTensors {
		return nil
	}
	infos := map[string]safetensors.TensorInfo{}
	for i := range q.Weights {
		w := &q.Weights[i]
		for _, n := range w.Tensors() {
			info, err := src.Info(n)
			if err != nil {
				return err
			}
			info.Name = n
			infos[n] = info
		}
		if w.Shape != nil {
			continue
		}
		if w.ShapeTensor == "" {
			w.Err = fmt.Errorf("%s is packed without its weight_shape", w.Values)
			continue
		}
		s := infos[w.ShapeTensor]
		if !isInt(s.DType) || numElements(s.Shape) != 2 {
			w.Err = fmt.Errorf("its shape %s is %v %v, not two integers", w.ShapeTensor, s.DType, s.Shape)
			continue
		}
		t, err := src.TensorElements(ctx, w.ShapeTensor, 0, 2, nil)
		if err != nil {
			return err
		}
		var dims []uint64
		for i := range 2 {
			size := t.DType.Bits() / 8
			var v int64
			switch size {
			case 1:
				v = int64(int8(t.Data[i]))
			case 2:
				v = int64(int16(binary.LittleEndian.Uint16(t.Data[2*i:])))
			case 4:
				v = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
			default:
				v = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			}
			if v < 0 || v > math.MaxUint32 {
				dims = nil
				break
			}
			dims = append(dims, uint64(v))
		}
		if dims == nil {
			w.Err = fmt.Errorf("its shape %s does not hold two sizes", w.ShapeTensor)
			continue
		}
		w.Shape = dims
		w.Err = checkCompressed(w, infos)
	}
	q.count(infos)
	return nil
}

// isInt reports whether d is a signed integer dtype.
func isInt(d safetensors.DType) bool {
	return d == safetensors.I8 || d == safetensors.I16 || d == safetensors.I32 || d == safetensors.I64
}

// checkCompressed returns what is wrong with the compressed-tensors weight
// w, whose Shape (nil where it is not read yet) and Bits are set.
func checkCompressed(w *QuantizedWeight, infos map[string]safetensors.TensorInfo) error {
	v, s := infos[w.Values], infos[w.Scale]
	if w.Shape == nil {
		return nil // read later (ReadShapes)
	}
	if len(w.Shape) != 2 || len(v.Shape) != 2 {
		return fmt.Errorf("%s has shape %v, not [out, in]", w.Values, v.Shape)
	}
	out, in := w.Shape[0], w.Shape[1]
	switch {
	case v.DType == safetensors.I32:
		if w.Bits < 1 || w.Bits > 8 {
			// Without num_bits in the config: the one width that gives the
			// packed shape.
			for b := 1; b <= 8; b++ {
				if ceilDiv(in*uint64(b), 32) == v.Shape[1] {
					w.Bits = b
					break
				}
			}
		}
		if want := []uint64{out, ceilDiv(in*uint64(w.Bits), 32)}; w.Bits < 1 || w.Bits > 8 || !slices.Equal(v.Shape, want) {
			return fmt.Errorf("%s has shape %v, not [%d, ceil(%d*%d/32)] for %v values of %d bits", w.Values, v.Shape, out, in, w.Bits, w.Shape, w.Bits)
		}
	case v.DType == safetensors.U8:
		if w.GlobalScale == "" {
			return fmt.Errorf("%s is U8 (NVFP4) without its weight_global_scale", w.Values)
		}
	case v.DType != safetensors.I8 && v.DType != safetensors.F8_E4M3:
		return fmt.Errorf("%s is %v, not I8, F8_E4M3, or I32 or U8 packed", w.Values, v.DType)
	}
	sd := s.DType
	if sd != safetensors.F32 && sd != safetensors.BF16 && sd != safetensors.F16 && !(v.DType == safetensors.U8 && sd == safetensors.F8_E4M3) {
		return fmt.Errorf("its scale %s is %v, not F32, BF16 or F16", w.Scale, sd)
	}
	k, err := scaleColumns(w.Shape, s.Shape)
	if err != nil {
		return fmt.Errorf("its scale %s: %w", w.Scale, err)
	}
	if w.GlobalScale != "" {
		if g := infos[w.GlobalScale]; numElements(g.Shape) != 1 || !g.DType.IsFloat() || g.DType.Bits() < 16 {
			return fmt.Errorf("its global scale %s is %v %v, not one F32 value", w.GlobalScale, g.DType, g.Shape)
		}
	}
	if w.ZeroPoint != "" {
		z := infos[w.ZeroPoint]
		want := []uint64{out, k}
		if k == 0 {
			want = s.Shape
		}
		if v.DType == safetensors.I32 {
			if z.DType != safetensors.I32 || k == 0 {
				return fmt.Errorf("its zero points %s are %v %v, not I32 packed by column", w.ZeroPoint, z.DType, z.Shape)
			}
			want = []uint64{ceilDiv(out*uint64(w.Bits), 32), k}
		} else if z.DType != safetensors.I8 && z.DType != safetensors.U8 {
			return fmt.Errorf("its zero points %s are %v, not I8", w.ZeroPoint, z.DType)
		}
		if !slices.Equal(z.Shape, want) {
			return fmt.Errorf("its zero points %s have shape %v, not %v", w.ZeroPoint, z.Shape, want)
		}
	}
	return nil
}

// scaleColumns returns the scales a row of a weight of shape w (out, in)
// has, for a scale of shape s: 0 for one scale for the whole weight; 1
// for one a row; in/group for one a group of columns (which must divide
// in, as compressed-tensors requires).
func scaleColumns(w, s []uint64) (uint64, error) {
	out, in := w[0], w[1]
	switch {
	case len(s) <= 1 && numElements(s) == 1:
		return 0, nil
	case len(s) == 2 && s[0] == out && s[1] == 1:
		return 1, nil
	case len(s) == 2 && s[0] == out && s[1] > 0 && in%s[1] == 0:
		return s[1], nil
	}
	return 0, fmt.Errorf("shape %v fits no strategy for a weight of shape %v (one scale, one a row, one a group of columns)", s, w)
}

// fp4Values are the 16 values of E2M1, by their code (8 is -0).
var fp4Values = [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, math.Copysign(0, -1), -0.5, -1, -1.5, -2, -3, -4, -6}

// rounder returns the rounding of a float32 to the dtype d, to nearest
// even, as PyTorch rounds a result to it; nil for F32.
func rounder(d safetensors.DType) func(float32) float32 {
	switch d {
	case safetensors.BF16:
		return func(x float32) float32 {
			return safetensors.BF16ToF32(safetensors.F32ToBF16(x, safetensors.RoundNearestEven))
		}
	case safetensors.F16:
		return func(x float32) float32 {
			return safetensors.F16ToF32(safetensors.F32ToF16(x, safetensors.RoundNearestEven))
		}
	}
	return nil
}

// dequantCompressed computes the rows [c.r0, c.r1) of a compressed-
// tensors weight, as its decompressor does (compressed-tensors 0.20's
// dequantize): in the scale's dtype W, each value q converted to W, less
// its zero point converted to W (rounded to W), times its scale (rounded
// to W); for NVFP4, in float32, each E2M1 value times its F8_E4M3 scale
// divided by the global scale, rounded to BF16. The result is then
// converted to the dtype to.
func (cv *converter) dequantCompressed(m *convertSlot, c *dequantChunk, to safetensors.DType) ([]byte, uint64, error) {
	w := c.w
	v, err := cv.ck.Info(w.Values)
	if err != nil {
		return nil, 0, err
	}
	s, err := cv.ck.Info(w.Scale)
	if err != nil {
		return nil, 0, err
	}
	in := w.Shape[1]
	k, _ := scaleColumns(w.Shape, s.Shape) // checked by checkCompressed
	// The values of the rows, as stored.
	per := in // stored elements a row
	if len(v.Shape) == 2 {
		per = v.Shape[1]
	}
	vt, err := cv.read(&m.in, w.Values, c.r0*per, c.r1*per)
	if err != nil {
		return nil, 0, err
	}
	// Their scales: k a row, or one.
	s0, s1 := c.r0*k, c.r1*k
	if k == 0 {
		s0, s1 = 0, 1
	}
	st, err := cv.read(&m.scaleIn, w.Scale, s0, s1)
	if err != nil {
		return nil, 0, err
	}
	if m.scales, err = st.AppendFloat32s(m.scales[:0]); err != nil {
		return nil, 0, err
	}
	scales := m.scales
	group := in // columns a scale
	if k > 0 {
		group = in / k
	}
	round := rounder(s.DType)
	refRound := (func(float32) float32)(nil)
	if v.DType == safetensors.U8 { // NVFP4: the scale over the global scale, in float32
		gt, err := cv.ck.TensorElements(cv.ctx, w.GlobalScale, 0, 1, nil)
		if err != nil {
			return nil, 0, err
		}
		g, err := gt.Float32s()
		if err != nil {
			return nil, 0, err
		}
		for i := range scales {
			scales[i] /= g[0]
		}
		round, refRound = nil, rounder(safetensors.BF16)
	}
	// The zero points of the rows: for packed values, unpacked from the
	// whole tensor, small, into m.zeros; otherwise k a row, as the scales.
	var zeros []float32
	if w.ZeroPoint != "" {
		z, err := cv.ck.Info(w.ZeroPoint)
		if err != nil {
			return nil, 0, err
		}
		if v.DType == safetensors.I32 {
			zt, err := cv.read(&m.zeroIn, w.ZeroPoint, 0, numElements(z.Shape))
			if err != nil {
				return nil, 0, err
			}
			zeros = m.zeros[:0]
			words := z.Shape[0]
			for r := c.r0; r < c.r1; r++ {
				for j := range k {
					// Column j of the words holds the zero points of
					// the rows, w.Bits bits each.
					zeros = append(zeros, float32(unpackBits(r, w.Bits, func(word uint64) uint32 {
						return binary.LittleEndian.Uint32(zt.Data[4*(word*k+j):])
					}, words)))
				}
			}
		} else {
			zt, err := cv.read(&m.zeroIn, w.ZeroPoint, s0, s1)
			if err != nil {
				return nil, 0, err
			}
			zeros = m.zeros[:0]
			for _, b := range zt.Data {
				zeros = append(zeros, float32(int8(b)))
			}
		}
		if round != nil {
			for i, z := range zeros {
				zeros[i] = round(z)
			}
		}
		m.zeros = zeros
	}
	var f8 *[256]float32
	if v.DType == safetensors.F8_E4M3 {
		f8 = f8Values(v.DType)
	}
	n := (c.r1 - c.r0) * in
	if uint64(cap(m.f32)) < n {
		m.f32 = make([]float32, n)
	}
	vals := m.f32[:n]
	for r := c.r0; r < c.r1; r++ {
		row := vt.Data[(r-c.r0)*per*uint64(v.DType.Bits()/8):]
		for j := range in {
			var q float32
			switch v.DType {
			case safetensors.I8:
				q = float32(int8(row[j]))
			case safetensors.F8_E4M3:
				q = f8[row[j]]
			case safetensors.U8:
				q = float32(fp4Values[row[j/2]>>(4*(j%2))&0x0f])
			default: // I32 words, w.Bits bits a value
				q = float32(unpackBits(j, w.Bits, func(word uint64) uint32 {
					return binary.LittleEndian.Uint32(row[4*word:])
				}, per))
			}
			si := (r - c.r0) * k
			if k == 0 {
				si = 0
			}
			si += j / group
			x := q
			if zeros != nil {
				x -= zeros[si]
				if round != nil {
					x = round(x)
				}
			}
			x *= scales[si]
			if round != nil {
				x = round(x)
			}
			if refRound != nil {
				x = refRound(x)
			}
			vals[(r-c.r0)*in+j] = x
		}
	}
	return encode(m, vals, to), uint64(len(vt.Data)), nil
}

// unpackBits returns the value i of a stream of words (word(0), ...,
// word(words-1), little-endian bits) holding values of bits bits, less
// 1<<(bits-1), as compressed-tensors' unpack_from_int32 gives it.
func unpackBits(i uint64, bits int, word func(uint64) uint32, words uint64) int {
	at := i * uint64(bits)
	w, off := at/32, at%32
	x := uint64(word(w)) >> off
	if off+uint64(bits) > 32 && w+1 < words {
		x |= uint64(word(w+1)) << (32 - off)
	}
	x &= 1<<bits - 1
	return int(x) - 1<<(bits-1)
}
