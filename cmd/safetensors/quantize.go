package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/safetensors-go/safetensors/quant"
)

func runQuantize(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("quantize", stderr, `Quantize writes DST, a new directory, as the MODEL with the weights of its Linear
layers quantized to int8 as compressed-tensors' int-quantized format does for
the W8A8 scheme, for vLLM and the compressed-tensors library: each weight becomes
I8 beside its "<module>.weight_scale" in the weight's dtype; embeddings, norms
and the output head (lm_head) stay as they were; config.json gains the
quantization_config; the other files of a folder on disk are copied. DST
appears only when complete. A model of several parts (a diffusers pipeline, a
sentence-transformers model) is refused: quantize one part's folder. Progress
goes to stderr when it is a terminal.`, modelInputs,
		`0 written; 1 the model is invalid or holds NaN or Inf; 2 it could not be
read, is a model of several parts, or DST not written.`)
	asJSON := addJSONFlag(fs)
	per := fs.String("per", "channel", "the scales' granularity: channel (one per output row) or tensor")
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 2 {
		return usageError(fs, "want MODEL and DST, got %d arguments", len(operands))
	}
	s, err := quant.ParseStrategy(*per)
	if err != nil {
		return usageError(fs, "--per must be channel or tensor, not %q", *per)
	}
	src, dst := operands[0], operands[1]
	ctx, stop := catchInterrupts()
	defer stop()
	m, err := openModel(ctx, src)
	if err != nil {
		return fail(stderr, "quantize", src, err)
	}
	parts := m.ck.Parts()
	m.Close()
	if parts != nil {
		fmt.Fprintf(stderr, "safetensors quantize: %s: a model of %s (%s): quantize one part's folder, such as %s\n",
			src, plural(len(parts), "part"), partNames(parts), parts[0].Dir())
		return exitTrouble
	}
	opts := []quant.Option{quant.OpenOptions(checkpointOptions(src)...)}
	meter := newMeter(stderr, src, *asJSON)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, quant.Progress(meter.Update))
	}
	sum, err := quant.WriteModel(ctx, src, dst, s, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "quantize", src, err)
	}
	o := quantizeOutput{Model: src, Out: dst, Per: s.String(), Files: list(sum.Files), Quantized: list(sum.Quantized), Kept: list(sum.Kept),
		Copied: list(sum.Copied), Ignore: list(sum.Ignore)}
	if *asJSON {
		err = writeJSON(stdout, o)
	} else {
		_, err = fmt.Fprintf(stdout, "%s: %s quantized to int8 per %v, %s kept, %s copied (ignored modules: %s)\n",
			dst, plural(len(sum.Quantized), "weight"), s, plural(len(sum.Kept), "tensor"), plural(len(sum.Copied), "other file"), strings.Join(sum.Ignore, ", "))
	}
	if err != nil {
		return fail(stderr, "quantize", dst, err)
	}
	return exitOK
}

// quantizeOutput is what quantize --json prints.
type quantizeOutput struct {
	Model     string   `json:"model"`
	Out       string   `json:"out"`
	Per       string   `json:"per"`       // the scales' granularity: "channel" or "tensor"
	Files     []string `json:"files"`     // the safetensors files written, relative to DST
	Quantized []string `json:"quantized"` // the weights quantized to int8
	Kept      []string `json:"kept"`      // the tensors copied as they were
	Copied    []string `json:"copied"`    // the other files copied
	Ignore    []string `json:"ignore"`    // the modules config.json's ignore list names
}
