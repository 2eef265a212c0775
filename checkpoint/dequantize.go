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
//
// Memory stays bounded as for any conversion: about a million values a
// chunk, 2*GOMAXPROCS+2 chunks under way. An MXFP4 expert read through
// ReadAt (a file too large to map, a model over HTTP) whose blocks take
// several chunks is read once for them, not once per chunk: its blocks
// and scales are held while its chunks are under way, at most 64 MiB of
// blocks an expert (a larger one's chunks each read their own groups),
// the experts of the chunks under way (two, but for more chunks under
// way than an expert has), and four such buffers kept for the next.
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
	stages  mxfp4Stages                 // MXFP4 experts read once for their chunks
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

// matrices views a weight of the given shape as mats matrices of rows
// rows of cols values: its last two dimensions, or one row of all its
// values for a shape of fewer than two.
func matrices(shape []uint64) (mats, rows, cols uint64) {
	if len(shape) < 2 {
		return 1, 1, numElements(shape)
	}
	r := len(shape)
	return numElements(shape[:r-2]), shape[r-2], shape[r-1]
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
	w         *QuantizedWeight
	m         uint64
	r0, r1    uint64
	perExpert uint64 // for MXFP4, the chunks of its expert
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
		per := (groups + step - 1) / step // step is at most dequantChunkValues
		for e := range v.Shape[0] {
			for g := uint64(0); g < groups; g += step {
				out = append(out, convertChunkRef{s: v, dq: &dequantChunk{w: w, m: e, r0: g, r1: min(g+step, groups), perExpert: per}})
			}
		}
		return out
	}
	shape := v.Shape
	if p.q.Method == MethodCompressedTensors {
		shape = w.Shape // [out, in], stored packed
	}
	mats, rows, cols := matrices(shape)
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
	_, rows, cols := matrices(v.Shape)
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
	table := f8Values(v.DType)
	n := (c.r1 - c.r0) * cols
	if bo*bi >= fp8TableMin {
		return fp8Blocks(m, vt.Data, c.r0, c.r1, cols, bo, bi, scols, m.scales, table, to), uint64(len(vt.Data)), nil
	}
	// Small blocks: the products, in float32, then encoded all at once
	// (F32sToBF16Bytes rounds a chunk on vector units).
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

// fp8TableMin is the size of the smallest FP8 block whose values
// fp8Blocks looks up in a table of the block's 256 products.
const fp8TableMin = 1024

// fp8Blocks writes the rows [r0, r1) of an FP8 matrix of cols columns,
// whose values (codes of the table) are data, dequantized in blocks of
// bo x bi by scales (scols a row of blocks, the first that of row r0's
// block), into m.buf in the dtype to, BF16 or F32: for each block, the
// 256 codes times its scale, in float32, encoded as encode encodes them
// (so that each value is what the product and its rounding give), then
// each of the block's codes looked up: eight at a time by AVX2 gathers
// where they run (fp8LookupFast).
func fp8Blocks(m *convertSlot, data []byte, r0, r1, cols, bo, bi, scols uint64, scales []float32, table *[256]float32, to safetensors.DType) []byte {
	size := uint64(2)
	if to != safetensors.BF16 {
		size = 4
	}
	n := (r1 - r0) * cols
	if uint64(cap(m.buf)) < n*size {
		m.buf = make([]byte, n*size)
	}
	out := m.buf[:n*size]
	if m.fp8 == nil {
		m.fp8 = new(fp8Tables)
	}
	prods, bits, lut16, lut32 := &m.fp8.prods, &m.fp8.bits, &m.fp8.lut16, &m.fp8.lut32
	for i0 := r0; i0 < r1; {
		i1 := min((i0/bo+1)*bo, r1) // the block's rows in the chunk
		srow := scales[(i0/bo-r0/bo)*scols:]
		for j := uint64(0); j < cols; j += bi {
			sc := srow[j/bi]
			e := min(j+bi, cols)
			for b := range prods {
				prods[b] = table[b] * sc
			}
			if size == 2 {
				enc := safetensors.F32sToBF16Bytes(bits[:0], prods[:], safetensors.RoundNearestEven)
				for b := range lut16 {
					lut16[b] = binary.LittleEndian.Uint16(enc[2*b:])
					lut32[b] = uint32(lut16[b]) // for fp8LookupFast
				}
			} else {
				for b, p := range prods {
					lut32[b] = math.Float32bits(p)
				}
			}
			for i := i0; i < i1; i++ {
				at := (i - r0) * cols
				src, dst := data[at+j:at+e], out[(at+j)*size:(at+e)*size]
				k := uint64(fp8LookupFast(dst, src, lut32, int(size)))
				if size == 2 {
					fp8Lookup16(dst[k*2:], src[k:], lut16)
				} else {
					fp8Lookup32(dst[k*4:], src[k:], lut32)
				}
			}
		}
		i0 = i1
	}
	return out
}

// fp8Tables is the memory of fp8Blocks: a block's products, their BF16
// encoding, and their bits.
type fp8Tables struct {
	prods [256]float32
	bits  [512]byte
	lut16 [256]uint16
	lut32 [256]uint32
}

