package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/safetensors-go/safetensors/check"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr, `Check checks a model's weights: NaN and Inf in any tensor (errors; a tensor named
as a bound that holds only infinities, as clipping bounds do at init, is not),
float tensors that are all zeros and values beyond --max-abs (warnings), float
tensors of mixed dtypes (a warning), the numbered blocks of every stack (a
tensor missing from one block that blocks like it have, a shape or dtype unlike
the other blocks', a tensor transposed, a gap), and config.json (beside the
weights, or --config) against the weights: for every architecture, the layer
count, hidden size, vocabulary and MLP width of the configuration and of its
sub-configurations, and every shape for the families
`+strings.Join(check.Families, ", ")+`.
Every value is read once, piece by piece, in parallel. A model of several parts
is checked part by part, each against the config.json of its folder. Progress
goes to stderr when it is a terminal.`, modelInputs,
		`0 no error (warnings allowed); 1 an error was found; 2 the model could not be
read.`)
	asJSON := addJSONFlag(fs)
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
			return fail(stderr, "check", *configPath, err)
		}
		opts = append(opts, check.Config(data))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	m, err := openModel(ctx, name) // ctx stops its network reads too
	if err != nil {
		return fail(stderr, "check", name, err)
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
		return fail(stderr, "check", name, err)
	}
	if *asJSON {
		err = writeJSON(stdout, newCheckOutput(name, report))
	} else {
		err = printReport(stdout, name, report)
	}
	if err != nil {
		return fail(stderr, "check", name, err)
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
	fmt.Fprintf(w, "%s: %s, %s, %s: %s, %s\n", name, plural(len(r.Parts), "part"), plural(r.Tensors, "tensor"), bytesString(r.Bytes), plural(r.Errors(), "error"), plural(r.Warnings(), "warning"))
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
		family = "configuration checked (" + plural(len(r.Checked), "key") + ")"
	}
	fmt.Fprintf(w, "%s%s, %s, %s: %s, %s\n", head, plural(r.Tensors, "tensor"), bytesString(r.Bytes), family, plural(r.Errors(), "error"), plural(r.Warnings(), "warning"))
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

// checkOutput is what check --json prints: the report on the model, or
// for a model of several parts the model's totals and a report per part.
type checkOutput struct {
	Model string `json:"model,omitempty"` // the model, as named; "" for a part
	Part  string `json:"part,omitempty"`  // the part's folder, for a part ("." for the model's own)
	// Status is the exit status the report gives: 1 with an error.
	Status      int    `json:"status"`
	TensorCount int    `json:"tensor_count"`
	Bytes       uint64 `json:"bytes"`
	// Family is the model family whose configuration was checked shape by
	// shape ("" if none was); ConfigKeys the keys checked by the rule
	// that holds for every architecture.
	Family            string          `json:"family"`
	ConfigKeys        []string        `json:"config_keys"`
	ZeroByDesignCount int             `json:"zero_by_design_count"`
	ErrorCount        int             `json:"error_count"`
	WarningCount      int             `json:"warning_count"`
	Notes             []string        `json:"notes"`
	Findings          []check.Finding `json:"findings"`
	Parts             []checkOutput   `json:"parts"`
}

func newCheckOutput(name string, r *check.Report) checkOutput {
	o := checkOutput{
		Model: name, TensorCount: r.Tensors, Bytes: r.Bytes, Family: r.Family, ConfigKeys: list(r.Checked),
		ZeroByDesignCount: r.ZeroByDesign, ErrorCount: r.Errors(), WarningCount: r.Warnings(),
		Notes: list(r.Notes), Findings: list(r.Findings), Parts: []checkOutput{},
	}
	if o.ErrorCount > 0 {
		o.Status = exitFail
	}
	for _, p := range r.Parts {
		po := newCheckOutput("", p)
		po.Part = p.Part
		if po.Part == "" {
			po.Part = "."
		}
		o.Parts = append(o.Parts, po)
	}
	return o
}
