package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/safetensors-go/safetensors/internal/hfindex"
	"github.com/safetensors-go/safetensors/internal/parallel"
)

// A Conversion tells what Convert wrote.
type Conversion struct {
	// Files are the safetensors files written, as the source's Files names
	// them; for a source named by its one file, the destination's name.
	Files []string
	// Tensors counts the tensors written, and Converted those whose dtype
	// changed; Dequantized counts the weights dequantized (with the
	// Dequantize option), among Tensors and Converted.
	Tensors, Converted, Dequantized int
	// Bytes is the size of the safetensors files written.
	Bytes uint64
	// Copied are the other files copied from the source's folder, such as
	// config.json and the tokenizer's files.
	Copied []string
}

// Convertible reports whether Convert casts tensors of dtype d: the float
// types F64, F32, F16 and BF16. The others (integers, BOOL, the F8, F6 and
// F4 types, C64) are copied as they are.
func Convertible(d safetensors.DType) bool {
	switch d {
	case safetensors.F64, safetensors.F32, safetensors.F16, safetensors.BF16:
		return true
	}
	return false
}

// convertChunk is how many elements are converted at a time: 4 MiB of F32.
const convertChunk = 1 << 20

// Convert writes a copy of the model at src, any input Open takes, whose
// float tensors (see Convertible) have the dtype to, F16, BF16 or F32;
// the other tensors and the metadata are kept as they are. F64 values are
// rounded to float32, to nearest, before any conversion to 16 bits, which
// then rounds as the Rounding option says.
//
// For src that names a safetensors file, dst is the file written, which
// replaces a file already there (but not src itself). For any other src
// (a folder, an index, a model of several parts, a URL), dst is a folder,
// which must not exist: it receives every file of the checkpoint under its
// name (unet/diffusion_pytorch_model.safetensors for a part), each file's
// tensors in the order the reference writer gives them, the indexes with
// their total_size updated and the rest of them as they were, and, for a
// model on disk, the other files of its folder and of its parts' folders
// (config.json, the tokenizer's files, model_index.json, ...), but for
// weights in other formats (.bin, .pt, .pth, .ckpt, .h5, .msgpack, .onnx,
// .gguf) and hidden files. A model read over HTTP, whose folder cannot be
// listed, gets its weights, its indexes, and the files that Open read to
// find it (config.json, model_index.json, modules.json, the parts'
// config.json), so that the libraries find the copy as they found the
// original.
//
// It streams: memory does not grow with the model. The output appears only
// when complete: a file through a temporary file beside it, a folder
// through a temporary folder beside it (named like the file's temporary
// files, see safetensors.TempPattern), renamed into place at the end; on
// any error, or when ctx is done, nothing is left behind and the error
// wraps the cause (context.Cause(ctx)). On Windows, a dst file that a
// process has open without sharing it for deletion, or mapped, cannot be
// replaced: the error wraps safetensors.ErrFileInUse.
//
// The options are Open's, and Rounding and Progress.
func Convert(ctx context.Context, src, dst string, to safetensors.DType, opts ...Option) (*Conversion, error) {
	o, err := newOptions(opConvert, opts)
	if err != nil {
		return nil, err
	}
	switch to {
	case safetensors.F16, safetensors.BF16, safetensors.F32:
	default:
		return nil, fmt.Errorf("%w: Convert to %v: the dtype must be F16, BF16 or F32", safetensors.ErrInvalidOption, to)
	}
	c, isFile, err := open(ctx, src, o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if !isFile {
		if _, err := os.Lstat(dst); err == nil {
			return nil, fmt.Errorf("checkpoint: %s: %w: write the converted model elsewhere", dst, fs.ErrExist)
		}
	} else if local, ok := c.dir.(*localFolder); ok {
		a, errA := os.Stat(local.path(c.files[0].name))
		b, errB := os.Stat(dst)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return nil, fmt.Errorf("checkpoint: %s and %s are the same file: write the output elsewhere", src, dst)
		}
	}
	cv := &converter{ctx: ctx, to: to, rounding: o.rounding, progress: o.progress, ck: c}
	// A file's folder's config.json says how it is quantized, on disk;
	// over HTTP, a file's is not asked for: its tensors say.
	_, local := onDisk(c.dir)
	q, err := c.quantization(ctx, !isFile || local)
	if err != nil {
		return nil, err
	}
	if q != nil {
		if cv.plan, err = planDequantization(c, q, to, o.dequantize); err != nil {
			return nil, err
		}
	}
	for _, f := range c.files {
		cv.total += f.r.Header().DataLen()
	}
	if isFile {
		if err := cv.convertFile(c.files[0], dst); err != nil {
			return nil, err
		}
		cv.out.Files = []string{filepath.Base(dst)}
		return &cv.out, nil
	}
	err = atomicfile.WriteDir(dst, func(tmp string) error { return cv.convertModel(c, tmp) })
	if err != nil {
		return nil, err
	}
	return &cv.out, nil
}

