package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/pyjson"
)

// Dequantize returns an option that makes Convert write a quantized model
// (see Quantization) as a plain one: each quantized weight dequantized, in
// the dtype of the conversion, BF16 or F32, under the name a plain model
// gives it; its scales and the method's other tensors left out; config.json
// without its quantization_config. The values are those of the reference
// dequantizers, bit for bit:
//
//   - MethodFP8: each value times its block's scale, in float32 (partial
//     blocks included), rounded once to BF16 for BF16, as transformers'
//     _dequantize_fp8_weight computes it in float32;
//   - MethodMXFP4: transformers' convert_moe_packed_tensors, each E2M1
//     value times 2^(scale-127) in float32, rounded to BF16 for BF16, and
//     the result transposed to [experts, groups*32, rows];
//   - MethodCompressedTensors, every format whose decompressor
//     compressed-tensors 0.20 has (int-quantized, float-quantized,
//     naive-quantized, pack-quantized, nvfp4-pack-quantized,
//     mxfp4-pack-quantized, mxfp6-pack-quantized, mxfp8-quantized, dense,
//     and mixed-precision, a format a weight): that decompressor
//     (dequantize), in the scale's dtype: each value less its zero point,
//     times its scale (one a weight, a row, or a group of columns), each
//     result rounded to that dtype; for NVFP4, each E2M1 value times its
//     F8_E4M3 scale over the global scale in float32, rounded to BF16; for
//     the MX formats, each value times its E8M0 scale in BF16; dense
//     weights as they are; then converted to the dtype of the conversion.
//
// Other methods (gptq, awq, bitsandbytes) and compressed-tensors' sparse
// formats (sparse-bitmask, sparse-24-bitmask, marlin-24, which 0.20 no
// longer decompresses) give an error wrapping ErrQuantized.
// Without it, Convert refuses a quantized model with an error wrapping
// ErrQuantized that names the method. Convert takes it.
func Dequantize() Option {
	return func(o *options) error {
		o.dequantize = true
		return o.only("Dequantize", opConvert)
	}
}

// dequantPlan is what Convert does to dequantize a model.
type dequantPlan struct {
	q       *Quantization
	values  map[string]*QuantizedWeight // by the name of its values tensor
	dropped map[string]bool             // the scales and the rest
}

// planDequantization returns the plan for the quantization q of c,
// converted to the dtype to, or an error wrapping ErrQuantized where
// Convert cannot dequantize it, or is not asked to.
func planDequantization(c *Checkpoint, q *Quantization, to safetensors.DType, asked bool) (*dequantPlan, error) {
	what := q.Method
	if q.Format != "" {
		what += " " + q.Format
	}
	if q.BlockSize != nil {
		what += fmt.Sprintf(", blocks of %dx%d", q.BlockSize[0], q.BlockSize[1])
	}
	src := c.String()
	if src == "" {
		src = c.Dir()
	}
	if !asked {
		return nil, fmt.Errorf("checkpoint: %s: %w (%s): converting it would recast its quantized weights or their scales; dequantize it (Dequantize, --dequantize)", src, ErrQuantized, what)
	}
	switch {
	case q.Method != MethodFP8 && q.Method != MethodMXFP4 && !(q.Method == MethodCompressedTensors &&
		(q.Format == "" || slices.Contains(dequantFormats, q.Format))):
		return nil, fmt.Errorf("checkpoint: %s: %w (%s), which Convert does not dequantize (it does fp8, mxfp4, and compressed-tensors' %s)", src, ErrQuantized, what, strings.Join(dequantFormats, ", "))
	case q.Ambiguous != "":
		return nil, fmt.Errorf("checkpoint: %s: %w (%s, inferred from its tensors, no config.json): %s; put its config.json beside it", src, ErrQuantized, what, q.Ambiguous)
	case to != safetensors.BF16 && to != safetensors.F32:
		return nil, fmt.Errorf("%w: %s is quantized (%s): dequantize it to BF16 or F32, not %v", safetensors.ErrInvalidOption, src, what, to)
	}
	if c.parts != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w of several parts (%s): dequantize each part's folder", src, ErrQuantized, what)
	}
	p := &dequantPlan{q: q, values: map[string]*QuantizedWeight{}, dropped: map[string]bool{}}
	for i := range q.Weights {
		w := &q.Weights[i]
		if w.Err != nil {
			return nil, fmt.Errorf("checkpoint: %s: %w (%s): %s: %v", src, ErrQuantized, what, w.Name, w.Err)
		}
		if len(w.Shape) == 0 {
			return nil, fmt.Errorf("checkpoint: %s: %w (%s): %s: its shape is unknown", src, ErrQuantized, what, w.Name)
		}
		// A chunk holds a row at least (32 output rows of an expert, for
		// MXFP4): rows are bounded so that memory is.
		if row := w.Shape[len(w.Shape)-1]; q.Method == MethodMXFP4 && row > maxDequantRow/32 || row > maxDequantRow {
			return nil, fmt.Errorf("checkpoint: %s: %w (%s): %s: rows of %d values, more than the %d that Convert dequantizes at a time", src, ErrQuantized, what, w.Name, row, uint64(maxDequantRow))
		}
		if w.Values != w.Name && slicesContains(c, w.Name) {
			return nil, fmt.Errorf("checkpoint: %s: %w (%s): the dequantized %s would take the name of a tensor it holds", src, ErrQuantized, what, w.Name)
		}
		p.values[w.Values] = w
		for _, n := range w.Tensors()[1:] {
			p.dropped[n] = true
		}
	}
	for _, n := range q.Others {
		p.dropped[n] = true
	}
	return p, nil
}

