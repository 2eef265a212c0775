package main

import (
	"fmt"
	"io"

	"github.com/safetensors-go/safetensors/quant"
)

func runQuantize(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("quantize", stdout, stderr, `Quantize writes DST, a new directory, as the model at SRC (a model directory or
a safetensors file) with the weights of its Linear layers quantized to int8 as
compressed-tensors' int-quantized format does for the W8A8 scheme, for vLLM
and the compressed-tensors library: each weight becomes I8 beside its
"<module>.weight_scale" in the weight's dtype; embeddings, norms and the output
head (lm_head) stay as they were; config.json gains the quantization_config;
the other files are copied. DST appears only when complete.`)
	per := fs.String("per", "channel", "the scales' granularity: channel (one per output row) or tensor")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 2 {
		return usageError(fs, "want SRC and DST, got %d arguments", len(operands))
	}
	s, err := quant.ParseStrategy(*per)
	if err != nil {
		return usageError(fs, "--per must be channel or tensor, not %q", *per)
	}
	ctx, stop := catchInterrupts()
	defer stop()
	sum, err := quant.WriteModel(ctx, operands[0], operands[1], s)
	if err != nil {
		fmt.Fprintf(stderr, "safetensors quantize: %s\n", errorText(err))
		if status := interruptStatus(err); status != 0 {
			return status
		}
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %d weights quantized to int8 per %v, %d tensors kept, %d other files copied (ignored modules: %v)\n",
		operands[1], len(sum.Quantized), s, len(sum.Kept), len(sum.Copied), sum.Ignore)
	return exitOK
}
