package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"sync"
	"text/tabwriter"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/progress"
	"github.com/safetensors-go/safetensors/internal/verdict"
)

func runStats(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("stats", stderr, `Stats prints, for each named tensor (all of them when none is named), the
number of values, the minimum, maximum, mean and standard deviation of the
finite ones, and the number of NaN and Inf values, in one pass over the values
with float64 arithmetic (safetensors.Tensor.Stats). Tensors of types with no
real value (C64, F4, F6) are listed with dashes. The tensors of a model of
several parts are named behind their part's folder ("unet/conv_in.weight").
Progress goes to stderr when it is a terminal.`,
		modelInputs+`
A TENSOR is a tensor's name, as inspect lists it.`,
		`0 all values finite; 1 a tensor holds NaN or Inf (but for a tensor named as a
bound that holds only infinities, as clipping bounds initialized to no
clipping do); 2 a tensor is not found or cannot be read.`)
	asJSON := addJSONFlag(fs)
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) == 0 {
		return usageError(fs, "want a MODEL")
	}
	path, names := operands[0], operands[1:]
	ctx, stop := catchInterrupts()
	defer stop()
	m, err := openModel(ctx, path)
	if err != nil {
		return fail(stderr, "stats", path, err)
	}
	defer m.Close()
	if len(names) == 0 {
		names = m.names()
	}
	// Every tensor named is found before anything is printed.
	for _, n := range names {
		if _, err := m.ck.Info(n); err != nil {
			return fail(stderr, "stats", path, err)
		}
	}
	out := statsOutput{Model: path, Tensors: make([]tensorStatsOutput, 0, len(names))}
	meter := newMeter(stderr, path, *asJSON)
	defer meter.Done()
	tw := tabwriter.NewWriter(meter.Writer(stdout), 0, 0, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "NAME\tDTYPE\tCOUNT\tMIN\tMAX\tMEAN\tSTD\tNAN\tINF")
	}
	err = readValues(ctx, m.ck, names, true, meter, func(v tensorValues) error {
		if v.err != nil { // read, not found: all were found above
			return v.err
		}
		if v.notFinite() {
			out.Status = exitFail
		}
		if *asJSON {
			out.Tensors = append(out.Tensors, newTensorStats(v))
			return nil
		}
		if v.none {
			_, err := fmt.Fprintf(tw, "%s\t%v\t-\t-\t-\t-\t-\t-\t-\n", quoteIfNeeded(v.name), v.info.DType)
			return err
		}
		s := v.stats
		_, err := fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", quoteIfNeeded(v.name), v.info.DType, s.Count,
			number(s.Min), number(s.Max), number(s.Mean), number(s.StdDev), s.NaN, s.Inf)
		return err
	})
	meter.Done()
	if err != nil {
		tw.Flush()
		return fail(stderr, "stats", path, err)
	}
	if *asJSON {
		err = writeJSON(stdout, out)
	} else {
		err = tw.Flush()
	}
	if err != nil {
		return fail(stderr, "stats", path, err)
	}
	return out.Status
}

// statsOutput is what stats --json prints.
type statsOutput struct {
	Model   string              `json:"model"`
	Status  int                 `json:"status"`
	Tensors []tensorStatsOutput `json:"tensors"`
}

// tensorStatsOutput is a tensor's statistics in stats --json; the
// statistics of the finite values are null when there is none, or when
// the dtype has no real value (C64, F4, F6), whose counts are null too.
type tensorStatsOutput struct {
	Name       string   `json:"name"`
	DType      string   `json:"dtype"`
	Shape      []uint64 `json:"shape"`
	ValueCount *uint64  `json:"value_count"`
	Min        *float64 `json:"min"`
	Max        *float64 `json:"max"`
	Mean       *float64 `json:"mean"`
	Std        *float64 `json:"std"`
	NaNCount   *uint64  `json:"nan_count"`
	InfCount   *uint64  `json:"inf_count"`
}

func newTensorStats(v tensorValues) tensorStatsOutput {
	o := tensorStatsOutput{Name: v.name, DType: v.info.DType.String(), Shape: list(v.info.Shape)}
	if v.none {
		return o
	}
	s := v.stats
	o.ValueCount, o.NaNCount, o.InfCount = &s.Count, &s.NaN, &s.Inf
	finite := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	o.Min, o.Max, o.Mean, o.Std = finite(s.Min), finite(s.Max), finite(s.Mean), finite(s.StdDev)
	return o
}

