package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", stdout, stderr, `Validate checks each MODEL as the reference implementation (the Hugging Face Rust
crate) checks a file, and prints its verdict: ok, "invalid" and the error that
rejects it, or "error" and why it could not be read (not found, no model in a
folder, a network error). A sharded checkpoint's index is checked against every
shard; a model of several parts gets a verdict for the whole and one for each
part. A DATASET is the directory of a safetensors-spark dataset
(dataset_manifest.json), checked against its shards.
With --values it also reads the values of the float tensors, piece by piece,
and reports those holding NaN or Inf (not a tensor named as a bound that holds
only infinities, as clipping bounds initialized to no clipping do, which check
does not report either). The status is the worst of the operands': 1 if one is
invalid or holds such values, 2 if one could not be read.`+modelHelp)
	values := fs.Bool("values", false, "also scan float tensors for NaN and Inf")
	addModelFlags(fs)
	sep := fs.String("separator", "__", "a key-value dataset's separator between key and column in tensor names")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) == 0 {
		return usageError(fs, "want at least one MODEL")
	}
	status = exitOK
	for _, name := range operands {
		if isDataset(name) {
			if !validateDataset(stdout, name, *sep) {
				status = max(status, exitFail)
			}
			continue
		}
		status = max(status, validate(stdout, stderr, name, *values))
	}
	return status
}

// validateDataset prints the verdict on the dataset in dir, which
// dataset.Open gives after checking its manifest against every shard.
func validateDataset(w io.Writer, dir, sep string) bool {
	d, err := openDataset(dir, sep)
	if err != nil {
		fmt.Fprintf(w, "%s: invalid: %s\n", dir, errorText(err))
		return false
	}
	defer d.Close()
	m := d.Manifest()
	fmt.Fprintf(w, "%s: ok, dataset, %v mode, %d samples in %d shards\n", dir, d.Mode(), m.TotalSamples, len(m.Shards))
	return true
}

// validate prints the verdict on the named model, and on each of its parts,
// and with values the tensors that hold NaN or Inf, showing the progress of
// the scan on stderr (a terminal). It returns the exit status for it:
// exitFail when it is invalid or holds such values, exitTrouble when it
// could not be read.
func validate(w, stderr io.Writer, name string, values bool) int {
	ctx := context.Background()
	m, err := openModel(ctx, name)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && pe.Path == name {
			err = pe.Err // the file's name goes first anyway
		}
		status := statusOf(err)
		verdict := "error" // it could not be found or read
		if status == exitFail {
			verdict = "invalid"
		}
		fmt.Fprintf(w, "%s: %s: %v\n", name, verdict, err)
		return status
	}
	defer m.Close()
	if m.warning != "" {
		fmt.Fprintf(w, "%s: warning: %s\n", name, m.warning)
	}
	sum := m.summary(name) // the tensors, and for a checkpoint only those its index lists
	parts := m.ck.Parts()
	switch {
	case m.file:
		fmt.Fprintf(w, "%s: ok, %d tensors, %d bytes of data\n", name, len(sum.Tensors), sum.DataBytes)
	case parts != nil:
		fmt.Fprintf(w, "%s: ok, %d parts (%s), %d tensors in %d files, %d bytes of data\n", name, len(parts), partNames(parts), len(sum.Tensors), len(sum.Shards), sum.DataBytes)
		for _, p := range parts {
			ps := summarizeCheckpoint(p.Dir(), p)
			fmt.Fprintf(w, "%s: part %s: ok, %d tensors in %s, %d bytes of data\n", name, partLabel(p), len(ps.Tensors), filesString(partPrefix(p), ps.Shards), ps.DataBytes)
		}
	default:
		fmt.Fprintf(w, "%s: ok, %d tensors in %s, %d bytes of data\n", name, len(sum.Tensors), filesString("", sum.Shards), sum.DataBytes)
	}
	if !values {
		return exitOK
	}
	var names []string
	for _, t := range sum.Tensors {
		if t.dtype.HasNaN() {
			names = append(names, t.Name)
		}
	}
	status := exitOK
	meter := newMeter(stderr, name, false)
	defer meter.Done()
	w = meter.Writer(w)
	err = readValues(ctx, m.ck, names, false, meter, func(v tensorValues) error {
		switch {
		case v.err != nil:
			fmt.Fprintf(w, "%s: tensor %s: error: %v\n", name, quoteIfNeeded(v.name), v.err)
			status = max(status, exitTrouble)
		case v.notFinite():
			s := v.stats
			fmt.Fprintf(w, "%s: tensor %s: %d NaN, %d Inf of %d values\n", name, quoteIfNeeded(v.name), s.NaN, s.Inf, s.Count)
			status = max(status, exitFail)
		}
		return nil
	})
	meter.Done()
	if err != nil {
		fmt.Fprintf(w, "%s: error: %v\n", name, err)
		return max(status, statusOf(err))
	}
	return status
}

// filesString names the files of a checkpoint, behind prefix: its one file,
// or the number of its shards.
func filesString(prefix string, files []shardSummary) string {
	if len(files) == 1 {
		return quoteIfNeeded(prefix + files[0].File)
	}
	return fmt.Sprintf("%d shards", len(files))
}