// converter converts a checkpoint's files, through buffers it keeps.
type converter struct {
	ctx      context.Context
	to       safetensors.DType
	rounding safetensors.Rounding
	progress func(done, total uint64)
	ck       *Checkpoint
	plan     *dequantPlan // for a quantized model, dequantized; or nil

	done, total uint64
	out         Conversion
	sizes       map[string]map[string]uint64 // file → listed tensor → size written

	slots []convertSlot // the memory of each slot of the pipeline
}

// convertSlot is the memory of one chunk under way.
type convertSlot struct {
	in   []byte          // the chunk's bytes, for a source read through ReadAt (an MXFP4 chunk's, from any)
	f32  []float32       // the chunk decoded
	buf  []byte          // the chunk encoded
	fp8  *fp8Tables      // an FP8 block's products
	luts *[256 * 64]byte // a table of 16 entries for each of 256 scales, for byte shuffles (nibbleLUTs)

	scaleIn []byte    // a dequantized chunk's scales, for a source read through ReadAt
	scales  []float32 // its scales decoded
	zeroIn  []byte    // its zero points, for a source read through ReadAt
	zeros   []float32 // its zero points decoded
}

// stopped returns the error for a conversion that ctx stopped, or nil.
func (cv *converter) stopped(what string) error {
	if cv.ctx.Err() != nil {
		return fmt.Errorf("checkpoint: %s not written: %w", what, context.Cause(cv.ctx))
	}
	return nil
}

// convertModel writes every file of c, its indexes and the other files of
// its folders, into the folder dir.
func (cv *converter) convertModel(c *Checkpoint, dir string) error {
	cv.sizes = map[string]map[string]uint64{}
	for _, f := range c.files {
		out := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(out), 0o777); err != nil {
			return err
		}
		if err := cv.convertFile(f, out); err != nil {
			return err
		}
		cv.out.Files = append(cv.out.Files, f.name)
	}
	parts := c.parts
	if parts == nil {
		parts = []*Checkpoint{c}
	}
	for _, p := range parts {
		if p.index == "" {
			continue
		}
		prefix := ""
		if p.part != "" {
			prefix = p.part + "/"
		}
		if err := cv.convertIndex(p, prefix, filepath.Join(dir, filepath.FromSlash(prefix+p.index))); err != nil {
			return err
		}
	}
	return cv.copyOthers(c, dir)
}