// slicesContains reports whether c holds the named tensor.
func slicesContains(c *Checkpoint, name string) bool {
	_, ok := c.find(name)
	return ok
}

// dequantChunk is a piece of a dequantized weight: for FP8, the rows
// [r0, r1) of its matrix m; for MXFP4, the rows of expert m that the
// groups [r0, r1) of 32 values give once transposed.
type dequantChunk struct {
	w      *QuantizedWeight
	m      uint64
	r0, r1 uint64
}

// maxDequantRow bounds the values of a row of a weight that Convert
// dequantizes: a chunk holds one at least.
const maxDequantRow = 1 << 24

// dequantChunkValues is about how many values of a dequantized weight
// are computed at a time (at least a row, for FP8, or 32 rows, for
// MXFP4): convertChunk, which tests make small.
var dequantChunkValues uint64 = convertChunk

// dequantChunks returns the chunks of the dequantized weight w, whose
// values tensor is v.
func (p *dequantPlan) dequantChunks(c *Checkpoint, w *QuantizedWeight, v safetensors.TensorInfo) []convertChunkRef {
	var out []convertChunkRef
	if p.q.Method == MethodMXFP4 {
		// Groups of 32 output rows, about convertChunk values at a time.
		rows, groups := v.Shape[1], v.Shape[2]
		step := max(1, dequantChunkValues/max(32*rows, 1))
		for e := range v.Shape[0] {
			for g := uint64(0); g < groups; g += step {
				out = append(out, convertChunkRef{s: v, dq: &dequantChunk{w: w, m: e, r0: g, r1: min(g+step, groups)}})
			}
		}
		return out
	}
	shape := v.Shape
	if p.q.Method == MethodCompressedTensors {
		shape = w.Shape // [out, in], stored packed
	}
	if len(shape) < 2 {
		shape = []uint64{1, numElements(shape)}
	}
	r := len(shape)
	rows, cols := shape[r-2], shape[r-1]
	mats := numElements(shape[:r-2])
	step := max(1, dequantChunkValues/max(cols, 1)) // whole rows, any row of a block
	for m := range mats {
		for r0 := uint64(0); r0 < rows; r0 += step {
			out = append(out, convertChunkRef{s: v, dq: &dequantChunk{w: w, m: m, r0: r0, r1: min(r0+step, rows)}})
		}
		if rows == 0 {
			out = append(out, convertChunkRef{s: v, dq: &dequantChunk{w: w, m: m}})
		}
	}
	return out
}

