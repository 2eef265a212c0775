package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors/diff"
)

func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("diff", stderr, `Diff compares the MODELs A and B: the tensors only in one, the metadata (a
model's, so that a sharded checkpoint and a single file of the same tensors are
equal), and each tensor in both, which is one of: identical (the same dtype,
shape and bytes); equal (the same values in other bytes, such as another dtype
holding the same numbers, or -0 against 0); within tolerance (some values
differ, none by more than --atol and --rtol allow); different (some values
beyond them); not comparable (the shapes differ, or a dtype with no real
values, C64, F4 or F6, against another dtype); unreadable.

Values are compared as numbers, whatever their dtypes, decoded to float64, as
numpy.allclose(a, b, rtol, atol) compares them, B being the reference: a and b
are close when |a-b| <= atol + rtol*|b|. An infinity is close only to itself,
a NaN to nothing unless --equal-nan. The relative difference printed is
|a-b|/|b|. Without --atol and --rtol values must be equal: an F32 model and
its BF16 conversion are within --rtol 0.00390625 (2^-8, BF16's rounding) of each
other. Both models are read piece by piece, in parallel. The tensors of a model
of several parts are named behind their part's folder ("unet/conv_in.weight").
--variant applies to both. Progress goes to stderr when it is a terminal.`, modelInputs,
		`0 every tensor in both is identical, equal or within the tolerance, and both
hold the same tensor names and metadata; 1 they differ; 2 one could not be read.`)
	asJSON := addJSONFlag(fs)
	atol := fs.Float64("atol", 0, "values within `X` of each other are close (with --rtol: |a-b| <= X + Y*|b|)")
	rtol := fs.Float64("rtol", 0, "values within `Y` times the value of B are close")
	equalNaN := fs.Bool("equal-nan", false, "a NaN equals a NaN, as numpy's equal_nan=True has it")
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 2 {
		return usageError(fs, "want A and B, got %d arguments", len(operands))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"atol", *atol}, {"rtol", *rtol}} {
		if !(f.v >= 0) || math.IsInf(f.v, 1) {
			return usageError(fs, "--%s must be a finite number of 0 or more, not %v", f.name, f.v)
		}
	}
	opts := []diff.Option{diff.Tolerance(*atol, *rtol)}
	if *equalNaN {
		opts = append(opts, diff.EqualNaN())
	}
	ctx, stop := catchInterrupts()
	defer stop()
	a, b := operands[0], operands[1]
	meter := newMeter(stderr, a, *asJSON)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, diff.Progress(meter.Update))
	}
	r, failed, err := diffModels(ctx, a, b, opts)
	meter.Done()
	if err != nil {
		return fail(stderr, "diff", failed, err)
	}
	status = exitOK
	if !r.Equal() {
		status = exitFail
	}
	if *asJSON {
		err = writeJSON(stdout, diffDocument(a, b, *atol, *rtol, *equalNaN, status, r))
	} else {
		err = printDiff(stdout, a, b, r)
	}
	if err != nil {
		return fail(stderr, "diff", "", err)
	}
	return status
}

// diffModels compares the models a and b, opened with openModel; on an
// error, failed names the model it is about, if it is one.
func diffModels(ctx context.Context, a, b string, opts []diff.Option) (_ *diff.Result, failed string, _ error) {
	ma, err := openModel(ctx, a)
	if err != nil {
		return nil, a, err
	}
	defer ma.Close()
	mb, err := openModel(ctx, b)
	if err != nil {
		return nil, b, err
	}
	defer mb.Close()
	r, err := diff.Compare(ctx, ma.ck, mb.ck, ma.ck.Metadata(), mb.ck.Metadata(), opts...)
	return r, "", err
}

// diffJSON is the document diff --json prints (docs/cli.md describes it):
// the command's own, so that the library's types can change without
// changing it.
type diffJSON struct {
	A                 string         `json:"a"`
	B                 string         `json:"b"`
	Atol              float64        `json:"atol"`
	Rtol              float64        `json:"rtol"`
	EqualNaN          bool           `json:"equal_nan"`
	Equal             bool           `json:"equal"`
	Status            int            `json:"status"`
	OnlyA             []string       `json:"only_a"`
	OnlyB             []string       `json:"only_b"`
	Tensors           []diffTensor   `json:"tensors"`
	Metadata          []diffMetadata `json:"metadata_keys"`
	IdenticalCount    int            `json:"identical_count"`
	EqualCount        int            `json:"equal_count"`
	CloseCount        int            `json:"close_count"`
	DifferentCount    int            `json:"different_count"`
	IncomparableCount int            `json:"incomparable_count"`
	ErrorCount        int            `json:"error_count"`
}

