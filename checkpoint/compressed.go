package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors"
)

// compressed-tensors' formats (its CompressionFormat), as config.json's
// quantization_config and its config groups name them.
const (
	formatInt    = "int-quantized"        // I8 values
	formatFloat  = "float-quantized"      // F8_E4M3 values
	formatNaive  = "naive-quantized"      // I8 or F8_E4M3 values: int- and float-quantized's decompressor
	formatPacked = "pack-quantized"       // integers of 1 to 8 bits packed in I32 words
	formatNVFP4  = "nvfp4-pack-quantized" // two E2M1 values a byte, F8_E4M3 scales over a global scale
	formatMXFP4  = "mxfp4-pack-quantized" // two E2M1 values a byte, E8M0 scales a group of 32
	formatMXFP6  = "mxfp6-pack-quantized" // four E2M3 values in three bytes, E8M0 scales a group of 32
	formatMXFP8  = "mxfp8-quantized"      // F8_E4M3 values, E8M0 scales a group of 32
	formatDense  = "dense"                // the weights stored as they are, beside their scales
	formatMixed  = "mixed-precision"      // a format a config group
)

// dequantFormats are the compressed-tensors formats that Convert
// dequantizes: every one whose decompressor compressed-tensors 0.20
// registers. Its other formats (sparse-bitmask, sparse-24-bitmask,
// marlin-24) have none: 0.20 neither compresses nor decompresses them.
var dequantFormats = []string{formatInt, formatFloat, formatNaive, formatPacked, formatNVFP4, formatMXFP4, formatMXFP6, formatMXFP8, formatDense, formatMixed}

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

// groupBlock returns the block_structure [rows, columns] of compressed-
// tensors' config groups of the block strategy, where they agree, or nil.
func groupBlock(qc map[string]any) []uint64 {
	groups, _ := qc["config_groups"].(map[string]any)
	var block []uint64
	for _, g := range groups {
		g, _ := g.(map[string]any)
		w, _ := g["weights"].(map[string]any)
		if st, _ := w["strategy"].(string); st != "block" {
			continue
		}
		bs, _ := w["block_structure"].([]any)
		if len(bs) != 2 {
			return nil
		}
		var b []uint64
		for _, v := range bs {
			n, ok := positiveInt(v)
			if !ok {
				return nil
			}
			b = append(b, n)
		}
		if block != nil && !slices.Equal(block, b) {
			return nil
		}
		block = b
	}
	return block
}

// recognizeCompressed lists compressed-tensors' weights: each module's
// "weight_scale" beside its "weight_packed" or its I8 or F8_E4M3
// "weight" (a weight of another float dtype for the dense format), with
// its "weight_zero_point", "weight_global_scale" and "weight_shape" where
// it has them. Each weight's format is the one its tensors say (for
// mixed-precision, a format a weight).
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
		s := infos[n]
		switch {
		case has(m + ".weight_packed"):
			w.Values = m + ".weight_packed"
			p := infos[w.Values]
			if p.DType != safetensors.U8 {
				w.format, w.Bits = formatPacked, q.numBits
				break
			}
			// Two E2M1 values a byte (NVFP4, MXFP4), or four E2M3 values
			// in three bytes (MXFP6), whose E8M0 scales are a group of 32:
			// 24 bytes a scale, not 16.
			w.format, w.Bits = formatNVFP4, 4
			if s.DType == safetensors.U8 && w.GlobalScale == "" || q.Format == formatMXFP4 || q.Format == formatMXFP6 {
				w.format = formatMXFP4
				if q.Format == formatMXFP6 || q.Format != formatMXFP4 && len(p.Shape) == 2 && len(s.Shape) == 2 && p.Shape[1] == 24*s.Shape[1] {
					w.format, w.Bits = formatMXFP6, 6
				}
			}
			if len(p.Shape) == 2 {
				if w.Bits == 6 {
					w.Shape = []uint64{p.Shape[0], p.Shape[1] / 3 * 4}
				} else {
					w.Shape = []uint64{p.Shape[0], 2 * p.Shape[1]}
				}
			}
		case has(m + ".weight"):
			w.Values = m + ".weight"
			v := infos[w.Values]
			w.Shape, w.Bits = v.Shape, v.DType.Bits()
			switch {
			case v.DType == safetensors.F8_E4M3 && s.DType == safetensors.U8:
				w.format = formatMXFP8
			case v.DType == safetensors.I8:
				w.format = formatInt
			case v.DType == safetensors.F8_E4M3:
				w.format = formatFloat
			case v.DType.IsFloat() && (q.Format == formatDense || q.Format == formatMixed):
				w.format = formatDense
			}
			if (w.format == formatInt || w.format == formatFloat) && q.Format == formatNaive {
				w.format = formatNaive
			}
			if q.ctBlock != nil && w.format != formatMXFP8 && len(v.Shape) == 2 && len(s.Shape) == 2 {
				if b := q.ctBlock; s.Shape[0] == ceilDiv(v.Shape[0], b[0]) && s.Shape[1] == ceilDiv(v.Shape[1], b[1]) {
					w.block = b
				}
			}
		default:
			continue
		}
		q.Weights = append(q.Weights, w)
	}
	if q.ctBlock == nil {
		inferCompressedBlock(q, infos)
	}
	for i := range q.Weights {
		q.Weights[i].Err = checkCompressed(&q.Weights[i], infos)
	}
}