// dequantize computes the chunk c of a dequantized weight into m.buf, in
// the dtype to, and returns its bytes and the bytes it read.
func (cv *converter) dequantize(m *convertSlot, c *dequantChunk, to safetensors.DType) ([]byte, uint64, error) {
	v, err := cv.ck.Info(c.w.Values)
	if err != nil {
		return nil, 0, err
	}
	s, err := cv.ck.Info(c.w.Scale)
	if err != nil {
		return nil, 0, err
	}
	switch cv.plan.q.Method {
	case MethodMXFP4:
		return cv.dequantMXFP4(m, c, v, s, to)
	case MethodCompressedTensors:
		return cv.dequantCompressed(m, c, to)
	}
	shape := v.Shape
	if len(shape) < 2 {
		shape = []uint64{1, numElements(shape)}
	}
	r := len(shape)
	rows, cols := shape[r-2], shape[r-1]
	// The values of the rows.
	base := c.m * rows * cols
	vt, err := cv.read(&m.in, c.w.Values, base+c.r0*cols, base+c.r1*cols)
	if err != nil {
		return nil, 0, err
	}
	// The scales of the rows: srows rows of scols scales, the first
	// being that of row r0 (of its block of rows).
	var s0, s1, scols, bo, bi uint64
	if cv.plan.q.BlockSize != nil {
		bo, bi = cv.plan.q.BlockSize[0], cv.plan.q.BlockSize[1]
		srows := ceilDiv(rows, bo)
		scols = ceilDiv(cols, bi)
		s0 = (c.m*srows + c.r0/bo) * scols
		s1 = (c.m*srows + ceilDiv(c.r1, bo)) * scols
	} else { // one scale
		bo, bi, scols, s0, s1 = max(rows, 1), max(cols, 1), 1, 0, 1
	}
	st, err := cv.read(&m.scaleIn, c.w.Scale, s0, s1)
	if err != nil {
		return nil, 0, err
	}
	if m.scales, err = st.AppendFloat32s(m.scales[:0]); err != nil {
		return nil, 0, err
	}
	// The products, in float32, then encoded all at once (F32sToBF16Bytes
	// rounds a chunk on vector units).
	table := f8Values(v.DType)
	n := (c.r1 - c.r0) * cols
	if uint64(cap(m.f32)) < n {
		m.f32 = make([]float32, n)
	}
	vals := m.f32[:n]
	for i := c.r0; i < c.r1; i++ {
		srow := m.scales[(i/bo-c.r0/bo)*scols:]
		at := (i - c.r0) * cols
		row := vt.Data[at : at+cols]
		dst := vals[at : at+cols]
		for j := uint64(0); j < cols; j += bi {
			sc := srow[j/bi]
			e := min(j+bi, cols)
			blk, d := row[j:e], dst[j:e]
			for k, b := range blk {
				d[k] = table[b] * sc
			}
		}
	}
	return encode(m, vals, to), uint64(len(vt.Data)), nil
}

// encode writes vals in the dtype to, BF16 or F32, into m.buf.
func encode(m *convertSlot, vals []float32, to safetensors.DType) []byte {
	if to == safetensors.BF16 {
		m.buf = safetensors.F32sToBF16Bytes(m.buf, vals, safetensors.RoundNearestEven)
		return m.buf
	}
	if cap(m.buf) < 4*len(vals) {
		m.buf = make([]byte, 4*len(vals))
	}
	m.buf = m.buf[:4*len(vals)]
	for i, v := range vals {
		binary.LittleEndian.PutUint32(m.buf[4*i:], math.Float32bits(v))
	}
	return m.buf
}

// f8Values returns the float32 values of the 256 codes of the F8 dtype d,
// as safetensors decodes them (and torch's .float()).
func f8Values(d safetensors.DType) *[256]float32 {
	if d == safetensors.F8_E5M2 {
		return f8E5M2()
	}
	return f8E4M3()
}

