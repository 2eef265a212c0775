package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/safetensors-go/safetensors"
)

func runStats(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("stats", stdout, stderr, `Stats prints, for each named tensor (all of them when none is named), the
number of values, the minimum, maximum, mean and standard deviation of the
finite ones, and the number of NaN and Inf values, computed in one pass over
the file with float64 arithmetic (safetensors.Tensor.Stats). Tensors of types
with no real value (C64, F4, F6) are listed with dashes. FILE may also be a
checkpoint: its index or its directory, whose tensors are listed by name.`+remoteHelp)
	addRemoteFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) == 0 {
		return usageError(fs, "want a FILE")
	}
	path, names := operands[0], operands[1:]
	m, err := openModel(context.Background(), path)
	if err != nil {
		fmt.Fprintf(stderr, "safetensors stats: %s\n", errorNaming(path, err))
		return exitFail
	}
	defer m.Close()
	if len(names) == 0 {
		names = m.names()
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDTYPE\tCOUNT\tMIN\tMAX\tMEAN\tSTD\tNAN\tINF")
	status = exitOK
	for _, name := range names {
		s, dtype, err := m.statsOf(name)
		if errors.Is(err, safetensors.ErrFileChanged) || errors.Is(err, io.ErrUnexpectedEOF) {
			tw.Flush()
			fmt.Fprintf(stderr, "safetensors stats: %s\n", errorNaming(path, err))
			return exitFail
		}
		if err != nil && dtype == 0 {
			// Not read: no such tensor, or the file failed.
			tw.Flush()
			fmt.Fprintf(stderr, "safetensors stats: %s\n", errorNaming(path, err))
			status = exitFail
			continue
		}
		if err != nil {
			fmt.Fprintf(tw, "%s\t%v\t-\t-\t-\t-\t-\t-\t-\n", quoteIfNeeded(name), dtype)
			continue
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", quoteIfNeeded(name), dtype, s.Count,
			number(s.Min), number(s.Max), number(s.Mean), number(s.StdDev), s.NaN, s.Inf)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "safetensors stats: %s\n", errorText(err))
		return exitFail
	}
	return status
}

// number formats a statistic with 6 significant digits, or a dash when
// there is none.
func number(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