// fp8Lookup16 writes lut's entry for each byte of src to dst, 16 bits
// each, little-endian.
func fp8Lookup16(dst, src []byte, lut *[256]uint16) {
	dst = dst[:2*len(src)]
	i := 0
	for ; i+8 <= len(src); i += 8 {
		x := binary.LittleEndian.Uint64(src[i:])
		lo := uint64(lut[byte(x)]) | uint64(lut[byte(x>>8)])<<16 | uint64(lut[byte(x>>16)])<<32 | uint64(lut[byte(x>>24)])<<48
		hi := uint64(lut[byte(x>>32)]) | uint64(lut[byte(x>>40)])<<16 | uint64(lut[byte(x>>48)])<<32 | uint64(lut[byte(x>>56)])<<48
		binary.LittleEndian.PutUint64(dst[2*i:], lo)
		binary.LittleEndian.PutUint64(dst[2*i+8:], hi)
	}
	for ; i < len(src); i++ {
		binary.LittleEndian.PutUint16(dst[2*i:], lut[src[i]])
	}
}

// fp8Lookup32 is fp8Lookup16 for 32 bits.
func fp8Lookup32(dst, src []byte, lut *[256]uint32) {
	dst = dst[:4*len(src)]
	i := 0
	for ; i+8 <= len(src); i += 8 {
		x := binary.LittleEndian.Uint64(src[i:])
		for k := range 4 {
			binary.LittleEndian.PutUint64(dst[4*i+8*k:], uint64(lut[byte(x>>(16*k))])|uint64(lut[byte(x>>(16*k+8))])<<32)
		}
	}
	for ; i < len(src); i++ {
		binary.LittleEndian.PutUint32(dst[4*i:], lut[src[i]])
	}
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
// [groups*32, rows]. It reads the chunk's groups of each row, and their
// scales, a strided selection, into m.in, contiguous, which the kernel
// then reads in the cache: from a mapped file, or an expert too large to
// stage, through Reader.ReadSlice; through ReadAt, from the stage of its
// expert, read once for its chunks (mxfp4Staged).
func (cv *converter) dequantMXFP4(m *convertSlot, c *dequantChunk, v, s safetensors.TensorInfo, to safetensors.DType) ([]byte, uint64, error) {
	rows := v.Shape[1]
	width := c.r1 - c.r0 // groups a row
	if rows == 0 || width == 0 {
		return nil, 0, nil
	}
	// rows*32 values a group fit a chunk (planDequantization), and a
	// chunk's groups fit it but for the one group a chunk holds at least.
	g, err := cv.mxfp4Staged(c, v, s)
	if err != nil {
		return nil, 0, err
	}
	var blocks, scales []byte
	if g != nil {
		// The chunk's groups of each row, from its expert's stage.
		defer cv.release(c, v, g)
		groups := v.Shape[2]
		if uint64(cap(m.in)) < rows*width*16 {
			m.in = make([]byte, rows*width*16)
		}
		if uint64(cap(m.scaleIn)) < rows*width {
			m.scaleIn = make([]byte, rows*width)
		}
		blocks, scales = m.in[:rows*width*16], m.scaleIn[:rows*width]
		for r := range rows {
			copy(blocks[r*width*16:(r+1)*width*16], g.blocks[(r*groups+c.r0)*16:])
			copy(scales[r*width:(r+1)*width], g.scales[r*groups+c.r0:])
		}
	} else {
		if blocks, err = cv.readSlice(&m.in, v.Name, rows*width*16, safetensors.At(c.m), safetensors.All(), safetensors.Range(c.r0, c.r1), safetensors.All()); err != nil {
			return nil, 0, err
		}
		if scales, err = cv.readSlice(&m.scaleIn, s.Name, rows*width, safetensors.At(c.m), safetensors.All(), safetensors.Range(c.r0, c.r1)); err != nil {
			return nil, 0, err
		}
	}
	size := uint64(2)
	if to != safetensors.BF16 {
		size = 4
	}
	n := rows * 32 * width // values
	if uint64(cap(m.buf)) < n*size {
		m.buf = make([]byte, n*size)
	}
	buf := m.buf[:n*size]
	mxfp4Expert(buf, int(size), int(rows), int(width), blocks, int(width*16), scales, int(width))
	return buf, rows * width * 16, nil
}

// readSlice reads the selection sels of the named tensor, of size bytes,
// into *buf (grown to size), through its file's Reader.ReadSlice.
func (cv *converter) readSlice(buf *[]byte, name string, size uint64, sels ...safetensors.Selector) ([]byte, error) {
	l, ok := cv.ck.find(name)
	if !ok {
		return nil, cv.ck.notFound(name)
	}
	if uint64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	n, err := cv.ck.files[l.file].r.ReadSlice(cv.ctx, l.name, (*buf)[:size], sels...)
	if err != nil {
		return nil, cv.ck.fileError(l.file, err)
	}
	return (*buf)[:n], nil
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