// inferCompressedBlock gives the I8 and F8_E4M3 weights whose scales fit
// no other strategy the block strategy, without a config that says its
// block_structure (a lone file): the power of two that gives every such
// scale's shape, as for FP8 (inferBlockSize), where one does.
func inferCompressedBlock(q *Quantization, infos map[string]safetensors.TensorInfo) {
	var ws []QuantizedWeight
	var at []int
	for i, w := range q.Weights {
		s := infos[w.Scale].Shape
		if (w.format == formatInt || w.format == formatFloat || w.format == formatNaive) && len(w.Shape) == 2 && len(s) == 2 {
			if _, err := scaleColumns(w.Shape, s); err != nil {
				ws, at = append(ws, w), append(at, i)
			}
		}
	}
	if len(ws) == 0 {
		return
	}
	if b, amb := inferBlockSize(ws, infos); b != nil && amb == "" {
		for _, i := range at {
			q.Weights[i].block = b
		}
		q.BlockSize = b
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
	if w.format == formatDense {
		return nil // a plain weight, which its scales leave as it is
	}
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
	case v.DType == safetensors.U8 && w.format == formatNVFP4:
		if w.GlobalScale == "" {
			return fmt.Errorf("%s is U8 (NVFP4) without its weight_global_scale", w.Values)
		}
	case v.DType == safetensors.U8 && w.format == formatMXFP6:
		if v.Shape[1]%3 != 0 {
			return fmt.Errorf("%s has shape %v: its rows are not of whole 3 bytes (four E2M3 values)", w.Values, v.Shape)
		}
	case v.DType == safetensors.U8 && w.format == formatMXFP4:
	case v.DType != safetensors.I8 && v.DType != safetensors.F8_E4M3:
		return fmt.Errorf("%s is %v, not I8, F8_E4M3, or I32 or U8 packed", w.Values, v.DType)
	}
	sd := s.DType
	mx := w.format == formatMXFP4 || w.format == formatMXFP6 || w.format == formatMXFP8
	switch {
	case mx && sd != safetensors.U8:
		return fmt.Errorf("its scale %s is %v, not U8 (E8M0, %s)", w.Scale, sd, w.format)
	case mx:
	case sd == safetensors.F8_E4M3 && w.format == formatNVFP4:
	case sd != safetensors.F32 && sd != safetensors.BF16 && sd != safetensors.F16:
		return fmt.Errorf("its scale %s is %v, not F32, BF16 or F16", w.Scale, sd)
	}
	if w.block != nil { // [ceil(out/rows), ceil(in/columns)] scales, and zero points
		if w.ZeroPoint != "" {
			if z := infos[w.ZeroPoint]; !slices.Equal(z.Shape, s.Shape) || z.DType != safetensors.I8 {
				return fmt.Errorf("its zero points %s are %v %v, not I8 %v", w.ZeroPoint, z.DType, z.Shape, s.Shape)
			}
		}
		return nil
	}
	k, err := scaleColumns(w.Shape, s.Shape)
	if err != nil {
		return fmt.Errorf("its scale %s: %w", w.Scale, err)
	}
	if mx && (k == 0 || in/k != 32) {
		return fmt.Errorf("its scale %s has shape %v, not [%d, %d/32] (%s: one scale a group of 32)", w.Scale, s.Shape, out, in, w.format)
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
		switch {
		case mx || w.format == formatNVFP4:
			return fmt.Errorf("it has zero points %s, which %s does not dequantize (symmetric only)", w.ZeroPoint, w.format)
		case v.DType == safetensors.I32:
			if z.DType != safetensors.I32 || k == 0 {
				return fmt.Errorf("its zero points %s are %v %v, not I32 packed by column", w.ZeroPoint, z.DType, z.Shape)
			}
			want = []uint64{ceilDiv(out*uint64(w.Bits), 32), k}
		case z.DType != safetensors.I8 && z.DType != safetensors.U8:
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

// fp6Values are the 64 values of E2M3, by their code: bit 5 the sign,
// the magnitudes m/8, then (1+m/8)*2^e for e of 0 to 2, as
// compressed-tensors' kE2M3ToFloat.
var fp6Values = sync.OnceValue(func() *[64]float32 {
	var t [64]float32
	for c := range 32 {
		m := float32(c%8) / 8
		if c >= 8 {
			m = (1 + m) * float32(int(1)<<(c/8-1))
		}
		t[c], t[c|32] = m, -m
	}
	return &t
})

// ctCodes returns the values of the codes of the weight w's values
// tensor, of dtype d: 2^Bits integers less 2^(Bits-1) for packed I32
// words, I8's 256, F8_E4M3's 256, E2M1's 16 or E2M3's 64.
func ctCodes(w *QuantizedWeight, d safetensors.DType) []float32 {
	switch {
	case d == safetensors.I32:
		t := make([]float32, 1<<w.Bits)
		for i := range t {
			t[i] = float32(i - 1<<(w.Bits-1))
		}
		return t
	case d == safetensors.I8:
		t := make([]float32, 256)
		for i := range t {
			t[i] = float32(int8(i))
		}
		return t
	case d == safetensors.F8_E4M3:
		return f8Values(d)[:]
	case w.format == formatMXFP6:
		return fp6Values()[:]
	}
	t := make([]float32, 16)
	for i, v := range fp4Values {
		t[i] = float32(v)
	}
	return t
}

// rounding returns the rounding of a float32 to the dtype d, to nearest
// even, as PyTorch rounds a result to it, where it is BF16 or F16.
func rounding(d safetensors.DType, x float32) float32 {
	switch d {
	case safetensors.BF16:
		return math.Float32frombits(bf16Bits(x) << 16)
	case safetensors.F16:
		return safetensors.F16ToF32(safetensors.F32ToF16(x, safetensors.RoundNearestEven))
	}
	return x
}

// outBits returns the bits of x in the dtype to, BF16 (rounded to
// nearest even, bf16Bits) or F32.
func outBits(x float32, to safetensors.DType) uint32 {
	if to == safetensors.BF16 {
		return bf16Bits(x)
	}
	return math.Float32bits(x)
}

// ctValue is a dequantized value as compressed-tensors 0.20's _dequantize
// computes it, in the dtype w (BF16, F16 or F32) of the scale: the value q
// less its zero point z (where hasZero), rounded to w, times its scale s,
// rounded to w; for nvfp4 (s the scale over the global scale), q times s
// in float32, rounded to BF16.
func ctValue(q, s, z float32, hasZero, nvfp4 bool, w safetensors.DType) float32 {
	if nvfp4 {
		return rounding(safetensors.BF16, q*s)
	}
	if hasZero {
		q = rounding(w, q-z)
	}
	return rounding(w, q*s)
}

// mxTables are the output bits of each code of an MX format times each
// E8M0 scale, by format and output dtype: [256 scales][codes].
var mxTables sync.Map // [2]any{format, dtype} -> []uint32

// mxTable returns the bits in the dtype to of each code of codes times
// each E8M0 scale 2^(e-127) (e of 255: +Inf), in BF16, as compressed-
// tensors' decompress_mx_scale and _dequantize compute them: scale e's
// values at [e*len(codes):].
func mxTable(format string, codes []float32, to safetensors.DType) []uint32 {
	key := [2]any{format, to}
	if t, ok := mxTables.Load(key); ok {
		return t.([]uint32)
	}
	t := make([]uint32, 256*len(codes))
	for e := range 256 {
		s := float32(math.Ldexp(1, e-127)) // 2^128 overflows to +Inf, as in BF16
		for c, q := range codes {
			t[e*len(codes)+c] = outBits(ctValue(q, s, 0, false, false, safetensors.BF16), to)
		}
	}
	mxTables.Store(key, t)
	return t
}

// dequantCompressed computes the rows [c.r0, c.r1) of a compressed-
// tensors weight, as its decompressor does (compressed-tensors 0.20's
// dequantize): in the scale's dtype W, each value q converted to W, less
// its zero point converted to W (rounded to W), times its scale (rounded
// to W); for NVFP4, in float32, each E2M1 value times its F8_E4M3 scale
// divided by the global scale, rounded to BF16; for the MX formats, times
// 2^(e-127) in BF16. The result is then converted to the dtype to. Each
// group of values that share a scale is written through a table of the
// output's bits for each code, made for its scale (for the MX formats and
// NVFP4, whose scales have 256 values, one for all).
func (cv *converter) dequantCompressed(m *convertSlot, c *dequantChunk, to safetensors.DType) ([]byte, uint64, error) {
	w := c.w
	if w.format == formatDense {
		return cv.copyDense(m, c, to)
	}
	v, err := cv.ck.Info(w.Values)
	if err != nil {
		return nil, 0, err
	}
	s, err := cv.ck.Info(w.Scale)
	if err != nil {
		return nil, 0, err
	}
	in := w.Shape[1]
	rows := c.r1 - c.r0
	// The scales: bh rows by group columns each, kk a row of them (the
	// last one partial for the block strategy); k of 0 for one scale.
	k, _ := scaleColumns(w.Shape, s.Shape) // checked by checkCompressed
	bh, kk := uint64(1), max(k, 1)
	group := in / kk
	switch {
	case w.block != nil:
		bh, group = w.block[0], w.block[1]
		k = ceilDiv(in, group)
		kk = k
	case k == 0:
		bh = max(w.Shape[0], 1)
	}
	// The values of the rows, as stored: per elements a row.
	per := v.Shape[1]
	vt, err := cv.read(&m.in, w.Values, c.r0*per, c.r1*per)
	if err != nil {
		return nil, 0, err
	}
	rowBytes := per * uint64(v.DType.Bits()/8)
	if uint64(len(vt.Data)) != rows*rowBytes {
		return nil, 0, fmt.Errorf("checkpoint: %s: %d bytes read, not %d", w.Values, len(vt.Data), rows*rowBytes)
	}
	// Their scales: the rows of scales of rows [r0, r1).
	srow0 := c.r0 / bh
	s0, s1 := srow0*kk, ceilDiv(c.r1, bh)*kk
	st, err := cv.read(&m.scaleIn, w.Scale, s0, s1)
	if err != nil {
		return nil, 0, err
	}
	size := uint64(to.Bits() / 8)
	n := rows * in * size
	if uint64(cap(m.buf)) < n {
		m.buf = make([]byte, n)
	}
	out := m.buf[:n]
	codes := ctCodes(w, v.DType)
	kind := ctKindOf(w, v.DType)
	mx := w.format == formatMXFP4 || w.format == formatMXFP6 || w.format == formatMXFP8
	if mx { // a table for every scale
		tabs := mxTable(w.format, codes, to)
		ctRows(kind, out, vt.Data, st.Data, rows, rowBytes, in, kk, group, tabs, m.nibbleLUTs(kind, tabs), uint64(len(codes)), size)
		return out, uint64(len(vt.Data)), nil
	}
	if m.scales, err = st.AppendFloat32s(m.scales[:0]); err != nil {
		return nil, 0, err
	}
	scales := m.scales
	wd := s.DType // the dtype of the arithmetic
	nvfp4 := w.format == formatNVFP4
	var global float32
	if nvfp4 { // the scale over the global scale, in float32
		gt, err := cv.ck.TensorElements(cv.ctx, w.GlobalScale, 0, 1, nil)
		if err != nil {
			return nil, 0, err
		}
		g, err := gt.Float32s()
		if err != nil {
			return nil, 0, err
		}
		global = g[0]
	}
	zeros, err := cv.ctZeros(m, c, v.DType, k, s0, s1)
	if err != nil {
		return nil, 0, err
	}
	if nvfp4 && s.DType == safetensors.F8_E4M3 {
		// A table for each of the 256 F8_E4M3 scales.
		tabs := make([]uint32, 256*16)
		f8 := f8Values(safetensors.F8_E4M3)
		for sc := range 256 {
			ctTable(tabs[sc*16:(sc+1)*16], codes, f8[sc]/global, 0, false, true, wd, to)
		}
		ctRows(kind, out, vt.Data, st.Data, rows, rowBytes, in, kk, group, tabs, m.nibbleLUTs(kind, tabs), 16, size)
		return out, uint64(len(vt.Data)), nil
	}
	tab := make([]uint32, len(codes)) // a group's: 1 KiB at most, a chunk
	for r := range rows {
		src, dst := vt.Data[r*rowBytes:(r+1)*rowBytes], out[r*in*size:(r+1)*in*size]
		for g := range kk {
			si := ((c.r0+r)/bh-srow0)*kk + g
			lo, hi := g*group, min((g+1)*group, in)
			var z float32
			if zeros != nil {
				z = zeros[si]
			}
			scale := scales[si]
			if nvfp4 {
				scale /= global
			}
			if hi-lo < uint64(len(codes))/4 {
				// Groups smaller than their table: each value computed.
				ctDirect(kind, w.Bits, dst, src, lo, hi, codes, scale, z, zeros != nil, nvfp4, wd, to, size)
				continue
			}
			ctTable(tab, codes, scale, z, zeros != nil, nvfp4, wd, to)
			ctGroup(kind, w.Bits, dst, src, lo, hi, tab, size)
		}
	}
	return out, uint64(len(vt.Data)), nil
}

// ctZeros returns the zero points of the rows of the chunk c, converted
// to the scale's dtype (exact: integers of 8 bits at most), k a row (one
// for k of 0), or nil for a weight without them: unpacked from the whole
// I32 tensor, small, for packed values (a column of words holds the
// zero points of the rows, w.Bits bits each); read as I8 otherwise.
func (cv *converter) ctZeros(m *convertSlot, c *dequantChunk, vd safetensors.DType, k, s0, s1 uint64) ([]float32, error) {
	w := c.w
	if w.ZeroPoint == "" {
		return nil, nil
	}
	z, err := cv.ck.Info(w.ZeroPoint)
	if err != nil {
		return nil, err
	}
	zeros := m.zeros[:0]
	if vd == safetensors.I32 {
		zt, err := cv.read(&m.zeroIn, w.ZeroPoint, 0, numElements(z.Shape))
		if err != nil {
			return nil, err
		}
		words := z.Shape[0]
		b := uint64(w.Bits)
		for r := c.r0; r < c.r1; r++ {
			at := r * b // the bit of row r in a column
			wi, off := at/32, at%32
			for j := range k {
				x := uint64(binary.LittleEndian.Uint32(zt.Data[4*(wi*k+j):])) >> off
				if off+b > 32 && wi+1 < words {
					x |= uint64(binary.LittleEndian.Uint32(zt.Data[4*((wi+1)*k+j):])) << (32 - off)
				}
				zeros = append(zeros, float32(int(x&(1<<b-1))-1<<(b-1)))
			}
		}
	} else {
		zt, err := cv.read(&m.zeroIn, w.ZeroPoint, s0, s1)
		if err != nil {
			return nil, err
		}
		for _, b := range zt.Data {
			zeros = append(zeros, float32(int8(b)))
		}
	}
	m.zeros = zeros
	return zeros, nil
}

// The ways a row of values is stored, which ctGroup reads.
const (
	ctBytes   = iota // a code a byte: I8, F8_E4M3, 8-bit integers packed
	ctNibbles        // two codes a byte, the low nibble first: E2M1, 4-bit integers packed
	ctSixes          // four 6-bit codes in three bytes, little-endian: E2M3
	ctBits           // codes of w.Bits bits in a little-endian stream (I32 words)
)

// ctKindOf returns how the weight w's values, of dtype d, are stored.
func ctKindOf(w *QuantizedWeight, d safetensors.DType) int {
	switch {
	case d == safetensors.I8 || d == safetensors.F8_E4M3 || d == safetensors.I32 && w.Bits == 8:
		return ctBytes
	case d == safetensors.U8 && w.format == formatMXFP6:
		return ctSixes
	case d == safetensors.U8 || d == safetensors.I32 && w.Bits == 4:
		return ctNibbles
	}
	return ctBits
}

// ctCode returns the code of the value j of the row src stored as kind
// says, of bits bits.
func ctCode(kind, bits int, src []byte, j uint64) uint64 {
	switch kind {
	case ctBytes:
		return uint64(src[j])
	case ctNibbles:
		return uint64(src[j/2]>>(4*(j%2))) & 0x0f
	case ctSixes:
		at := j / 4 * 3
		word := uint64(src[at]) | uint64(src[at+1])<<8 | uint64(src[at+2])<<16
		return word >> (6 * (j % 4)) & 0x3f
	}
	at := j * uint64(bits)
	b, off := at/8, at%8
	var x uint64
	for i := uint64(0); i < 2 && b+i < uint64(len(src)); i++ { // 8 bits at most, across two bytes
		x |= uint64(src[b+i]) << (8 * i)
	}
	return x >> off & (1<<bits - 1)
}

// ctGroup writes the values [lo, hi) of the row src, stored as kind
// says, into dst (size bytes each, little-endian) through tab, the
// output bits of each code.
func ctGroup(kind, bits int, dst, src []byte, lo, hi uint64, tab []uint32, size uint64) {
	d := dst[lo*size : hi*size]
	switch {
	case kind == ctBytes && len(tab) == 256:
		if size == 2 {
			bytes16(d, src[lo:hi], (*[256]uint32)(tab))
		} else {
			bytes32(d, src[lo:hi], (*[256]uint32)(tab))
		}
	case kind == ctNibbles && lo%2 == 0 && hi%2 == 0 && len(tab) == 16:
		if size == 2 {
			nibbles16(d, src[lo/2:hi/2], (*[16]uint32)(tab))
		} else {
			nibbles32(d, src[lo/2:hi/2], (*[16]uint32)(tab))
		}
	case kind == ctSixes && lo%4 == 0 && hi%4 == 0 && len(tab) == 64:
		sixes(d, src[lo/4*3:hi/4*3], (*[64]uint32)(tab), size)
	default:
		for j := lo; j < hi; j++ {
			x := tab[ctCode(kind, bits, src, j)]
			if size == 2 {
				binary.LittleEndian.PutUint16(d[(j-lo)*2:], uint16(x))
			} else {
				binary.LittleEndian.PutUint32(d[(j-lo)*4:], x)
			}
		}
	}
}

// ctRows writes the rows of values src (rowBytes each), stored as kind
// says, into dst (in values of size bytes a row), group values a scale,
// the scale of group g of row r being the byte scales[r*k+g] (an E8M0
// exponent, or an NVFP4 F8_E4M3 scale), through tabs[scale*codes:], the
// output bits of each code for each scale: the MX formats' and NVFP4's
// rows, whose groups are small, each group's table looked up as its
// values are written. luts, where not nil, are tabs for byte shuffles
// (nibbleLUTs), for codes two a byte.
func ctRows(kind int, dst, src, scales []byte, rows, rowBytes, in, k, group uint64, tabs []uint32, luts *[256 * 64]byte, codes, size uint64) {
	for r := range rows {
		row, out := src[r*rowBytes:(r+1)*rowBytes], dst[r*in*size:(r+1)*in*size]
		sc := scales[r*k : (r+1)*k]
		g0 := 0 // the groups written by AVX2 byte shuffles
		if luts != nil && kind == ctNibbles && codes == 16 {
			if g0 = nibbleGroupsFast(out, row, sc, group, luts, int(size)); g0 == len(sc) {
				continue
			}
		}
		switch {
		case kind == ctNibbles && codes == 16 && group%16 == 0 && size == 2:
			// Eight bytes of a group at a time, in place: NVFP4's groups
			// are of eight bytes, MXFP4's of sixteen.
			gb := group / 2 // bytes a group
			for g := g0; g < len(sc); g++ {
				t := (*[16]uint32)(tabs[uint64(sc[g])*16:])
				at := uint64(g) * gb
				for w := uint64(0); w < gb; w += 8 {
					x := binary.LittleEndian.Uint64(row[at+w:])
					d := out[4*(at+w) : 4*(at+w)+32]
					binary.LittleEndian.PutUint64(d, uint64(t[x&15])|uint64(t[x>>4&15])<<16|uint64(t[x>>8&15])<<32|uint64(t[x>>12&15])<<48)
					x >>= 16
					binary.LittleEndian.PutUint64(d[8:], uint64(t[x&15])|uint64(t[x>>4&15])<<16|uint64(t[x>>8&15])<<32|uint64(t[x>>12&15])<<48)
					x >>= 16
					binary.LittleEndian.PutUint64(d[16:], uint64(t[x&15])|uint64(t[x>>4&15])<<16|uint64(t[x>>8&15])<<32|uint64(t[x>>12&15])<<48)
					x >>= 16
					binary.LittleEndian.PutUint64(d[24:], uint64(t[x&15])|uint64(t[x>>4&15])<<16|uint64(t[x>>8&15])<<32|uint64(t[x>>12&15])<<48)
				}
			}
		case kind == ctNibbles && codes == 16 && group%16 == 0:
			gb := group / 2 // bytes a group
			for g := g0; g < len(sc); g++ {
				t := (*[16]uint32)(tabs[uint64(sc[g])*16:])
				s, d := row[uint64(g)*gb:(uint64(g)+1)*gb], out[uint64(g)*group*size:(uint64(g)+1)*group*size]
				if size == 2 {
					nibbles16(d, s, t)
				} else {
					nibbles32(d, s, t)
				}
			}
		case kind == ctBytes && codes == 256 && group == 32 && mxLookupFast(out, row, sc, tabs, int(size)):
		case kind == ctBytes && codes == 256:
			for g, e := range sc {
				t := (*[256]uint32)(tabs[uint64(e)*256:])
				s, d := row[uint64(g)*group:(uint64(g)+1)*group], out[uint64(g)*group*size:(uint64(g)+1)*group*size]
				if size == 2 {
					bytes16(d, s, t)
				} else {
					bytes32(d, s, t)
				}
			}
		case kind == ctSixes && codes == 64 && group == 32 && mx6LookupFast(out, row, sc, tabs, int(size)):
		case kind == ctSixes && codes == 64 && group%4 == 0:
			gb := group / 4 * 3 // bytes a group
			for g, e := range sc {
				s, d := row[uint64(g)*gb:(uint64(g)+1)*gb], out[uint64(g)*group*size:(uint64(g)+1)*group*size]
				sixes(d, s, (*[64]uint32)(tabs[uint64(e)*64:]), size)
			}
		default:
			for g, e := range sc {
				lo := uint64(g) * group
				ctGroup(kind, 0, out, row, lo, lo+group, tabs[uint64(e)*codes:(uint64(e)+1)*codes], size)
			}
		}
	}
}

// nibbleLUTs returns the tables tabs of 16 entries for each of 256
// scales as the AVX2 byte shuffles take them (nibbleGroupsFast), in m's
// memory: scale e's at [64*e:], bytes k of its entries at 16*k; nil
// without AVX2, or for codes not two a byte.
func (m *convertSlot) nibbleLUTs(kind int, tabs []uint32) *[256 * 64]byte {
	if !useDequantAVX2 || kind != ctNibbles || len(tabs) != 256*16 {
		return nil
	}
	if m.luts == nil {
		m.luts = new([256 * 64]byte)
	}
	for e := range 256 {
		for c, x := range tabs[e*16 : (e+1)*16] {
			for k := range 4 {
				m.luts[64*e+16*k+c] = byte(x >> (8 * k))
			}
		}
	}
	return m.luts
}

// nibbles16 writes the BF16 bits t[c] (the entries' low 16 bits) of the
// codes c of src, two a byte, the low nibble first, into dst: by AVX2
// byte shuffles where they run (nibblesFast), the rest four bytes at a
// time, each output word computed and stored before the next (all
// computed first, they spill their registers).
func nibbles16(dst, src []byte, t *[16]uint32) {
	dst = dst[:4*len(src)]
	i := nibblesFast(dst, src, t, 2)
	for ; i+4 <= len(src); i += 4 {
		x := binary.LittleEndian.Uint32(src[i:])
		d := dst[4*i : 4*i+16]
		binary.LittleEndian.PutUint64(d, uint64(t[x&15])|uint64(t[x>>4&15])<<16|uint64(t[x>>8&15])<<32|uint64(t[x>>12&15])<<48)
		x >>= 16
		binary.LittleEndian.PutUint64(d[8:], uint64(t[x&15])|uint64(t[x>>4&15])<<16|uint64(t[x>>8&15])<<32|uint64(t[x>>12&15])<<48)
	}
	for ; i < len(src); i++ {
		b := src[i]
		binary.LittleEndian.PutUint32(dst[4*i:], t[b&15]|t[b>>4]<<16)
	}
}

// nibbles32 is nibbles16 for F32 bits.
func nibbles32(dst, src []byte, t *[16]uint32) {
	dst = dst[:8*len(src)]
	i := nibblesFast(dst, src, t, 4)
	for ; i+4 <= len(src); i += 4 {
		x := binary.LittleEndian.Uint32(src[i:])
		d := dst[8*i : 8*i+32]
		binary.LittleEndian.PutUint64(d, uint64(t[x&15])|uint64(t[x>>4&15])<<32)
		binary.LittleEndian.PutUint64(d[8:], uint64(t[x>>8&15])|uint64(t[x>>12&15])<<32)
		binary.LittleEndian.PutUint64(d[16:], uint64(t[x>>16&15])|uint64(t[x>>20&15])<<32)
		binary.LittleEndian.PutUint64(d[24:], uint64(t[x>>24&15])|uint64(t[x>>28])<<32)
	}
	for ; i < len(src); i++ {
		b := src[i]
		binary.LittleEndian.PutUint64(dst[8*i:], uint64(t[b&15])|uint64(t[b>>4])<<32)
	}
}

// bytes16 writes the BF16 bits t[c] (entries of 16 bits) of the codes c
// of src, a byte each, into dst: by AVX2 gathers where they run
// (fp8LookupFast), the rest eight at a time.
func bytes16(dst, src []byte, t *[256]uint32) {
	dst = dst[:2*len(src)]
	i := fp8LookupFast(dst, src, t, 2)
	for ; i+8 <= len(src); i += 8 {
		x := binary.LittleEndian.Uint64(src[i:])
		d := dst[2*i : 2*i+16]
		binary.LittleEndian.PutUint64(d, uint64(t[x&0xff])|uint64(t[x>>8&0xff])<<16|uint64(t[x>>16&0xff])<<32|uint64(t[x>>24&0xff])<<48)
		binary.LittleEndian.PutUint64(d[8:], uint64(t[x>>32&0xff])|uint64(t[x>>40&0xff])<<16|uint64(t[x>>48&0xff])<<32|uint64(t[x>>56])<<48)
	}
	for ; i < len(src); i++ {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(t[src[i]]))
	}
}

// bytes32 is bytes16 for F32 bits.
func bytes32(dst, src []byte, t *[256]uint32) {
	dst = dst[:4*len(src)]
	k := fp8LookupFast(dst, src, t, 4)
	for i, b := range src[k:] {
		binary.LittleEndian.PutUint32(dst[4*(k+i):], t[b])
	}
}

// sixes writes the bits t[c] (size bytes each) of the codes c of src,
// four 6-bit codes in three bytes, little-endian, into dst.
func sixes(dst, src []byte, t *[64]uint32, size uint64) {
	n := len(src) / 3
	if size == 2 {
		dst = dst[:8*n]
		for i := range n {
			word := uint32(src[3*i]) | uint32(src[3*i+1])<<8 | uint32(src[3*i+2])<<16
			binary.LittleEndian.PutUint64(dst[8*i:], uint64(t[word&0x3f])|uint64(t[word>>6&0x3f])<<16|uint64(t[word>>12&0x3f])<<32|uint64(t[word>>18&0x3f])<<48)
		}
		return
	}
	dst = dst[:16*n]
	for i := range n {
		word := uint32(src[3*i]) | uint32(src[3*i+1])<<8 | uint32(src[3*i+2])<<16
		o := dst[16*i : 16*i+16]
		binary.LittleEndian.PutUint64(o, uint64(t[word&0x3f])|uint64(t[word>>6&0x3f])<<32)
		binary.LittleEndian.PutUint64(o[8:], uint64(t[word>>12&0x3f])|uint64(t[word>>18&0x3f])<<32)
	}
}

// ctTable sets tab[c] to the output bits, in the dtype to, of each code's
// value codes[c] less the zero point z (where hasZero) times the scale s,
// in the dtype wd (ctValue); for nvfp4, in float32 rounded to BF16. The
// codes are exact in BF16 (every table of ctCodes is).
func ctTable(tab []uint32, codes []float32, s, z float32, hasZero, nvfp4 bool, wd, to safetensors.DType) {
	tab = tab[:len(codes)]
	if wd == safetensors.BF16 || nvfp4 && !hasZero {
		// Each result rounded to BF16, on vector units where they run:
		// q-z is q itself without a zero point, the codes being exact.
		shift, zero := uint(0), float32(0)
		if to != safetensors.BF16 {
			shift = 16
		}
		if hasZero {
			zero = z
		}
		if bf16TableFast(tab, codes, s, zero, shift) {
			return
		}
	}
	half := len(codes) / 2
	if wd == safetensors.BF16 && !hasZero && !nvfp4 && len(codes) <= 256 && codes[0] == float32(-half) && codes[len(codes)-1] == float32(half-1) && !math.IsInf(float64(s), 0) && s == s {
		// Integers of -half to half-1 (packed, I8): each negative value's
		// result the positive's with its sign flipped, as rounding to
		// nearest even is symmetric; half the products.
		shift, sign := 0, uint32(0x8000)
		if to != safetensors.BF16 {
			shift, sign = 16, 0x80000000
		}
		tab[half] = bf16Bits(0*s) << shift
		for v := 1; v <= half; v++ {
			x := bf16Bits(float32(v)*s) << shift
			tab[half-v] = x ^ sign
			if v < half {
				tab[half+v] = x
			}
		}
		return
	}
	if wd == safetensors.BF16 || nvfp4 && !hasZero {
		// Each result rounded to BF16: the output's bits or their upper
		// half.
		shift := 0
		if to != safetensors.BF16 {
			shift = 16
		}
		for i, q := range codes {
			if hasZero {
				q = math.Float32frombits(bf16Bits(q-z) << 16)
			}
			tab[i] = bf16Bits(q*s) << shift
		}
		return
	}
	for i, q := range codes {
		tab[i] = outBits(ctValue(q, s, z, hasZero, nvfp4, wd), to)
	}
}

// bf16Bits is the BF16 bits of x rounded to nearest even, as PyTorch's
// CPU kernels give them (their vectorized conversion, cvtfp32_bf16): a
// NaN, which the arithmetic gives from an E8M0 scale of 255 (+Inf) times
// a zero or from an F8_E4M3 NaN, is 0xffff.
func bf16Bits(x float32) uint32 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 {
		return 0xffff
	}
	return (b + 0x7fff + (b>>16)&1) >> 16
}

// ctDirect is ctGroup for a group too small for a table of its codes:
// each value computed (ctValue) from codes, its scale s and zero point z.
func ctDirect(kind, bits int, dst, src []byte, lo, hi uint64, codes []float32, s, z float32, hasZero, nvfp4 bool, wd, to safetensors.DType, size uint64) {
	for j := lo; j < hi; j++ {
		x := outBits(ctValue(codes[ctCode(kind, bits, src, j)], s, z, hasZero, nvfp4, wd), to)
		if size == 2 {
			binary.LittleEndian.PutUint16(dst[j*2:], uint16(x))
		} else {
			binary.LittleEndian.PutUint32(dst[j*4:], x)
		}
	}
}

// copyDense converts the rows [c.r0, c.r1) of the matrix c.m of a
// weight of the dense format, stored as it is: compressed-tensors'
// dense decompressor leaves it so, and its scales are left out.
func (cv *converter) copyDense(m *convertSlot, c *dequantChunk, to safetensors.DType) ([]byte, uint64, error) {
	_, rows, cols := matrices(c.w.Shape)
	base := c.m * rows * cols
	t, err := cv.read(&m.in, c.w.Values, base+c.r0*cols, base+c.r1*cols)
	if err != nil {
		return nil, 0, err
	}
	if m.f32, err = t.AppendFloat32s(m.f32[:0]); err != nil {
		return nil, 0, err
	}
	return encode(m, m.f32, to), uint64(len(t.Data)), nil
}
