package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

func runConvert(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("convert", stderr, `Convert writes OUT as a copy of the MODEL whose float tensors (F64, F32, F16,
BF16) have the dtype given by --dtype; the other tensors (integers, BOOL, the F8
types) and the metadata are kept as they are (checkpoint.Convert). For a MODEL
named by its one safetensors file, OUT is a file; for any other, OUT is a new
folder that receives every safetensors file of the model under its name
(unet/... for a part), its indexes, and for a model on disk the other files of
its folders (config.json, the tokenizer's, model_index.json, ...). It streams:
memory use does not grow with the model. OUT appears only when it is complete:
until then it is written to a temporary file or folder beside it, named
.OUT.tmpXXXX, which a failure, SIGINT or SIGTERM removes. OUT may not be the
input file. F64 values are rounded to float32 (to nearest) before any
conversion to 16 bits. Progress goes to stderr when it is a terminal.

A quantized model (FP8 block-scaled, MXFP4, compressed-tensors, ...: see
inspect) is refused, naming its method, rather than recast its weights or
their scales. With --dequantize, a model in FP8 block-scaled (DeepSeek-V3,
Qwen3-FP8), MXFP4 (gpt-oss) or compressed-tensors' int-quantized,
float-quantized, pack-quantized or nvfp4-pack-quantized format is written as
a plain model of --dtype BF16 or F32: each weight as the reference
dequantizer computes it, bit for bit (FP8: each value times its block's
scale in float32, rounded once to BF16; MXFP4: transformers'
convert_moe_packed_tensors, "X_blocks" and "X_scales" becoming "X";
compressed-tensors: its decompressor), the scales, zero points and packed
forms left out, config.json without quantization_config
(checkpoint.Dequantize).`, modelInputs,
		`0 written; 1 the model is invalid; 2 it could not be read, it is quantized
(without --dequantize, or in a method it does not dequantize), or OUT not
written; 130 or 143 after SIGINT or SIGTERM (OUT not written).`)
	asJSON := addJSONFlag(fs)
	dtype := fs.String("dtype", "", "the dtype of the float tensors: F16, BF16 or F32 (required)")
	dequantize := fs.Bool("dequantize", false, "write a quantized model (FP8 block-scaled, MXFP4, compressed-tensors) dequantized, in --dtype BF16 or F32")
	rounding := fs.String("rounding", "nearest", "how to round to F16 or BF16: nearest (to even, as PyTorch does) or truncate")
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 2 {
		return usageError(fs, "want MODEL and OUT, got %d arguments", len(operands))
	}
	to, err := safetensors.ParseDType(strings.ToUpper(*dtype))
	if err != nil || (to != safetensors.F16 && to != safetensors.BF16 && to != safetensors.F32) {
		return usageError(fs, "--dtype must be F16, BF16 or F32, not %q", *dtype)
	}
	var r safetensors.Rounding
	switch *rounding {
	case "nearest":
		r = safetensors.RoundNearestEven
	case "truncate":
		r = safetensors.Truncate
	default:
		return usageError(fs, "--rounding must be nearest or truncate, not %q", *rounding)
	}
	in, out := operands[0], operands[1]
	if *dequantize && to == safetensors.F16 {
		return usageError(fs, "--dequantize writes BF16 or F32, not F16")
	}
	opts := append(checkpointOptions(in), checkpoint.Rounding(r))
	if *dequantize {
		opts = append(opts, checkpoint.Dequantize())
	}
	meter := newMeter(stderr, in, *asJSON)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, checkpoint.Progress(meter.Update))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	// Convert refuses to write over its input file: "X and Y are the same
	// file".
	c, err := checkpoint.Convert(ctx, in, out, to, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "convert", in, err)
	}
	o := convertOutput{Model: in, Out: out, DType: to.String(), TensorCount: c.Tensors, ConvertedCount: c.Converted, DequantizedCount: c.Dequantized, Bytes: c.Bytes,
		Files: list(c.Files), Copied: list(c.Copied)}
	if *asJSON {
		err = writeJSON(stdout, o)
	} else {
		written := fmt.Sprintf("%d of %s converted to %v, %s written", c.Converted, plural(c.Tensors, "tensor"), to, bytesString(c.Bytes))
		if *dequantize {
			written = fmt.Sprintf("%d of %s converted to %v (%s dequantized), %s written", c.Converted, plural(c.Tensors, "tensor"), to, plural(c.Dequantized, "weight"), bytesString(c.Bytes))
		}
		if info, err := os.Stat(out); err == nil && info.IsDir() {
			written += fmt.Sprintf(" in %s, %s copied", plural(len(c.Files), "file"), plural(len(c.Copied), "other file"))
		}
		_, err = fmt.Fprintf(stdout, "%s: %s\n", out, written)
	}
	if err != nil {
		return fail(stderr, "convert", out, err)
	}
	return exitOK
}

// convertOutput is what convert --json prints.
type convertOutput struct {
	Model          string `json:"model"`
	Out            string `json:"out"`
	DType          string `json:"dtype"`
	TensorCount    int    `json:"tensor_count"`
	ConvertedCount int    `json:"converted_count"`
	// DequantizedCount counts the weights dequantized (--dequantize),
	// among ConvertedCount.
	DequantizedCount int      `json:"dequantized_count"`
	Bytes            uint64   `json:"bytes"`  // of the safetensors files written
	Files            []string `json:"files"`  // the safetensors files written, relative to OUT
	Copied           []string `json:"copied"` // the other files copied, relative to OUT
}
