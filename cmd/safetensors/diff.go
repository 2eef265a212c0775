package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/safetensors-go/safetensors/diff"
)

func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("diff", stderr, `Diff compares the MODELs A and B: the tensors only in one, the dtypes and shapes
that differ, and for each tensor in both whether its bytes are identical or else
how many values differ and the largest absolute and relative (|a-b| / max(|a|,
|b|)) differences of the decoded values, read piece by piece; and the metadata
(a model's, so that a sharded checkpoint and a single file of the same tensors
are equal). The tensors of a model of several parts are named behind their
part's folder ("unet/conv_in.weight"). --variant applies to both. The status is
1 when they differ.`, modelInputs, "0 the same; 1 they differ; 2 one could not be read.")
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 2 {
		return usageError(fs, "want A and B, got %d arguments", len(operands))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	r, failed, err := diffModels(ctx, operands[0], operands[1])
	if err != nil {
		return fail(stderr, "diff", failed, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = printDiff(stdout, operands[0], operands[1], r)
	}
	if err != nil {
		return fail(stderr, "diff", "", err)
	}
	if !r.Equal() {
		return exitFail
	}
	return exitOK
}

// diffModels compares the models a and b, opened with openModel; on an
// error, failed names the model it is about, if it is one.
func diffModels(ctx context.Context, a, b string) (_ *diff.Result, failed string, _ error) {
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
	r, err := diff.Compare(ctx, ma.ck, mb.ck, ma.ck.Metadata(), mb.ck.Metadata())
	return r, "", err
}

func printDiff(w io.Writer, a, b string, r *diff.Result) error {
	for _, n := range r.OnlyA {
		fmt.Fprintf(w, "only in %s: %s\n", a, quoteIfNeeded(n))
	}
	for _, n := range r.OnlyB {
		fmt.Fprintf(w, "only in %s: %s\n", b, quoteIfNeeded(n))
	}
	same := 0
	for _, t := range r.Tensors {
		name := quoteIfNeeded(t.Name)
		switch {
		case t.Identical:
			same++
			continue
		case t.Err != "":
			fmt.Fprintf(w, "%s: %s\n", name, errorText(fmt.Errorf("%s", t.Err)))
			continue
		}
		if t.DTypeA != t.DTypeB {
			fmt.Fprintf(w, "%s: dtype %v, %v\n", name, t.DTypeA, t.DTypeB)
		}
		if !t.Compared {
			fmt.Fprintf(w, "%s: shape %s, %s\n", name, shapeString(t.ShapeA), shapeString(t.ShapeB))
			continue
		}
		if t.Differing == 0 {
			fmt.Fprintf(w, "%s: the same values\n", name)
			continue
		}
		fmt.Fprintf(w, "%s: %d values differ, max abs diff %s, max rel diff %s\n", name, t.Differing,
			strconv.FormatFloat(t.MaxAbs, 'g', 6, 64), strconv.FormatFloat(t.MaxRel, 'g', 6, 64))
	}
	for _, m := range r.Metadata {
		fmt.Fprintf(w, "metadata %q: %s, %s\n", m.Key, metaValue(m.A), metaValue(m.B))
	}
	verdict := "differ"
	if r.Equal() {
		verdict = "are identical"
	}
	_, err := fmt.Fprintf(w, "%s and %s %s: %d tensors identical, %d differ, %d and %d only in one, %d metadata keys differ\n",
		a, b, verdict, same, len(r.Tensors)-same, len(r.OnlyA), len(r.OnlyB), len(r.Metadata))
	return err
}

func metaValue(s *string) string {
	if s == nil {
		return "absent"
	}
	return strconv.Quote(*s)
}
