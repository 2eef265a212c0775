package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/safetensors-go/safetensors/check"
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
Every value is read once, piece by piece, in parallel. A model of several parts
is checked part by part, each against the config.json of its folder: each
part's report follows the model's line, its lines behind the part's name. The
status is 1 if there is an error, 0 with warnings only.`+modelHelp)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	configPath := fs.String("config", "", "the model's config.json, if not beside the weights")
	maxAbs := fs.Float64("max-abs", check.DefaultMaxAbs, "warn about values whose magnitude is beyond this (a negative value: never)")
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 1 {
		return usageError(fs, "want one MODEL, got %d", len(operands))
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
		data, err := readRegular(*configPath)
		if err != nil {
			return fail(stderr, "check", err)
		}
		opts = append(opts, check.Config(data))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	m, err := openModel(ctx, name) // ctx stops its network reads too
	if err != nil {
		return fail(stderr, "check", err)
	}
	defer m.Close()
	if parts := m.ck.Parts(); parts != nil && *configPath != "" {
		return usageError(fs, "--config gives one config.json, and %s is a model of %d parts (%s), each checked against its own", name, len(parts), partNames(parts))
	}
	meter := newMeter(stderr, name, *asJSON)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, check.Progress(meter.Update))
	}
	report, err := check.Checkpoint(ctx, m.ck, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "check", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = printReport(stdout, name, report)
	}
	if err != nil {
		return fail(stderr, "check", err)
	}
	if report.Errors() > 0 {
		return exitFail
	}
	return exitOK
}

// printReport prints the report r on the model name: for a model of
// several parts, a line for the model, then each part's report, its lines
// behind the part's name.
func printReport(w io.Writer, name string, r *check.Report) error {
	if r.Parts == nil {
		return printPart(w, name+": ", "", r)
	}
	fmt.Fprintf(w, "%s: %d parts, %d tensors, %s: %d errors, %d warnings\n", name, len(r.Parts), r.Tensors, bytesString(r.Bytes), r.Errors(), r.Warnings())
	for _, p := range r.Parts {
		label := p.Part
		if label == "" {
			label = "."
		}
		if err := printPart(w, label+": ", label+": ", p); err != nil {
			return err
		}
	}
	return nil
}

// printPart prints the report r, its first line behind head and the others
// behind prefix.
func printPart(w io.Writer, head, prefix string, r *check.Report) error {
	family := "configuration not checked"
	switch {
	case r.Family != "":
		family = r.Family + " configuration checked"
	case len(r.Checked) > 0:
		family = "configuration checked (1 key)"
		if len(r.Checked) > 1 {
			family = fmt.Sprintf("configuration checked (%d keys)", len(r.Checked))
		}
	}
	fmt.Fprintf(w, "%s%d tensors, %s, %s: %d errors, %d warnings\n", head, r.Tensors, bytesString(r.Bytes), family, r.Errors(), r.Warnings())
	if len(r.Checked) > 0 {
		fmt.Fprintf(w, "%sconfig keys checked: %s\n", prefix, strings.Join(r.Checked, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "%snote: %s\n", prefix, n)
	}
	for _, f := range r.Findings {
		if _, err := fmt.Fprintf(w, "%s%s\n", prefix, f); err != nil {
			return err
		}
	}
	return nil
}