// diffTensor is a tensor in both models, in diffJSON.
type diffTensor struct {
	Name    string   `json:"name"`
	Verdict string   `json:"verdict"`
	DTypeA  string   `json:"dtype_a"`
	DTypeB  string   `json:"dtype_b"`
	ShapeA  []uint64 `json:"shape_a"`
	ShapeB  []uint64 `json:"shape_b"`
	ByBytes bool     `json:"by_bytes"`
	Values  uint64   `json:"value_count"`
	// Unequal counts the values that differ, Differing those beyond the
	// tolerance.
	Unequal   uint64 `json:"unequal_count"`
	Differing uint64 `json:"differing_count"`
	// MaxAbsDiff and MaxRelDiff are null where no values were compared or
	// the difference is infinite.
	MaxAbsDiff *float64 `json:"max_abs_diff"`
	MaxRelDiff *float64 `json:"max_rel_diff"`
	Error      string   `json:"error,omitempty"`
}

// diffMetadata is a metadata key whose values differ, in diffJSON: A or B
// is null where the key is absent.
type diffMetadata struct {
	Key string  `json:"key"`
	A   *string `json:"value_a"`
	B   *string `json:"value_b"`
}

// diffDocument returns the JSON document of the comparison r of the models
// a and b, as given on the command line, with the tolerance it was made
// with and the status it gives.
func diffDocument(a, b string, atol, rtol float64, equalNaN bool, status int, r *diff.Result) diffJSON {
	doc := diffJSON{
		A: a, B: b, Atol: atol, Rtol: rtol, EqualNaN: equalNaN, Equal: r.Equal(), Status: status,
		OnlyA: orEmpty(r.OnlyA), OnlyB: orEmpty(r.OnlyB), Tensors: []diffTensor{}, Metadata: []diffMetadata{},
		IdenticalCount:    r.Count(diff.Identical),
		EqualCount:        r.Count(diff.Equal),
		CloseCount:        r.Count(diff.Close),
		DifferentCount:    r.Count(diff.Different),
		IncomparableCount: r.Count(diff.Incomparable),
		ErrorCount:        r.Count(diff.Error),
	}
	for _, t := range r.Tensors {
		compared := !t.ByBytes && t.Verdict != diff.Incomparable && t.Verdict != diff.Error
		number := func(x float64) *float64 {
			if !compared || math.IsInf(x, 0) {
				return nil
			}
			return &x
		}
		e := diffTensor{
			Name: t.Name, Verdict: t.Verdict.String(),
			DTypeA: t.DTypeA.String(), DTypeB: t.DTypeB.String(),
			ShapeA: orEmpty(t.ShapeA), ShapeB: orEmpty(t.ShapeB),
			ByBytes: t.ByBytes, Values: t.Values, Unequal: t.Unequal, Differing: t.Differing,
			MaxAbsDiff: number(t.MaxAbs), MaxRelDiff: number(t.MaxRel),
		}
		if t.Err != "" {
			e.Error = errorText(errors.New(t.Err))
		}
		doc.Tensors = append(doc.Tensors, e)
	}
	for _, m := range r.Metadata {
		doc.Metadata = append(doc.Metadata, diffMetadata{Key: m.Key, A: m.A, B: m.B})
	}
	return doc
}

