package main

import (
	"fmt"
	"io"

	"github.com/safetensors-go/safetensors/quant"
)

func runQuantize(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("quantize", stdout, stderr, `Quantize writes DST, a new directory, as the MODEL with the weights of its Linear
layers quantized to int8 as compressed-tensors' int-quantized format does for
the W8A8 scheme, for vLLM and the compressed-tensors library: each weight becomes
I8 beside its "<module>.weight_scale" in the weight's dtype; embeddings, norms
and the output head (lm_head) stay as they were; config.json gains the
quantization_config; the other files of a folder on disk are copied. DST
appears only when complete. A model of several parts (a diffusers pipeline, a
sentence-transformers model) is refused, with status 2: quantize one part's
folder.`+modelHelp)
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
		return fail(stderr, "quantize", err)
	}
	parts := m.ck.Parts()
	m.Close()
	if parts != nil {
		fmt.Fprintf(stderr, "safetensors quantize: %s is a model of %d parts (%s): quantize one part's folder, such as %s\n",
			src, len(parts), partNames(parts), parts[0].Dir())
		return exitTrouble
	}
	opts := []quant.Option{quant.OpenOptions(checkpointOptions(src)...)}
	meter := newMeter(stderr, src, false)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, quant.Progress(meter.Update))
	}
	sum, err := quant.WriteModel(ctx, src, dst, s, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "quantize", err)
	}
	fmt.Fprintf(stdout, "%s: %d weights quantized to int8 per %v, %d tensors kept, %d other files copied (ignored modules: %v)\n",
		dst, len(sum.Quantized), s, len(sum.Kept), len(sum.Copied), sum.Ignore)
	return exitOK
}