var (
	f8E4M3 = sync.OnceValue(func() *[256]float32 { return f8Table(safetensors.F8_E4M3) })
	f8E5M2 = sync.OnceValue(func() *[256]float32 { return f8Table(safetensors.F8_E5M2) })
)

func f8Table(d safetensors.DType) *[256]float32 {
	codes := make([]byte, 256)
	for i := range codes {
		codes[i] = byte(i)
	}
	vals, err := safetensors.Tensor{DType: d, Shape: []uint64{256}, Data: codes}.Float32s()
	if err != nil {
		panic(err) // cannot happen: 256 codes of an F8 dtype
	}
	return (*[256]float32)(vals)
}

// mxfp4BF16 and mxfp4F32 are mxfp4Values encoded as encode encodes them:
// the bits of each value in BF16 (rounded to nearest even, though every
// one is exact) and in F32.
var (
	mxfp4BF16 = sync.OnceValue(func() *[256][16]uint32 {
		var t [256][16]uint32
		for e, vals := range mxfp4Values() {
			b := safetensors.F32sToBF16Bytes(nil, vals[:], safetensors.RoundNearestEven)
			for i := range vals {
				t[e][i] = uint32(binary.LittleEndian.Uint16(b[2*i:]))
			}
		}
		return &t
	})
	mxfp4F32 = sync.OnceValue(func() *[256][16]uint32 {
		var t [256][16]uint32
		for e, vals := range mxfp4Values() {
			for i, v := range vals {
				t[e][i] = math.Float32bits(v)
			}
		}
		return &t
	})
)

// mxfp4Values returns the values of the 16 E2M1 codes times 2^(e-127)
// for each E8M0 exponent e, as torch.ldexp gives them in float32 (exact
// unless they overflow to ±Inf; 0 stays 0), which BF16 also holds
// exactly.
var mxfp4Values = sync.OnceValue(func() *[256][16]float32 {
	var f [256][16]float32
	for e := range 256 {
		for i, v := range fp4Values {
			f[e][i] = float32(math.Ldexp(v, e-127))
		}
	}
	return &f
})

// read reads the elements [lo, hi) of the named tensor of the checkpoint,
// through *buf for a file read through ReadAt.
func (cv *converter) read(buf *[]byte, name string, lo, hi uint64) (safetensors.Tensor, error) {
	info, err := cv.ck.Info(name)
	if err != nil {
		return safetensors.Tensor{}, err
	}
	need := (hi - lo) * uint64(info.DType.Bits()) / 8
	if uint64(cap(*buf)) < need && need <= safetensors.MaxTensorAlloc {
		*buf = make([]byte, need)
	}
	return cv.ck.TensorElements(cv.ctx, name, lo, hi, *buf)
}

