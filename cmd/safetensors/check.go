package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/safetensors-go/safetensors/check"
	"github.com/safetensors-go/safetensors/checkpoint"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stdout, stderr, `Check checks a model's weights: NaN and Inf in any tensor (errors; a tensor named
as a bound that holds only infinities, as clipping bounds do at init, is not),
float tensors that are all zeros and values beyond --max-abs (warnings), float
tensors of mixed dtypes (a warning), the numbered blocks (model.layers.N., h.N.,
encoder.layer.N., ...: a tensor missing from one block that blocks like it have,
a shape or dtype unlike the other blocks', a tensor transposed, a gap; blocks of
several kinds, such as MoE and dense or attention and SSM layers, are told apart),
and config.json (beside the weights, or --config) against the weights: for every
architecture, the layer count, hidden size, vocabulary and MLP width of the
configuration and of its sub-configurations (text_config, vision_config, ...),
and every shape for the families `+strings.Join(check.Families, ", ")+`.
FILE may be a safetensors file, a sharded checkpoint (its index or directory), a
model directory, or a URL (below). Every value is read once, in parallel. The
status is 1 if there is an error, 0 with warnings only.`+remoteHelp)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	configPath := fs.String("config", "", "the model's config.json, if not beside the weights")
	maxAbs := fs.Float64("max-abs", check.DefaultMaxAbs, "warn about values whose magnitude is beyond this (a negative value: never)")
	addRemoteFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 1 {
		return usageError(fs, "want one FILE, DIR or URL, got %d", len(operands))
	}
	name := operands[0]
	var opts []check.Option
	switch {
	case *maxAbs < 0 || math.IsInf(*maxAbs, 1):
		opts = append(opts, check.NoMagnitude())
	case *maxAbs > 0:
		opts = append(opts, check.MaxAbs(*maxAbs))
	default:
		return usageError(fs, "--max-abs must be positive, or negative for no limit, not %v", *maxAbs)
	}
	if *configPath != "" {
		data, err := readInput(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "safetensors check: %s\n", errorText(err))
			return exitFail
		}
		opts = append(opts, check.Config(data))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	var report *check.Report
	var err error
	ck, err := checkpoint.Open(ctx, name, checkpointOptions(name)...) // ctx stops its network reads too
	if err != nil {
		fmt.Fprintf(stderr, "safetensors check: %s\n", errorText(err))
		return exitFail
	}
	defer ck.Close()
	report, err = check.Checkpoint(ctx, ck, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "safetensors check: %s\n", errorText(err))
		if status := interruptStatus(err); status != 0 {
			return status
		}
		return exitFail
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = printReport(stdout, name, report)
	}
	if err != nil {
		fmt.Fprintf(stderr, "safetensors check: %s\n", errorText(err))
		return exitFail
	}
	if report.Errors() > 0 {
		return exitFail
	}
	return exitOK
}

func printReport(w io.Writer, name string, r *check.Report) error {
	family := "configuration not checked"
	if r.Family != "" {
		family = r.Family + " configuration checked"
	}
	fmt.Fprintf(w, "%s: %d tensors, %s, %s: %d errors, %d warnings\n", name, r.Tensors, bytesString(r.Bytes), family, r.Errors(), r.Warnings())
	if len(r.Checked) > 0 {
		fmt.Fprintf(w, "config keys checked: %s\n", strings.Join(r.Checked, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, f := range r.Findings {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}

// readInput reads the named file, refusing anything but a regular file
// without blocking (see openInput).
func readInput(path string) ([]byte, error) {
	f, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
