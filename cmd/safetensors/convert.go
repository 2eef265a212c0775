package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/safetensors-go/safetensors"
)

func runConvert(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("convert", stdout, stderr, `Convert writes OUT as a copy of IN whose float tensors (F64, F32, F16, BF16) have
the dtype given by --dtype; the other tensors (integers, BOOL, the F8 types) and
the metadata are kept as they are. It streams: memory use does not grow with the
file. OUT appears only when it is complete: until then it is written to a
temporary file beside it, named .OUT.tmpXXXX, which a failure, SIGINT or SIGTERM
removes (only SIGKILL or a crash can leave it, to be deleted by hand); after a
signal the exit status is 130 (SIGINT) or 143 (SIGTERM).
F64 values are rounded to float32 (to nearest) before any conversion to 16 bits.
A progress bar goes to stderr when it is a terminal and the file is large.`)
	dtype := fs.String("dtype", "", "the dtype of the float tensors: F16, BF16 or F32 (required)")
	rounding := fs.String("rounding", "nearest", "how to round to F16 or BF16: nearest (to even, as PyTorch does) or truncate")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 2 {
		return usageError(fs, "want IN and OUT, got %d arguments", len(operands))
	}
	to, err := safetensors.ParseDType(strings.ToUpper(*dtype))
	if err != nil || (to != safetensors.F16 && to != safetensors.BF16 && to != safetensors.F32) {
		return usageError(fs, "--dtype must be F16, BF16 or F32, not %q", *dtype)
	}
	var r safetensors.Rounding
	switch *rounding {
	case "nearest":
		r = safetensors.RoundNearestEven
	case "truncate":
		r = safetensors.Truncate
	default:
		return usageError(fs, "--rounding must be nearest or truncate, not %q", *rounding)
	}
	if same, err := sameFile(operands[0], operands[1]); err != nil || same {
		if err == nil {
			err = fmt.Errorf("%s and %s are the same file: write the output elsewhere", operands[0], operands[1])
		}
		fmt.Fprintf(stderr, "safetensors convert: %s\n", errorText(err))
		return exitFail
	}
	c := converter{to: to, rounding: r, progress: newProgress(stderr, operands[0])}
	ctx, stop := catchInterrupts()
	defer stop()
	if err := c.convertFile(ctx, operands[0], operands[1]); err != nil {
		fmt.Fprintf(stderr, "safetensors convert: %s\n", errorText(err))
		if status := interruptStatus(err); status != 0 {
			return status
		}
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %d of %d tensors converted to %v, %s written\n", operands[1], c.converted, c.tensors, to, bytesString(c.written))
	return exitOK
}

// sameFile reports whether out names the file in (through symbolic or hard
// links too); an out that does not exist yet is not in.
func sameFile(in, out string) (bool, error) {
	a, err := os.Stat(in)
	if err != nil {
		return false, err
	}
	b, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

// convertible reports whether convert casts tensors of dtype d.
func convertible(d safetensors.DType) bool {
	switch d {
	case safetensors.F64, safetensors.F32, safetensors.F16, safetensors.BF16:
		return true
	}
	return false
}

// chunkElems is the number of elements converted at a time: 4 MiB of F32.
const chunkElems = 1 << 20

// converter converts files to a dtype, through buffers it keeps.
type converter struct {
	to       safetensors.DType
	rounding safetensors.Rounding
	progress func(done, total uint64) // nil for none

	// What was done: the tensors, those converted, the bytes written.
	tensors, converted int
	written            uint64

	in  []byte    // a chunk of the input's bytes
	f32 []float32 // the chunk decoded
	out []byte    // the chunk encoded
}

// convertFile converts the file at in into a new file at out. When ctx is
// cancelled, it stops, removes the temporary file and returns the cause.
func (c *converter) convertFile(ctx context.Context, in, out string) error {
	f, err := openInput(in)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	// NewReaderAt validates the whole file as Open does but reads only the
	// header: the data is read a chunk at a time below, so that neither the
	// process's memory nor a mapping grows with the file.
	r, err := safetensors.NewReaderAt(f, info.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	defer r.Close()
	h := r.Header()
	specs := make([]safetensors.TensorSpec, len(h.Tensors))
	for i, t := range h.Tensors {
		d := t.DType
		if convertible(d) {
			d = c.to
		}
		specs[i] = safetensors.TensorSpec{Name: t.Name, DType: d, Shape: t.Shape}
	}
	fw, err := safetensors.CreateFile(out, specs, h.Metadata)
	if err != nil {
		return err
	}
	defer fw.Abort() // after a successful Close, it does nothing

	var done uint64
	c.tensors = len(h.Tensors)
	for _, t := range h.Tensors {
		if convertible(t.DType) && t.DType != c.to {
			c.converted++
		}
	}
	// The output lays the tensors out as the reference writer does, which
	// may be in another order than the input's: SpecOrder gives each
	// output tensor's spec, made from the input tensor of the same index.
	for k, t := range fw.Header().Tensors {
		s := h.Tensors[fw.SpecOrder()[k]]
		off := h.DataOffset() + s.DataOffsets[0]
		size := s.DataOffsets[1] - s.DataOffsets[0]
		elemBytes := uint64(s.DType.Bits() / 8)
		step := uint64(chunkElems) * max(elemBytes, 1)
		for pos := uint64(0); pos < size; pos += step {
			if ctx.Err() != nil {
				return fmt.Errorf("%s not written: %w", out, context.Cause(ctx))
			}
			n := min(step, size-pos)
			if uint64(cap(c.in)) < n {
				c.in = make([]byte, n)
			}
			chunk := c.in[:n]
			if _, err := f.ReadAt(chunk, int64(off+pos)); err != nil {
				if err == io.EOF {
					err = fmt.Errorf("the file was truncated while it was read: %w", io.ErrUnexpectedEOF)
				}
				return fmt.Errorf("%s: tensor %q: reading bytes [%d, %d): %w", in, s.Name, off+pos, off+pos+n, err)
			}
			if t.DType != s.DType {
				if chunk, err = c.convert(safetensors.Tensor{Name: s.Name, DType: s.DType, Data: chunk}); err != nil {
					return err
				}
			}
			if _, err := fw.Write(chunk); err != nil {
				return err
			}
			done += n
			if c.progress != nil {
				c.progress(done, h.DataLen())
			}
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s not written: %w", out, context.Cause(ctx))
	}
	if err := fw.Close(); err != nil {
		return err
	}
	c.written = fw.Header().DataOffset() + fw.Header().DataLen()
	return nil
}

// convert converts a chunk of whole elements to c.to, in c.out.
func (c *converter) convert(t safetensors.Tensor) ([]byte, error) {
	vals, err := safetensors.View[float32](t)
	if err != nil { // not F32, or not aligned
		if c.f32, err = t.AppendFloat32s(c.f32[:0]); err != nil {
			return nil, err
		}
		vals = c.f32
	}
	switch c.to {
	case safetensors.F16:
		c.out = safetensors.F32sToF16Bytes(c.out, vals, c.rounding)
		return c.out, nil
	case safetensors.BF16:
		c.out = safetensors.F32sToBF16Bytes(c.out, vals, c.rounding)
		return c.out, nil
	}
	if cap(c.out) < 4*len(vals) {
		c.out = make([]byte, 4*len(vals))
	}
	c.out = c.out[:4*len(vals)]
	for i, v := range vals {
		binary.LittleEndian.PutUint32(c.out[4*i:], math.Float32bits(v))
	}
	return c.out, nil
}

// progressMin is the size of the data from which convert shows progress.
const progressMin = 256 << 20

// newProgress returns a function that draws a progress bar for the
// conversion of the named file on w, or nil if w is not a terminal.
func newProgress(w io.Writer, name string) func(done, total uint64) {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if info, err := f.Stat(); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return (&progressBar{w: w, name: name}).update
}

// progressBar draws the progress of a conversion on one line, at most ten
// times a second, for data of progressMin bytes and more.
type progressBar struct {
	w    io.Writer
	name string
	last time.Time
}

func (p *progressBar) update(done, total uint64) {
	if total < progressMin || (done < total && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := int(done * width / total)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%% %.1f/%.1f GiB", p.name, strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		done*100/total, float64(done)/(1<<30), float64(total)/(1<<30))
	if done == total {
		fmt.Fprintln(p.w)
	}
}