// dequantMXFP4 computes the rows of the chunk c of an MXFP4 weight, of
// blocks v and scales s, as convert_moe_packed_tensors does: each
// value's E2M1 value times 2^(scale-127) as torch.ldexp gives it in
// float32 (exact unless it overflows to ±Inf; 0 stays 0 whatever the
// scale), the expert's [rows, groups*32] values transposed to
// [groups*32, rows]. It reads the expert's bytes from the first row's
// group c.r0 to the last row's group c.r1-1: a slice of a mapped file.
func (cv *converter) dequantMXFP4(m *convertSlot, c *dequantChunk, v, s safetensors.TensorInfo, to safetensors.DType) ([]byte, uint64, error) {
	rows, groups := v.Shape[1], v.Shape[2]
	if rows == 0 || c.r1 == c.r0 {
		return nil, 0, nil
	}
	first := c.m*rows*groups + c.r0                  // the first scale read
	last := c.m*rows*groups + (rows-1)*groups + c.r1 // past the last
	bt, err := cv.read(&m.in, v.Name, first*16, last*16)
	if err != nil {
		return nil, 0, err
	}
	st, err := cv.read(&m.scaleIn, s.Name, first, last)
	if err != nil {
		return nil, 0, err
	}
	width := c.r1 - c.r0 // groups a row
	tab, size := mxfp4BF16(), uint64(2)
	if to != safetensors.BF16 {
		tab, size = mxfp4F32(), 4
	}
	// Output row j = g*32+c holds, at r, nibble c of row r's block of
	// group g. The chunk's blocks and scales, a few bytes of each input
	// row, are first gathered contiguous, each row's at once; then each
	// pair of output rows (the two nibbles of a byte) is written in order
	// from them, which the cache holds. Reading the input rows in place
	// for each output row, or writing each input row's values across the
	// output rows, strides over megabytes at a power of two and stalls on
	// every value.
	out := uint64(32) * width // output rows
	n := rows * out
	if uint64(cap(m.buf)) < n*size {
		m.buf = make([]byte, n*size)
	}
	buf := m.buf[:n*size]
	line := 16 * width // the bytes of a row's blocks in the chunk
	if uint64(cap(m.gathered)) < rows*(line+width) {
		m.gathered = make([]byte, rows*(line+width))
	}
	blocks := m.gathered[:rows*line]
	scales := m.gathered[rows*line : rows*(line+width)]
	for r := range rows {
		copy(blocks[r*line:(r+1)*line], bt.Data[r*groups*16:])
		copy(scales[r*width:(r+1)*width], st.Data[r*groups:])
	}
	for g := range width {
		for k := range uint64(16) {
			lo := buf[((g*32+2*k)*rows)*size : ((g*32+2*k+1)*rows)*size]
			hi := buf[((g*32+2*k+1)*rows)*size : ((g*32+2*k+2)*rows)*size]
			if size == 2 {
				mxfp4Pair16(lo, hi, blocks[g*16+k:], scales[g:], line, width, tab)
			} else {
				mxfp4Pair32(lo, hi, blocks[g*16+k:], scales[g:], line, width, tab)
			}
		}
	}
	return buf, rows * width * 16, nil
}

// mxfp4Pair16 writes the two output rows lo and hi, BF16, of the low and
// high nibbles of the bytes blocks[r*line] with the scales
// scales[r*width], through tab: a loop of its own, so that what it keeps
// fits in registers (not inlined, which would spill them).
//
//go:noinline
func mxfp4Pair16(lo, hi, blocks, scales []byte, line, width uint64, tab *[256][16]uint32) {
	hi = hi[:len(lo)]
	var at, sat uint64
	for r := 0; r+1 < len(lo); r += 2 {
		x, vals := blocks[at], &tab[scales[sat]]
		binary.LittleEndian.PutUint16(lo[r:], uint16(vals[x&0x0f]))
		binary.LittleEndian.PutUint16(hi[r:], uint16(vals[x>>4]))
		at, sat = at+line, sat+width
	}
}

// mxfp4Pair32 is mxfp4Pair16 for F32 rows.
//
//go:noinline
func mxfp4Pair32(lo, hi, blocks, scales []byte, line, width uint64, tab *[256][16]uint32) {
	hi = hi[:len(lo)]
	var at, sat uint64
	for r := 0; r+3 < len(lo); r += 4 {
		x, vals := blocks[at], &tab[scales[sat]]
		binary.LittleEndian.PutUint32(lo[r:], vals[x&0x0f])
		binary.LittleEndian.PutUint32(hi[r:], vals[x>>4])
		at, sat = at+line, sat+width
	}
}

// dequantizedConfig returns config.json's data without its
// quantization_config, written as transformers writes it (keys sorted,
// two-space indents, a trailing newline).
func dequantizedConfig(data []byte) ([]byte, error) {
	cfg, err := pyjson.DecodeObject(data)
	if err != nil {
		return nil, err
	}
	delete(cfg, "quantization_config")
	text, err := pyjson.Append(nil, cfg, 0)
	if err != nil {
		return nil, err
	}
	return append(text, '\n'), nil
}