// convertFile writes the file f converted at out, through a temporary
// file.
func (cv *converter) convertFile(f *file, out string) error {
	h := f.r.Header()
	var specs []safetensors.TensorSpec
	var dropped uint64                // the bytes of the tensors left out
	var srcs []safetensors.TensorInfo // the input tensor of each spec
	for _, t := range h.Tensors {
		d := t.DType
		if Convertible(d) {
			d = cv.to
		}
		spec := safetensors.TensorSpec{Name: t.Name, DType: d, Shape: t.Shape}
		if cv.plan != nil {
			if cv.plan.dropped[t.Name] {
				dropped += t.DataOffsets[1] - t.DataOffsets[0]
				continue
			}
			if w := cv.plan.values[t.Name]; w != nil {
				spec = safetensors.TensorSpec{Name: w.Name, DType: cv.to, Shape: w.Shape}
			}
		}
		specs = append(specs, spec)
		srcs = append(srcs, t)
	}
	fw, err := safetensors.CreateFile(out, specs, h.Metadata)
	if err != nil {
		return err
	}
	defer fw.Abort() // after a successful Close, it does nothing
	sizes := map[string]uint64{}
	// The output lays the tensors out as the reference writer does, which
	// may be in another order than the input's: SpecOrder gives each
	// output tensor's spec, made from the input tensor of the same index.
	var chunks []convertChunkRef
	for k, t := range fw.Header().Tensors {
		s := srcs[fw.SpecOrder()[k]]
		sizes[t.Name] = t.DataOffsets[1] - t.DataOffsets[0]
		cv.out.Tensors++
		if t.DType != s.DType {
			cv.out.Converted++
		}
		if cv.plan != nil && cv.plan.values[s.Name] != nil {
			cv.out.Dequantized++
			chunks = append(chunks, cv.plan.dequantChunks(cv.ck, cv.plan.values[s.Name], s)...)
			continue
		}
		n := s.NumElements()
		step := uint64(convertChunk) // a multiple of 8: whole bytes of the packed dtypes
		for lo := uint64(0); lo < n; lo += step {
			chunks = append(chunks, convertChunkRef{s: s, to: t.DType, lo: lo, hi: min(lo+step, n)})
		}
	}
	if err := cv.copyChunks(f.r, chunks, fw); err != nil {
		return err
	}
	if err := cv.stopped(out); err != nil {
		return err
	}
	if dropped > 0 {
		cv.done += dropped
		if cv.progress != nil {
			cv.progress(cv.done, cv.total)
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	cv.out.Bytes += fw.Header().DataOffset() + fw.Header().DataLen()
	if cv.sizes != nil {
		cv.sizes[f.name] = sizes
	}
	return nil
}

// convertChunkRef is a chunk of a tensor to convert: the elements
// [lo, hi) of the input tensor s, converted to the dtype to.
type convertChunkRef struct {
	s      safetensors.TensorInfo
	to     safetensors.DType
	lo, hi uint64
	dq     *dequantChunk // a chunk of a dequantized weight, or nil
}

// copyChunks writes the chunks of tensors of r to w, in order, each
// converted to its dtype: read and converted on every core, a few chunks
// ahead (parallel.Ordered), written by the calling goroutine, which calls
// the progress function after each.
func (cv *converter) copyChunks(r *safetensors.Reader, chunks []convertChunkRef, w io.Writer) error {
	window := 2*runtime.GOMAXPROCS(0) + 2
	if len(cv.slots) < window {
		cv.slots = make([]convertSlot, window)
	}
	next := 0 // the chunk to write
	err := parallel.Ordered(cv.ctx, len(chunks), 0, window, func(slot, i int) (safetensors.Tensor, error) {
		c, m := chunks[i], &cv.slots[slot]
		if err := cv.stopped(c.s.Name); err != nil {
			return safetensors.Tensor{}, err
		}
		if c.dq != nil {
			var data []byte
			err := safetensors.GuardFaults(func() error {
				var err error
				data, chunks[i].lo, err = cv.dequantize(m, c.dq, cv.to)
				return err
			})
			return safetensors.Tensor{Name: c.s.Name, Data: data}, err
		}
		bits := uint64(c.s.DType.Bits())
		if need := (c.hi - c.lo) * bits / 8; uint64(cap(m.in)) < need {
			m.in = make([]byte, need) // for a file read through ReadAt; a mapped one gives slices
		}
		piece, err := r.TensorElements(cv.ctx, c.s.Name, c.lo, c.hi, m.in)
		if err != nil || c.to == c.s.DType {
			return piece, err
		}
		// A mapped file truncated as it is read faults: an error wrapping
		// ErrFileChanged, not SIGBUS.
		err = safetensors.GuardFaults(func() error {
			var err error
			piece.Data, err = m.convert(piece, c.to, cv.rounding)
			return err
		})
		return piece, err
	}, func(i int, piece safetensors.Tensor) error {
		// piece.Data may be the mapped file's own bytes.
		err := safetensors.GuardFaults(func() error {
			_, err := w.Write(piece.Data)
			return err
		})
		if err != nil {
			return err
		}
		c := chunks[i]
		if c.dq != nil {
			cv.done += c.lo // the bytes it read
		} else {
			cv.done += (c.hi - c.lo) * uint64(c.s.DType.Bits()) / 8
		}
		if cv.progress != nil {
			cv.progress(cv.done, cv.total)
		}
		next = i + 1
		return nil
	})
	if err != nil && next < len(chunks) {
		if stopped := cv.stopped(chunks[next].s.Name); stopped != nil {
			return stopped // as it says which tensor was not written
		}
	}
	return err
}

// convert converts a chunk of whole elements to the dtype to, into m.buf.
func (m *convertSlot) convert(t safetensors.Tensor, to safetensors.DType, r safetensors.Rounding) ([]byte, error) {
	vals, err := safetensors.View[float32](t)
	if err != nil { // not F32, or not aligned
		if m.f32, err = t.AppendFloat32s(m.f32[:0]); err != nil {
			return nil, err
		}
		vals = m.f32
	}
	switch to {
	case safetensors.F16:
		m.buf = safetensors.F32sToF16Bytes(m.buf, vals, r)
		return m.buf, nil
	case safetensors.BF16:
		m.buf = safetensors.F32sToBF16Bytes(m.buf, vals, r)
		return m.buf, nil
	}
	if cap(m.buf) < 4*len(vals) {
		m.buf = make([]byte, 4*len(vals))
	}
	m.buf = m.buf[:4*len(vals)]
	for i, v := range vals {
		binary.LittleEndian.PutUint32(m.buf[4*i:], math.Float32bits(v))
	}
	return m.buf, nil
}

// convertIndex writes the index of the part p, whose files are named
// behind prefix in the converted model, at out: the index as it was, with
// total_size the sum of the sizes of the tensors it lists, as written.
func (cv *converter) convertIndex(p *Checkpoint, prefix, out string) error {
	data, err := p.dir.read(cv.ctx, p.index)
	if err != nil {
		return err
	}
	var total uint64
	var weightMap map[string]string // a dequantized model's
	if cv.plan != nil {
		weightMap = map[string]string{}
	}
	for name, l := range p.where {
		if cv.plan != nil {
			if cv.plan.dropped[name] {
				continue
			}
			if w := cv.plan.values[name]; w != nil {
				name = w.Name
			}
			weightMap[name] = p.files[l.file].name
		}
		total += cv.sizes[prefix+p.files[l.file].name][name]
	}
	text, err := hfindex.Rewrite(data, total, weightMap)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", p.dir.path(p.index), err)
	}
	return atomicfile.WriteNew(out, text)
}

// otherWeights are the extensions of weights in other formats than
// safetensors, which Convert does not copy.
var otherWeights = []string{".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf", ".safetensors"}

// copyOthers copies into dir the files of c's folder, and of its parts'
// folders and their subfolders, that are not its weights or indexes, for a
// checkpoint on disk.
func (cv *converter) copyOthers(c *Checkpoint, dir string) error {
	skip := map[string]bool{}
	for _, f := range c.files {
		skip[f.name] = true
	}
	for _, p := range append([]*Checkpoint{c}, c.parts...) {
		if p.index != "" {
			prefix := ""
			if p.part != "" {
				prefix = p.part + "/"
			}
			skip[prefix+p.index] = true
		}
	}
	local, ok := onDisk(c.dir)
	if !ok {
		// Over HTTP, the folder cannot be listed: the files that Open read
		// to find the model (config.json, model_index.json, modules.json,
		// ...) are what makes the copy one that the libraries find.
		m, ok := c.dir.(*memo)
		if !ok {
			return nil
		}
		found := m.found()
		for _, name := range slices.Sorted(maps.Keys(found)) {
			if skip[name] {
				continue
			}
			out := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(out), 0o777); err != nil {
				return err
			}
			data := found[name]
			if cv.plan != nil && name == "config.json" {
				var err error
				if data, err = dequantizedConfig(data); err != nil {
					return fmt.Errorf("checkpoint: %s: %w", c.dir.path(name), err)
				}
			}
			if err := atomicfile.WriteNew(out, data); err != nil {
				return err
			}
			cv.out.Copied = append(cv.out.Copied, name)
		}
		return nil
	}
	root := local.dir
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := cv.stopped(dir); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		if strings.HasPrefix(e.Name(), ".") && p != root {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() || skip[name] || slices.ContainsFunc(otherWeights, func(ext string) bool { return strings.HasSuffix(name, ext) }) {
			return nil
		}
		info, err := os.Stat(p) // links followed: a cache snapshot's files are links
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o777); err != nil {
			return err
		}
		if cv.plan != nil && name == "config.json" {
			data, err := os.ReadFile(p)
			if err == nil {
				data, err = dequantizedConfig(data)
			}
			if err != nil {
				return fmt.Errorf("checkpoint: %s: %w", p, err)
			}
			if err := atomicfile.WriteNew(filepath.Join(dir, rel), data); err != nil {
				return err
			}
		} else if err := atomicfile.CopyFile(p, filepath.Join(dir, rel)); err != nil {
			return err
		}
		cv.out.Copied = append(cv.out.Copied, path.Clean(name))
		return nil
	})
}
