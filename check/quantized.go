package check

import (
	"context"
	"fmt"
	"math"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/plural"
)

// KindQuantization is the kind of the findings about a quantized model's
// weights (checkpoint.Quantization): a scale whose shape does not match
// its weight and block size, a weight of the wrong dtype, a scale that is
// not positive (error).
const KindQuantization = "quantization"

// quantization recognises the quantization of the tensors infos, given
// config.json cfg (nil for none), and returns it (nil for a model that is
// not quantized), its findings, and the names of the tensors it stores
// its weights in, which the dtype rule leaves out: an F8 weight beside
// its F32 scales is how the method stores it, not a tensor in another
// dtype. It reads the scales, which must be finite and positive (the F32
// scales' NaN and infinities are the value rule's to report).
func quantization(ctx context.Context, es safetensors.ElementSource, cfg map[string]any, infos []info) (*checkpoint.Quantization, []Finding, map[string]bool, error) {
	qc, _ := cfg["quantization_config"].(map[string]any)
	ts := make([]safetensors.TensorInfo, len(infos))
	for i, t := range infos {
		ts[i] = safetensors.TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape, DataOffsets: [2]uint64{0, t.size}}
	}
	q := checkpoint.RecognizeQuantization(qc, ts)
	if q == nil {
		return nil, nil, nil, nil
	}
	if err := q.ReadShapes(ctx, es); err != nil {
		return nil, nil, nil, err
	}
	stored := map[string]bool{}
	for _, n := range q.Others {
		stored[n] = true
	}
	var findings []Finding
	if q.Ambiguous != "" {
		findings = append(findings, Finding{Severity: Warning, Kind: KindQuantization,
			Message: fmt.Sprintf("%s quantization inferred from the tensors (no quantization_config): %s", q.Method, q.Ambiguous)})
	}
	for _, w := range q.Weights {
		for _, n := range w.Tensors() {
			stored[n] = true
		}
		if w.Err != nil {
			findings = append(findings, Finding{Severity: Error, Kind: KindQuantization, Tensor: w.Name, Message: w.Err.Error()})
			continue
		}
		if w.Scale == "" {
			continue
		}
		bad, first, err := badScales(ctx, es, w.Scale, q.Method)
		if err != nil {
			return nil, nil, nil, err
		}
		if bad > 0 {
			what := "not positive"
			if isE8M0(es, w.Scale, q.Method) {
				what = "0xff, E8M0's NaN"
			}
			verb := "are"
			if bad == 1 {
				verb = "is"
			}
			f := first
			findings = append(findings, Finding{Severity: Error, Kind: KindQuantization, Tensor: w.Scale, Count: bad, First: &f,
				Message: fmt.Sprintf("%s of the scales of %s %s %s", plural.Of(bad, "value"), w.Name, verb, what)})
		}
	}
	return q, findings, stored, nil
}

// scaleChunk is how many scales badScales reads at a time.
const scaleChunk = 1 << 20

// badScales counts the scales of the tensor name that are not a scale:
// for E8M0 scales (MXFP4, compressed-tensors' MX formats), the byte 0xff
// (E8M0's NaN); for the others, a value that is zero or negative. It returns how many, and the index of the first.
func badScales(ctx context.Context, es safetensors.ElementSource, name, method string) (uint64, uint64, error) {
	info, err := es.Info(name)
	if err != nil {
		return 0, 0, err
	}
	n := info.NumElements()
	var bad, first uint64
	var buf []byte
	var vals []float32
	for lo := uint64(0); lo < n; lo += scaleChunk {
		hi := min(lo+scaleChunk, n)
		t, err := es.TensorElements(ctx, name, lo, hi, buf)
		if err != nil {
			return 0, 0, err
		}
		if cap(buf) < len(t.Data) {
			buf = make([]byte, len(t.Data))
		}
		count := func(i int, isBad bool) {
			if isBad {
				if bad == 0 {
					first = lo + uint64(i)
				}
				bad++
			}
		}
		if (method == checkpoint.MethodMXFP4 || method == checkpoint.MethodCompressedTensors) && t.DType == safetensors.U8 {
			for i, b := range t.Data {
				count(i, b == 0xff)
			}
			continue
		}
		if !t.DType.IsFloat() {
			continue
		}
		if vals, err = t.AppendFloat32s(vals[:0]); err != nil {
			return 0, 0, err
		}
		for i, v := range vals {
			count(i, v <= 0 && !math.IsNaN(float64(v)))
		}
	}
	return bad, first, nil
}

// isE8M0 reports whether the scales name of the method are E8M0
// exponents: U8 scales of MXFP4 or of compressed-tensors' MX formats.
func isE8M0(es safetensors.ElementSource, name, method string) bool {
	info, err := es.Info(name)
	return err == nil && info.DType == safetensors.U8 && (method == checkpoint.MethodMXFP4 || method == checkpoint.MethodCompressedTensors)
}

// quantNote says how the model is quantized.
func quantNote(q *checkpoint.Quantization) string {
	m := q.Method
	if q.Format != "" {
		m += " " + q.Format
	}
	if q.BlockSize != nil {
		m += fmt.Sprintf(", blocks of %dx%d", q.BlockSize[0], q.BlockSize[1])
	}
	if q.Inferred {
		m += ", inferred from the tensors"
	}
	return fmt.Sprintf("quantized (%s): %s, %.3g bits per parameter; the scales' shapes and values checked", m, plural.Of(len(q.Weights), "weight"), q.BitsPerParameter())
}
