package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/pyjson"
)

// The quantization methods that Quantization recognises, as config.json's
// quantization_config names them in its quant_method.
const (
	// MethodFP8 is block-scaled FP8 (DeepSeek-V3, Qwen3-FP8): an F8_E4M3
	// weight "X.weight" beside its F32 scales "X.weight_scale_inv", one per
	// block of BlockSize[0] rows and BlockSize[1] columns, of shape
	// [ceil(out/BlockSize[0]), ceil(in/BlockSize[1])] (transformers'
	// FineGrainedFP8Config); a weight of one scale where BlockSize is nil.
	MethodFP8 = "fp8"
	// MethodMXFP4 is OpenAI's MXFP4 (gpt-oss): "P_blocks", U8 of shape
	// [experts, rows, groups, 16] holding two E2M1 values a byte (the low
	// nibble first), beside "P_scales", U8 E8M0 exponents of shape
	// [experts, rows, groups], one per 32 values. Dequantized, it is the
	// tensor "P" of shape [experts, groups*32, rows], transposed as
	// transformers' convert_moe_packed_tensors gives it.
	MethodMXFP4 = "mxfp4"
	// MethodCompressedTensors is the compressed-tensors library's layout
	// (vLLM, llm-compressor), whose Format says how the weights are
	// stored: "int-quantized" and "float-quantized" (an I8 or F8_E4M3
	// "X.weight" beside "X.weight_scale"), "pack-quantized" (integers of
	// 4 or 8 bits packed in the I32 "X.weight_packed", with
	// "X.weight_scale", "X.weight_shape" and, asymmetric,
	// "X.weight_zero_point"), "nvfp4-pack-quantized" (E2M1 pairs in the U8
	// "X.weight_packed", F8_E4M3 "X.weight_scale" per 16 values and the F32
	// "X.weight_global_scale").
	MethodCompressedTensors = "compressed-tensors"
)

// ErrQuantized is returned by Convert for a quantized model without the
// Dequantize option, rather than recast its weights or their scales, and
// with it, for a quantized model that it cannot dequantize.
var ErrQuantized = errors.New("checkpoint: quantized model")

// A Quantization describes how a checkpoint's weights are quantized.
type Quantization struct {
	// Method is how: MethodFP8, MethodMXFP4, MethodCompressedTensors, or
	// another quant_method of config.json (gptq, awq, bitsandbytes, ...),
	// which Weights does not describe.
	Method string
	// Format is compressed-tensors' format ("pack-quantized", ...); "" for
	// the other methods.
	Format string
	// BlockSize is the rows and columns of the values that one scale
	// covers: [128, 128] for DeepSeek-V3's FP8, [1, 32] for MXFP4, [1,
	// group size] for compressed-tensors' group strategy; nil where a
	// weight has one scale, or one a row.
	BlockSize []uint64
	// Inferred is set when the checkpoint has no quantization_config
	// (a lone file): the method and BlockSize were inferred from the
	// tensors' names, dtypes and shapes.
	Inferred bool
	// Ambiguous says what the tensors leave open when Inferred (an FP8
	// block size that no power of two gives), or is "".
	Ambiguous string
	// Weights are the quantized weights, sorted by name.
	Weights []QuantizedWeight
	// Others are the other tensors that the method adds and that a plain
	// model does not have (activation scales), sorted.
	Others []string
	// Params counts the values of the weights, and Bytes the bytes of the
	// tensors that store them (values, scales, zero points, shapes).
	Params, Bytes uint64

	numBits int      // compressed-tensors' weights' num_bits, where the config groups agree; or 0
	ctBlock []uint64 // compressed-tensors' block_structure of the block strategy, where the groups agree; or nil
}

// BitsPerParameter is the bits that the quantized weights take per value,
// scales and the rest included: 8*Bytes/Params, or 0 for no weights.
func (q *Quantization) BitsPerParameter() float64 {
	if q.Params == 0 {
		return 0
	}
	return 8 * float64(q.Bytes) / float64(q.Params)
}

// A QuantizedWeight is a weight stored quantized, in several tensors.
type QuantizedWeight struct {
	// Name and Shape are the weight's in a plain model.
	Name  string
	Shape []uint64
	// Values is the tensor of its quantized values; Scale that of its
	// scales; ZeroPoint, GlobalScale and ShapeTensor, where the method has
	// them, those of its zero points, its second-level scale and its
	// shape, or "".
	Values, Scale, ZeroPoint, GlobalScale, ShapeTensor string
	// Bits is the bits of a quantized value: 8 for FP8 and int8, 4 for
	// MXFP4, NVFP4 and int4.
	Bits int
	// Err is what is wrong with its tensors (a dtype, or a shape that
	// does not match the weight's and the block size), or nil.
	Err error

	format string   // compressed-tensors' format of the weight, from its tensors
	block  []uint64 // compressed-tensors' block strategy's [rows, columns] a scale, or nil
}

