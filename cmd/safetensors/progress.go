package main

import (
	"io"

	"github.com/safetensors-go/safetensors/internal/progress"
)

// newMeter returns the progress meter of a command that reads a model's
// values (convert, check, diff, stats, validate --values, quantize), labelled
// with the model's name: one that draws on stderr when it is a terminal,
// and nil, which draws nothing, when it is not (output redirected or
// captured, as in tests) or when quiet (--json) says so. The command calls
// its Done before it prints its result, and writes what it prints while
// the values are read through its Writer.
func newMeter(stderr io.Writer, label string, quiet bool) *progress.Meter {
	if quiet {
		return nil
	}
	return progress.New(stderr, label)
}
