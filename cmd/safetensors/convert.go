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
	fs := newFlags("convert", stdout, stderr, `Convert writes OUT as a copy of the MODEL whose float tensors (F64, F32, F16,
BF16) have the dtype given by --dtype; the other tensors (integers, BOOL, the F8
types) and the metadata are kept as they are (checkpoint.Convert). For a MODEL
named by its one safetensors file, OUT is a file; for any other (a folder, an
index, a model of several parts, a URL), OUT is a new folder that receives every
safetensors file of the model under its name (unet/... for a part), its indexes,
and for a model on disk the other files of its folders (config.json, the
tokenizer's, model_index.json, ...). It streams: memory use does not grow with
the model. OUT appears only when it is complete: until then it is written to a
temporary file or folder beside it, named .OUT.tmpXXXX, which a failure, SIGINT
or SIGTERM removes (only SIGKILL or a crash can leave it, to be deleted by
hand); after a signal the exit status is 130 (SIGINT) or 143 (SIGTERM). OUT may
not be the input file.
F64 values are rounded to float32 (to nearest) before any conversion to 16 bits.
The progress goes to stderr when it is a terminal.`+modelHelp)
	dtype := fs.String("dtype", "", "the dtype of the float tensors: F16, BF16 or F32 (required)")
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
	opts := append(checkpointOptions(in), checkpoint.Rounding(r))
	meter := newMeter(stderr, in, false)
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
		return fail(stderr, "convert", err)
	}
	written := fmt.Sprintf("%d of %d tensors converted to %v, %s written", c.Converted, c.Tensors, to, bytesString(c.Bytes))
	if info, err := os.Stat(out); err == nil && info.IsDir() {
		written += fmt.Sprintf(" in %d files, %d other files copied", len(c.Files), len(c.Copied))
	}
	fmt.Fprintf(stdout, "%s: %s\n", out, written)
	return exitOK
}