// orEmpty returns s, or an empty slice for nil, which JSON writes as [].
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// printDiff prints the comparison r of the models a and b: a line for each
// tensor only in one, each tensor in both that is not identical and each
// metadata key that differs, then a summary whose counts are those of the
// lines.
func printDiff(w io.Writer, a, b string, r *diff.Result) error {
	for _, n := range r.OnlyA {
		fmt.Fprintf(w, "only in %s: %s\n", a, quoteIfNeeded(n))
	}
	for _, n := range r.OnlyB {
		fmt.Fprintf(w, "only in %s: %s\n", b, quoteIfNeeded(n))
	}
	for _, t := range r.Tensors {
		if t.Verdict != diff.Identical {
			fmt.Fprintf(w, "%s: %s\n", quoteIfNeeded(t.Name), tensorLine(t))
		}
	}
	for _, m := range r.Metadata {
		fmt.Fprintf(w, "metadata %q: %s, %s\n", m.Key, metaValue(m.A), metaValue(m.B))
	}
	verdict := "differ"
	switch {
	case !r.Equal():
	case r.Count(diff.Close) > 0:
		verdict = "match within tolerance"
	case r.Count(diff.Equal) > 0:
		verdict = "are equal"
	default:
		verdict = "are identical"
	}
	counts := []string{plural(r.Count(diff.Identical), "tensor") + " identical"}
	for _, c := range []struct {
		v    diff.Verdict
		text string
	}{{diff.Equal, "equal"}, {diff.Close, "within tolerance"}, {diff.Different, "different"}, {diff.Incomparable, "not comparable"}, {diff.Error, "unreadable"}} {
		if n := r.Count(c.v); n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, c.text))
		}
	}
	differ := "differ"
	if len(r.Metadata) == 1 {
		differ = "differs"
	}
	counts = append(counts, fmt.Sprintf("%d only in A, %d only in B, %s %s", len(r.OnlyA), len(r.OnlyB), plural(len(r.Metadata), "metadata key"), differ))
	_, err := fmt.Fprintf(w, "%s and %s %s: %s\n", a, b, verdict, strings.Join(counts, ", "))
	return err
}

// tensorLine says what the comparison of a tensor in both models found,
// for one that is not identical.
func tensorLine(t diff.Tensor) string {
	dtypes := ""
	if t.DTypeA != t.DTypeB {
		dtypes = fmt.Sprintf(" (dtype %v, %v)", t.DTypeA, t.DTypeB)
	}
	diffs := fmt.Sprintf("max abs diff %s, max rel diff %s", formatFloat(t.MaxAbs), formatFloat(t.MaxRel))
	switch t.Verdict {
	case diff.Equal:
		if dtypes == "" {
			return "equal values, not the same bytes"
		}
		return "equal values" + dtypes
	case diff.Close:
		return fmt.Sprintf("within tolerance%s: %s, %s", dtypes, ofValues(t.Unequal, t.Values, "differ", "differs"), diffs)
	case diff.Different:
		if t.ByBytes {
			return fmt.Sprintf("different: %s in their bits (%v has no real values)", ofValues(t.Differing, t.Values, "differ", "differs"), t.DTypeA)
		}
		if t.Differing == t.Unequal {
			return fmt.Sprintf("different%s: %s, %s", dtypes, ofValues(t.Differing, t.Values, "differ", "differs"), diffs)
		}
		return fmt.Sprintf("different%s: %s beyond tolerance (%d differ), %s", dtypes, ofValues(t.Differing, t.Values, "", ""), t.Unequal, diffs)
	case diff.Incomparable:
		var parts []string
		sameShape := slices.Equal(t.ShapeA, t.ShapeB)
		if !sameShape {
			parts = append(parts, "shape "+shapeString(t.ShapeA)+", "+shapeString(t.ShapeB))
		}
		if t.DTypeA != t.DTypeB {
			parts = append(parts, fmt.Sprintf("dtype %v, %v", t.DTypeA, t.DTypeB))
		}
		if sameShape { // the dtypes differ, and one has no real values
			parts[len(parts)-1] += " (C64, F4 and F6 have no real values)"
		}
		return "not comparable: " + strings.Join(parts, ", ")
	default: // diff.Error
		return "unreadable: " + errorText(errors.New(t.Err))
	}
}

// ofValues returns "n of total values" followed by the verb, plural or
// singular as n asks.
func ofValues(n, total uint64, verbs, verb string) string {
	s := fmt.Sprintf("%d of %s", n, plural(total, "value"))
	if n == 1 {
		verbs = verb
	}
	if verbs != "" {
		s += " " + verbs
	}
	return s
}

// formatFloat formats a difference with 6 significant digits, +Inf for an
// infinite one.
func formatFloat(x float64) string {
	return strconv.FormatFloat(x, 'g', 6, 64)
}

func metaValue(s *string) string {
	if s == nil {
		return "absent"
	}
	return strconv.Quote(*s)
}
