package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/verdict"
)

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", stdout, stderr, `Validate checks each file as the reference implementation (the Hugging Face Rust
crate) does, and prints its verdict: ok, or the error that rejects the file. A
FILE may also be a sharded checkpoint (its *.safetensors.index.json, or its
directory), whose index is checked against every shard.
With --values it also reads the values of the float tensors and reports those
holding NaN or Inf (not a tensor named as a bound that holds only infinities, as
clipping bounds initialized to no clipping do, which check does not report
either). The status is 1 if a file is invalid or holds such values.`+remoteHelp)
	values := fs.Bool("values", false, "also scan float tensors for NaN and Inf")
	addRemoteFlags(fs)
	sep := fs.String("separator", "__", "a key-value dataset's separator between key and column in tensor names")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) == 0 {
		return usageError(fs, "want at least one FILE")
	}
	status = exitOK
	for _, name := range operands {
		if isDataset(name) {
			if !validateDataset(stdout, name, *sep) {
				status = exitFail
			}
			continue
		}
		if !validate(stdout, name, *values) {
			status = exitFail
		}
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

// validate prints the verdict on the named file or checkpoint, and reports
// whether it is valid (and free of NaN and Inf, with values).
func validate(w io.Writer, name string, values bool) bool {
	m, err := openModel(context.Background(), name)
	var sum summary // the tensors, and for a checkpoint only those its index lists
	if err == nil {
		if m.warning != "" {
			fmt.Fprintf(w, "%s: warning: %s\n", name, m.warning)
		}
		sum = m.summary(name)
		if !m.file {
			fmt.Fprintf(w, "%s: ok, %d tensors in %d shards, %d bytes of data\n", name, len(sum.Tensors), len(sum.Shards), sum.DataBytes)
		} else {
			fmt.Fprintf(w, "%s: ok, %d tensors, %d bytes of data\n", name, len(sum.Tensors), sum.DataBytes)
		}
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && pe.Path == name {
			err = pe.Err // the file's name goes first anyway
		}
		verdict := "error" // the file could not be read
		if formatError(err) {
			verdict = "invalid"
		}
		fmt.Fprintf(w, "%s: %s: %v\n", name, verdict, err)
		return false
	}
	defer m.Close()
	if !values {
		return true
	}
	clean := true
	for _, info := range sum.Tensors {
		if !info.dtype.HasNaN() {
			continue
		}
		s, _, err := m.statsOf(info.Name)
		if err == nil && s.NaN+s.Inf > 0 && !verdict.IntendedInf(info.Name, s.Count, s.NaN, s.Inf) {
			fmt.Fprintf(w, "%s: tensor %s: %d NaN, %d Inf of %d values\n", name, quoteIfNeeded(info.Name), s.NaN, s.Inf, s.Count)
			clean = false
		}
		if err != nil {
			fmt.Fprintf(w, "%s: tensor %s: %v\n", name, quoteIfNeeded(info.Name), err)
			clean = false
		}
	}
	return clean
}

// formatError reports whether err says that a file breaks the format, as
// opposed to failing to be read.
func formatError(err error) bool {
	for _, e := range []error{
		safetensors.ErrHeaderTooSmall, safetensors.ErrHeaderTooLarge, safetensors.ErrInvalidHeaderLength,
		safetensors.ErrHeaderNotUTF8, safetensors.ErrInvalidHeader, safetensors.ErrInvalidOffset,
		safetensors.ErrShapeOverflow, safetensors.ErrMisalignedSlice, safetensors.ErrSizeMismatch,
		safetensors.ErrIncompleteBuffer, safetensors.ErrUnknownDType, checkpoint.ErrInvalidIndex,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