// Tensors returns the names of the tensors that store the weight.
func (w QuantizedWeight) Tensors() []string {
	var names []string
	for _, n := range []string{w.Values, w.Scale, w.ZeroPoint, w.GlobalScale, w.ShapeTensor} {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

// Quantization returns how the checkpoint's weights are quantized, from
// the quantization_config of the config.json of its folder and from its
// tensors, or nil for a model that is not quantized. Without a
// config.json (a lone file), the method is inferred from the tensors: FP8
// from F8_E4M3 weights beside their "weight_scale_inv", its block size as
// the power of two that gives every scale's shape (Ambiguous says so when
// none does); MXFP4 from "_blocks" and
// "_scales"; compressed-tensors from "weight_packed", or from I8 or
// F8_E4M3 weights beside their "weight_scale". A weight whose tensors do
// not match is listed with its Err. A config.json that is not JSON gives
// an error. A config.json that names fp8, mxfp4 or compressed-tensors
// beside tensors that none of them stores gives nil.
func (c *Checkpoint) Quantization(ctx context.Context) (*Quantization, error) {
	return c.quantization(ctx, true)
}

// quantization is Quantization, which reads config.json if readConfig is
// set; otherwise the quantization comes from the tensors alone.
func (c *Checkpoint) quantization(ctx context.Context, readConfig bool) (*Quantization, error) {
	var qc map[string]any
	var err error
	if readConfig {
		data, err := c.ReadFile(ctx, "config.json")
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			cfg, err := pyjson.DecodeObject(data)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: %s: %w", c.dir.path("config.json"), err)
			}
			qc, _ = cfg["quantization_config"].(map[string]any)
		}
	}
	names := c.Names()
	infos := make([]safetensors.TensorInfo, len(names))
	for i, n := range names {
		if infos[i], err = c.Info(n); err != nil {
			return nil, err
		}
		infos[i].Name = n
	}
	q := RecognizeQuantization(qc, infos)
	if q != nil && q.Method == MethodCompressedTensors {
		if err := q.ReadShapes(ctx, c); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// RecognizeQuantization returns the quantization of the tensors infos
// (their names, dtypes, shapes and offsets, as a header gives them) given
// config.json's quantization_config qc, decoded by encoding/json (numbers
// as float64 or json.Number), or nil for a model without one: see
// Checkpoint.Quantization, which calls it. It returns nil for tensors
// that are not quantized.
func RecognizeQuantization(qc map[string]any, infos []safetensors.TensorInfo) *Quantization {
	byName := make(map[string]safetensors.TensorInfo, len(infos))
	names := make([]string, len(infos))
	for i, t := range infos {
		byName[t.Name] = t
		names[i] = t.Name
	}
	slices.Sort(names)
	return recognize(qc, names, byName)
}

// positiveInt returns v, a JSON number, as a positive integer.
func positiveInt(v any) (uint64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return uint64(i), err == nil && i > 0
	case float64:
		return uint64(n), n >= 1 && n <= 1<<53 && n == float64(uint64(n))
	}
	return 0, false
}

// recognize returns the quantization of the tensors names (sorted), given
// config.json's quantization_config qc (nil for none).
func recognize(qc map[string]any, names []string, infos map[string]safetensors.TensorInfo) *Quantization {
	q := &Quantization{}
	if qc != nil {
		q.Method, _ = qc["quant_method"].(string)
		q.Format, _ = qc["format"].(string)
		if q.Method == MethodCompressedTensors && q.Format == "" {
			q.Format = groupFormat(qc)
		}
		if q.Method == MethodFP8 {
			if bs, ok := qc["weight_block_size"].([]any); ok && len(bs) == 2 {
				for _, v := range bs {
					n, ok := positiveInt(v)
					if !ok {
						q.BlockSize = nil
						break
					}
					q.BlockSize = append(q.BlockSize, n)
				}
			}
		}
		if q.Method == MethodCompressedTensors {
			if g := groupSize(qc); g > 0 {
				q.BlockSize = []uint64{1, g}
			}
			q.numBits = groupBits(qc)
			if q.ctBlock = groupBlock(qc); q.ctBlock != nil {
				q.BlockSize = q.ctBlock
			}
		}
	}
	has := func(n string) bool { _, ok := infos[n]; return ok }
	switch {
	case q.Method == MethodFP8 || q.Method == "" && slices.ContainsFunc(names, func(n string) bool {
		w, ok := strings.CutSuffix(n, ".weight_scale_inv")
		return ok && has(w+".weight") && infos[w+".weight"].DType == safetensors.F8_E4M3
	}):
		q.Method = MethodFP8
		recognizeFP8(q, qc == nil, names, infos)
	case q.Method == MethodMXFP4 || q.Method == "" && slices.ContainsFunc(names, func(n string) bool {
		p, ok := strings.CutSuffix(n, "_blocks")
		return ok && has(p+"_scales") && infos[n].DType == safetensors.U8
	}):
		q.Method = MethodMXFP4
		q.BlockSize = []uint64{1, 32}
		recognizeMXFP4(q, names, infos)
	case q.Method == MethodCompressedTensors || q.Method == "" && slices.ContainsFunc(names, func(n string) bool {
		w, ok := strings.CutSuffix(n, ".weight_scale")
		if !ok {
			return false
		}
		d := infos[w+".weight"].DType
		return has(w+".weight_packed") || has(w+".weight") && (d == safetensors.I8 || d == safetensors.F8_E4M3)
	}):
		q.Method = MethodCompressedTensors
		recognizeCompressed(q, names, infos)
	case q.Method == "":
		return nil
	}
	if len(q.Weights) == 0 && len(q.Others) == 0 {
		// A method this package knows, which none of the tensors uses
		// (a config.json beside another model's weights).
		return nil
	}
	q.Inferred = qc == nil
	q.count(infos)
	return q
}

// count sets q.Params and q.Bytes, and sorts its lists.
func (q *Quantization) count(infos map[string]safetensors.TensorInfo) {
	q.Params, q.Bytes = 0, 0
	for _, w := range q.Weights {
		q.Params += numElements(w.Shape)
		for _, n := range w.Tensors() {
			i := infos[n]
			q.Bytes += i.DataOffsets[1] - i.DataOffsets[0]
		}
	}
	slices.SortFunc(q.Weights, func(a, b QuantizedWeight) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(q.Others)
}

// numElements is the product of shape, saturated at the largest uint64.
func numElements(shape []uint64) uint64 {
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return ^uint64(0)
		}
		n = lo
	}
	return n
}