// number formats a statistic with 6 significant digits, or a dash when
// there is none.
func number(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// tensorValues is what readValues tells of a tensor's values.
type tensorValues struct {
	name string
	info safetensors.TensorInfo
	// stats are the statistics of the values; none is true for a dtype
	// with no real value (C64, F4, F6), which has none.
	stats safetensors.Stats
	none  bool
	// err says why the tensor was not read: not found, or a read that
	// failed.
	err error
}

// notFinite reports whether the tensor holds NaN or Inf that are not
// intended, as the infinities of a clipping bound at init are.
func (v tensorValues) notFinite() bool {
	s := v.stats
	return v.err == nil && !v.none && s.NaN+s.Inf > 0 && !verdict.IntendedInf(v.name, s.Count, s.NaN, s.Inf)
}

// valuesChunk is how many bytes of a tensor readValues reads at a time,
// into each goroutine's buffer.
const valuesChunk = 4 << 20

// readValues reads the values of the named tensors of src and calls each
// with what they hold, in the order of names, from one goroutine at a
// time: with stats, their statistics (Tensor.Stats); without, their count
// and their NaN and Inf (Tensor.NonFinite, a scan of the bits many times
// as fast), the other statistics left zero. It is the one way the command
// reads values: every tensor in pieces of valuesChunk bytes, through
// TensorElements (read into a buffer each goroutine reuses, or a slice of
// a mapped file), the pieces of all the tensors shared among GOMAXPROCS
// goroutines, so that one huge tensor keeps every core busy as many small
// ones do, and memory holds at most a piece per goroutine of a model of
// any size, on disk or over HTTP; a tensor's pieces are summarized apart
// and merged in order (Stats.Merge). m, which may be nil, shows the bytes
// read. A tensor that is not found or cannot be read is reported to each
// with its error; readValues stops with an error when each returns one,
// when a mapped file is truncated under it, and when ctx is done.
func readValues(ctx context.Context, src safetensors.ElementSource, names []string, stats bool, m *progress.Meter, each func(tensorValues) error) error {
	type piece struct {
		t      int    // index in names
		lo, hi uint64 // elements
	}
	var (
		results = make([]tensorValues, len(names))
		first   = make([]int, len(names)+1) // each tensor's first piece
		left    = make([]int, len(names))   // and how many are not done
		pieces  []piece
		total   uint64
	)
	for i, name := range names {
		v := tensorValues{name: name}
		v.info, v.err = src.Info(name)
		first[i] = len(pieces)
		if v.err == nil {
			empty := safetensors.Tensor{Name: name, DType: v.info.DType, Shape: []uint64{0}}
			if v.stats, v.err = empty.Stats(); v.err != nil {
				v.none, v.err = true, nil // C64, F4, F6: no real value
			} else {
				// The dtype's width is a multiple of 8: the packed dtypes have no real value.
				n, step := v.info.NumElements(), uint64(valuesChunk)*8/uint64(v.info.DType.Bits())
				for lo := uint64(0); lo < n; lo += step {
					pieces = append(pieces, piece{i, lo, min(lo+step, n)})
				}
				total += v.info.DataOffsets[1] - v.info.DataOffsets[0]
			}
		}
		left[i] = len(pieces) - first[i]
		results[i] = v
	}
	first[len(names)] = len(pieces)
	var (
		mu      sync.Mutex
		partial = make([]safetensors.Stats, len(pieces)) // each piece's
		errs    = make([]error, len(pieces))
		next    int // the first result not yet given to each
	)
	// emit gives each the results complete, in order; under mu.
	emit := func() error {
		for ; next < len(names) && left[next] == 0; next++ {
			v := &results[next]
			for k := first[next]; k < first[next+1] && v.err == nil; k++ {
				switch {
				case errs[k] != nil:
					v.err = errs[k]
				case k == first[next]:
					v.stats = partial[k]
				default:
					v.stats.Merge(partial[k])
				}
			}
			if err := each(*v); err != nil {
				return err
			}
			*v = tensorValues{}
		}
		return nil
	}
	if err := emit(); err != nil {
		return err
	}
	var report func(done uint64)
	if m != nil {
		report = func(done uint64) { m.Update(done, total) }
	}
	bufs := make([][]byte, runtime.GOMAXPROCS(0))
	err := parallel.ForProgress(ctx, len(pieces), len(bufs), func(w, k int) (uint64, error) {
		p := pieces[k]
		info := results[p.t].info
		size := (p.hi - p.lo) * uint64(info.DType.Bits()/8)
		if bufs[w] == nil {
			bufs[w] = make([]byte, valuesChunk)
		}
		s, err := pieceValues(ctx, src, info, p.lo, p.hi, stats, bufs[w])
		if errors.Is(err, safetensors.ErrFileChanged) || errors.Is(err, io.ErrUnexpectedEOF) {
			return size, err // the file is not what it was: read no more
		}
		if err := parallel.Stopped(ctx); err != nil {
			return size, err
		}
		mu.Lock()
		defer mu.Unlock()
		partial[k], errs[k] = s, err
		left[p.t]--
		return size, emit()
	}, report)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return emit() // none is left, unless there was no piece at all
}

// pieceValues returns the statistics of the elements [lo, hi) of the
// tensor info of src, read into buf, or with stats false their count and
// NaN and Inf only.
func pieceValues(ctx context.Context, src safetensors.ElementSource, info safetensors.TensorInfo, lo, hi uint64, stats bool, buf []byte) (safetensors.Stats, error) {
	piece, err := src.TensorElements(ctx, info.Name, lo, hi, buf)
	if err != nil {
		return safetensors.Stats{}, err
	}
	if stats {
		return piece.Stats()
	}
	nan, inf, err := piece.NonFinite()
	return safetensors.Stats{Count: hi - lo, NaN: nan, Inf: inf}, err
}