// ceilDiv is ceil(a/b) for b > 0.
func ceilDiv(a, b uint64) uint64 { return a/b + min(a%b, 1) }

// recognizeFP8 lists the FP8 weights: each "X.weight" beside
// "X.weight_scale_inv". Without a config, the block size is inferred.
func recognizeFP8(q *Quantization, infer bool, names []string, infos map[string]safetensors.TensorInfo) {
	for _, n := range names {
		w, ok := strings.CutSuffix(n, ".weight_scale_inv")
		if !ok {
			if m, ok := strings.CutSuffix(n, ".activation_scale"); ok {
				if _, ok := infos[m+".weight_scale_inv"]; ok {
					q.Others = append(q.Others, n)
				}
			}
			continue
		}
		v, ok := infos[w+".weight"]
		if !ok {
			continue
		}
		q.Weights = append(q.Weights, QuantizedWeight{Name: v.Name, Shape: v.Shape, Values: v.Name, Scale: n, Bits: v.DType.Bits()})
	}
	if infer {
		q.BlockSize, q.Ambiguous = inferBlockSize(q.Weights, infos)
	}
	for i := range q.Weights {
		q.Weights[i].Err = checkFP8(q.Weights[i], q.BlockSize, infos)
	}
}

// inferBlockSize returns the block size that gives the shapes of all the
// weights' scales, taken to be a power of two, as every published FP8
// checkpoint's is (128): the smallest that does. With ceil(n/b) scales
// for n values, at most one power of two fits a dimension of two scales
// or more, and any two that fit one of a single scale dequantize alike.
// It returns nil for weights of one scale each, and says so where no
// power of two fits (a block size of another kind, which the tensors do
// not tell).
func inferBlockSize(ws []QuantizedWeight, infos map[string]safetensors.TensorInfo) ([]uint64, string) {
	block := make([]uint64, 2)
	for d := range 2 {
		for k := range 31 {
			b := uint64(1) << k
			ok := len(ws) > 0
			for _, w := range ws {
				s, v := infos[w.Scale].Shape, infos[w.Values].Shape
				if len(s) < 2 || len(s) != len(v) || ceilDiv(v[len(v)-2+d], b) != s[len(s)-2+d] {
					ok = false
					break
				}
			}
			if ok {
				block[d] = b
				break
			}
		}
		if block[d] == 0 {
			if len(ws) > 0 && len(infos[ws[0].Scale].Shape) <= 1 && numElements(infos[ws[0].Scale].Shape) == 1 {
				return nil, "" // one scale a weight
			}
			return nil, "no power of two gives every scale's shape from its weight's: the block size is not known"
		}
	}
	return block, ""
}

// checkFP8 returns what is wrong with the FP8 weight w, for the block
// size block (nil: one scale).
func checkFP8(w QuantizedWeight, block []uint64, infos map[string]safetensors.TensorInfo) error {
	v, s := infos[w.Values], infos[w.Scale]
	switch {
	case v.DType != safetensors.F8_E4M3 && v.DType != safetensors.F8_E5M2:
		return fmt.Errorf("%s is %v, not F8_E4M3", w.Values, v.DType)
	case s.DType != safetensors.F32 && s.DType != safetensors.BF16 && s.DType != safetensors.F16:
		return fmt.Errorf("its scale %s is %v, not F32", w.Scale, s.DType)
	case block == nil:
		if numElements(s.Shape) != 1 {
			return fmt.Errorf("its scale %s has shape %v, not one value (no weight_block_size)", w.Scale, s.Shape)
		}
		return nil
	case len(v.Shape) < 2:
		return fmt.Errorf("%s has shape %v: blocks need two dimensions", w.Values, v.Shape)
	}
	r := len(v.Shape)
	want := slices.Clone(v.Shape)
	want[r-2], want[r-1] = ceilDiv(v.Shape[r-2], block[0]), ceilDiv(v.Shape[r-1], block[1])
	if !slices.Equal(s.Shape, want) {
		return fmt.Errorf("its scale %s has shape %v, not %v for blocks of %dx%d", w.Scale, s.Shape, want, block[0], block[1])
	}
	return nil
}

// recognizeMXFP4 lists the MXFP4 weights: each "P_blocks" beside
// "P_scales".
func recognizeMXFP4(q *Quantization, names []string, infos map[string]safetensors.TensorInfo) {
	for _, n := range names {
		p, ok := strings.CutSuffix(n, "_blocks")
		if !ok {
			continue
		}
		s, ok := infos[p+"_scales"]
		if !ok {
			continue
		}
		b := infos[n]
		w := QuantizedWeight{Name: p, Values: n, Scale: s.Name, Bits: 4}
		switch {
		case b.DType != safetensors.U8 || s.DType != safetensors.U8:
			w.Err = fmt.Errorf("%s is %v and %s %v, not U8", n, b.DType, s.Name, s.DType)
		case len(b.Shape) != 4 || b.Shape[3] != 16:
			w.Err = fmt.Errorf("%s has shape %v, not [experts, rows, groups, 16]", n, b.Shape)
		case !slices.Equal(s.Shape, b.Shape[:3]):
			w.Err = fmt.Errorf("its scales %s have shape %v, not %v", s.Name, s.Shape, b.Shape[:3])
		}
		if w.Err == nil {
			w.Shape = []uint64{b.Shape[0], b.Shape[2] * 32, b.Shape[1]}
		}
		q.Weights = append(q.Weights, w)
	}
}

// groupFormat returns the format of compressed-tensors' config groups,
// where the config gives none of its own and they agree.
func groupFormat(qc map[string]any) string {
	groups, _ := qc["config_groups"].(map[string]any)
	format := ""
	for _, g := range groups {
		g, _ := g.(map[string]any)
		f, _ := g["format"].(string)
		if format != "" && f != format {
			return "mixed-precision"
		}
		format = f
	}
	return format
}

// groupSize returns the group size of compressed-tensors' weights, where
// the config groups that have one (the group strategy) agree, or 0.
func groupSize(qc map[string]any) uint64 {
	groups, _ := qc["config_groups"].(map[string]any)
	size := uint64(0)
	for _, g := range groups {
		g, _ := g.(map[string]any)
		w, _ := g["weights"].(map[string]any)
		if n, ok := positiveInt(w["group_size"]); ok {
			if size != 0 && n != size {
				return 0
			}
			size = n
		}
	}
	return size
}

// cutAny returns s without the first of the suffixes it ends with.
func cutAny(s string, suffixes ...string) (string, bool) {
	for _, x := range suffixes {
		if b, ok := strings.CutSuffix(s, x); ok {
			return b, true
		}
	}
	return s, false
}
