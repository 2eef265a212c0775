package quant

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/safetensors-go/safetensors/internal/hfindex"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/pyjson"
	"github.com/safetensors-go/safetensors/internal/role"
)

// CompressedTensorsVersion is the version of the compressed-tensors library
// whose layout WriteModel writes, and which it records in config.json's
// quantization_config.
const CompressedTensorsVersion = "0.20.0"

// A Summary tells what WriteModel did.
type Summary struct {
	Files     []string // the safetensors files written, in the destination
	Quantized []string // the weights quantized, sorted
	Kept      []string // the tensors copied as they were, sorted
	Copied    []string // the other files copied
	// Ignore is the modules left unquantized that config.json's ignore
	// list names: the output heads.
	Ignore []string
}

// IsLinearWeight reports whether the tensor named name, of the given shape,
// is the weight of an nn.Linear layer that WriteModel quantizes: a 2-D
// "<module>.weight" that is not an embedding, a norm, an output head (which
// stay as they were) nor one of GPT-2's Conv1D layers (c_attn, c_fc,
// c_proj), which are not nn.Linear modules and which compressed-tensors'
// "Linear" target therefore does not match.
func IsLinearWeight(name string, shape []uint64) bool {
	module, ok := strings.CutSuffix(name, ".weight")
	if !ok || len(shape) != 2 || role.IsHead(module) {
		return false
	}
	last := role.Module(name)
	return !role.IsEmbedding(last) && !role.IsNorm(last) && !role.IsConv1D(last)
}

// WriteModel writes into dst, a directory that must not exist, the model at
// src quantized with CompressWeight(s) as compressed-tensors' int-quantized
// format lays it out: each Linear weight (see IsLinearWeight) becomes an I8
// tensor of the same name beside its scale "<module>.weight_scale", in the
// same file; every other tensor is copied as it was; config.json gains the
// quantization_config that compressed-tensors 0.20.0 writes for the W8A8
// scheme (int8 weights, dynamic per-token int8 activations), and is
// rewritten as that library rewrites it (sorted keys, two-space indent);
// a sharded checkpoint's index lists the scales; the other regular files at
// the top of the directory (tokenizer, generation config, ...) are copied,
// through symbolic links, while subdirectories and special files are not.
//
// src is any input of the checkpoint package's Open but a model of several
// parts (an error wrapping ErrUnsupported), opened with the options of
// OpenOptions (such as checkpoint.Variant, or checkpoint.RemoteOptions for
// a URL): a model
// directory (model.safetensors, a sharded checkpoint with its index, or
// one other safetensors file, beside config.json; a Hugging Face cache
// snapshot too), a sharded checkpoint's index, a single safetensors file,
// or a URL of one of these; the config.json of its folder is used if there
// is one, and the other files are copied from a directory or an index's
// directory on disk, not beside a single file, nor over HTTP, where a
// folder cannot be listed. Tensors that a shard holds and its index does
// not list are left out, as loaders leave them out. dst appears only when
// complete: the files are written into a temporary directory beside it,
// renamed into place at the end, and removed on failure.
//
// With the Progress option, WriteModel reports the bytes of the tensors
// read as it goes.
//
// When ctx is done before WriteModel is, it stops (between tensors, or
// between blocks of rows of a large weight), removes what it wrote, and
// returns an error wrapping ctx.Err() and context.Cause(ctx).
func WriteModel(ctx context.Context, src, dst string, s Strategy, opts ...Option) (*Summary, error) {
	o := &settings{}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil, fmt.Errorf("quant: %s: %w", dst, os.ErrExist)
	}
	ck, err := checkpoint.Open(ctx, src, o.open...)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	if ck.Parts() != nil {
		return nil, fmt.Errorf("%w: %s is a model of several parts: quantize each part's folder", ErrUnsupported, src)
	}
	// The other files are copied from a folder on disk: one over HTTP
	// cannot be listed.
	copyOthers := false
	if u, err := url.Parse(src); err != nil || u.Scheme != "http" && u.Scheme != "https" { // url.Parse lowers the scheme
		info, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		copyOthers = info.IsDir() || ck.Index() != ""
	}
	sum := &Summary{Files: ck.Files()}
	w := &modelWriter{ctx: ctx, ck: ck, s: s, sum: sum, progress: o.progress}
	err = atomicfile.WriteDir(dst, func(tmp string) error {
		return w.write(tmp, copyOthers)
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// An Option changes how WriteModel works: OpenOptions, Progress.
type Option func(*settings) error

// settings holds the settings of Options.
type settings struct {
	open     []checkpoint.Option
	progress func(done, total uint64)
}

// OpenOptions returns an option that makes WriteModel open the model with
// the given options of the checkpoint package, such as checkpoint.Variant,
// or checkpoint.RemoteOptions for a URL; an option that checkpoint.Open
// does not take makes WriteModel return its error.
func OpenOptions(opts ...checkpoint.Option) Option {
	return func(o *settings) error {
		o.open = append(o.open, opts...)
		return nil
	}
}

// Progress returns an option that makes WriteModel call f as it goes, with
// the bytes of tensor data read so far and in all (those of the tensors
// of the model, each counted when it is written, quantized or as it was),
// from the goroutine that called WriteModel, with done only growing, up to
// the total when every tensor is written, as checkpoint.Progress does for
// checkpoint.Convert. A nil f is not called.
func Progress(f func(done, total uint64)) Option {
	return func(o *settings) error {
		o.progress = f
		return nil
	}
}

// modelWriter writes a quantized model, and records what it did in sum.
type modelWriter struct {
	ctx      context.Context
	ck       *checkpoint.Checkpoint
	s        Strategy
	sum      *Summary
	progress func(done, total uint64)

	done, total uint64 // the bytes read, as Progress reports them
}

// read counts n bytes read, for Progress.
func (w *modelWriter) read(n uint64) {
	if w.progress != nil {
		w.done += n
		w.progress(w.done, w.total)
	}
}

// write writes into tmp the model, quantized as WriteModel says;
// copyOthers says whether the other files of its folder are copied.
func (w *modelWriter) write(tmp string, copyOthers bool) error {
	ctx, ck, s, sum := w.ctx, w.ck, w.s, w.sum
	dir, index := ck.Dir(), ck.Index()
	listed := make([][]safetensors.TensorInfo, len(sum.Files))
	w.done, w.total = 0, 0
	for i, f := range sum.Files {
		var err error
		if listed[i], err = listedTensors(ck, f); err != nil {
			return err
		}
		for _, t := range listed[i] {
			w.total += t.DataOffsets[1] - t.DataOffsets[0]
		}
	}
	weightMap := map[string]string{}
	var total uint64
	heads := map[string]bool{}
	for i, f := range sum.Files {
		n, err := w.quantizeFile(f, listed[i], filepath.Join(tmp, f), weightMap, heads)
		if err != nil {
			return err
		}
		total += n
	}
	sum.Ignore = []string{"lm_head"}
	for h := range heads {
		if h != "lm_head" {
			sum.Ignore = append(sum.Ignore, h)
		}
	}
	slices.Sort(sum.Ignore[1:])
	slices.Sort(sum.Quantized)
	slices.Sort(sum.Kept)
	if index != "" {
		if err := writeIndex(ctx, ck, filepath.Join(tmp, index), weightMap, total); err != nil {
			return err
		}
	}
	if err := writeConfig(ctx, ck, filepath.Join(tmp, "config.json"), s, sum.Ignore); err != nil {
		return err
	}
	if !copyOthers {
		return nil
	}
	skip := map[string]bool{"config.json": true, index: true}
	for _, f := range sum.Files {
		skip[f] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		// Links are followed (the files of a Hugging Face cache
		// snapshot are links into its blobs); directories, FIFOs
		// and other special files are left out.
		if skip[e.Name()] || !isFile(filepath.Join(dir, e.Name())) {
			continue
		}
		if err := atomicfile.CopyFile(filepath.Join(dir, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return err
		}
		sum.Copied = append(sum.Copied, e.Name())
	}
	return nil
}

// isFile reports whether path is a regular file, following links.
func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// listedTensors returns the tensors of the file f of ck that ck reads:
// those its index lists.
func listedTensors(ck *checkpoint.Checkpoint, f string) ([]safetensors.TensorInfo, error) {
	h, err := ck.Header(f)
	if err != nil {
		return nil, err
	}
	var listed []safetensors.TensorInfo
	for _, t := range h.Tensors {
		if file, err := ck.File(t.Name); err == nil && file == f {
			listed = append(listed, t)
		}
	}
	return listed, nil
}

// quantizeFile writes the file f of the checkpoint at out with its Linear
// weights quantized, of its tensors those listed, records what it did in
// the summary and the tensors' file in weightMap, and returns the size of
// the tensors written.
func (w *modelWriter) quantizeFile(f string, listed []safetensors.TensorInfo, out string, weightMap map[string]string, heads map[string]bool) (uint64, error) {
	ctx, ck, s, sum := w.ctx, w.ck, w.s, w.sum
	in := ck.Dir() + "/" + f // for messages
	if !strings.Contains(ck.Dir(), "://") {
		in = filepath.Join(ck.Dir(), filepath.FromSlash(f))
	}
	h, err := ck.Header(f)
	if err != nil {
		return 0, err
	}
	var specs []safetensors.TensorSpec
	var total uint64
	for _, t := range listed {
		if module, ok := strings.CutSuffix(t.Name, ".weight"); ok && role.IsHead(module) && len(t.Shape) == 2 {
			heads[module] = true
		}
		if IsLinearWeight(t.Name, t.Shape) && quantizable(t.DType) {
			specs = append(specs,
				safetensors.TensorSpec{Name: t.Name, DType: safetensors.I8, Shape: t.Shape},
				safetensors.TensorSpec{Name: ScaleName(t.Name), DType: t.DType, Shape: scaleShape(t.Shape, s)})
			continue
		}
		specs = append(specs, safetensors.TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	fw, err := safetensors.CreateFile(out, specs, h.Metadata)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", in, err)
	}
	defer fw.Abort() // after Close, it does nothing
	for _, t := range fw.Header().Tensors {
		total += t.DataOffsets[1] - t.DataOffsets[0]
		weightMap[t.Name] = filepath.Base(out)
	}
	// A goroutine reads and quantizes the weights, a block of rows at a
	// time on every core, while this one writes the block before, so that
	// the computation and the writes overlap; at most blockBuffers blocks
	// are in memory, whatever the weight's size.
	pctx, cancel := context.WithCancel(ctx)
	next := make(chan quantItem)
	free := make(chan []byte, blockBuffers)
	for range blockBuffers {
		free <- nil
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer close(next)
		send := func(p quantItem) bool {
			select {
			case next <- p:
				return p.err == nil
			case <-quit: // this goroutine writes no more
				return false
			}
		}
		fail := func(err error) {
			if stopped := parallel.Stopped(ctx); stopped != nil {
				err = fmt.Errorf("%s not written: %w", out, stopped)
			} else {
				err = fmt.Errorf("%s: %w", in, err)
			}
			send(quantItem{err: err})
		}
		for _, info := range listed {
			if err := parallel.Stopped(ctx); err != nil {
				send(quantItem{err: fmt.Errorf("%s not written: %w", out, err)})
				return
			}
			t, err := ck.TensorContext(pctx, info.Name)
			if err != nil {
				send(quantItem{err: err})
				return
			}
			kept := !IsLinearWeight(t.Name, t.Shape) || !quantizable(t.DType)
			if !send(quantItem{t: t, kept: kept}) {
				return
			}
			if kept {
				continue
			}
			if err := checkWeight(t); err != nil {
				fail(err)
				return
			}
			scales, m, err := weightScales(pctx, t, s)
			if err != nil {
				fail(err)
				return
			}
			rows, cols := int(t.Shape[0]), int(t.Shape[1])
			step := max(1, blockBytes/max(cols, 1))
			for lo := 0; lo < rows; lo += step {
				hi := min(lo+step, rows)
				var buf []byte
				select {
				case buf = <-free:
				case <-quit:
					return
				}
				if cap(buf) < (hi-lo)*cols {
					buf = make([]byte, step*cols)
				}
				buf = buf[:(hi-lo)*cols]
				if err := quantRows(pctx, t, s, m, lo, hi, buf, scales); err != nil {
					fail(err)
					return
				}
				if len(buf) == 0 { // rows of no values: nothing to write
					free <- buf
					continue
				}
				if !send(quantItem{block: buf, read: uint64(len(t.Data) / rows * (hi - lo))}) {
					return
				}
			}
			if !send(quantItem{scale: scaleOfWeight(t, s, scales)}) {
				return
			}
		}
	}()
	defer func() {
		cancel()
		close(quit)
		<-done
	}()
	for p := range next {
		if p.err != nil {
			return 0, p.err
		}
		t := p.t
		if p.kept {
			sum.Kept = append(sum.Kept, t.Name)
			if err := fw.WriteTensorAt(t.Name, bytes.NewReader(t.Data)); err != nil {
				return 0, err
			}
			w.read(uint64(len(t.Data)))
			continue
		}
		// The blocks of the weight's values, then its scale.
		sum.Quantized = append(sum.Quantized, t.Name)
		br := &blockReader{next: next, free: free, read: w.read, left: len(t.Data) / (t.DType.Bits() / 8)}
		err := fw.WriteTensorAt(t.Name, br)
		br.release()
		if br.err != nil {
			return 0, br.err // the quantization's error, or a closed channel's
		}
		if err != nil {
			return 0, err
		}
		p, ok := <-next
		if !ok || p.err != nil {
			return 0, cmp.Or(p.err, errors.New("quant: internal error: no scale"))
		}
		if err := fw.WriteTensorAt(p.scale.Name, bytes.NewReader(p.scale.Data)); err != nil {
			return 0, err
		}
	}
	return total, fw.Close()
}

// blockBytes is the size of the blocks of int8 values of a weight that
// WriteModel quantizes at a time, and blockBuffers how many are in memory
// at once: one being written, one waiting, one being filled.
const (
	blockBytes   = 4 << 20
	blockBuffers = 3
)

// quantItem is what the goroutine that quantizes the tensors of a file
// sends the one that writes them, in the order of the writes: a tensor
// (kept, or a weight whose blocks follow), a block of a weight's int8
// values and the bytes of the weight that it quantizes (read), a weight's
// scale after its last block, or an error that ends the file.
type quantItem struct {
	t, scale safetensors.Tensor
	kept     bool
	block    []byte
	read     uint64
	err      error
}

// blockReader reads the left bytes of a weight's int8 values from the
// blocks that next brings, giving each back to free once read and counting
// the bytes of the weight they quantize with read. It stops at the item
// after the blocks (the scale), which it leaves in its place, or at an
// error, which it keeps. As a sized io.WriterTo, it writes each block to
// the Writer's destination itself, whole: one write a block, no copy.
type blockReader struct {
	next chan quantItem
	free chan []byte
	read func(n uint64)
	left int       // the bytes not yet read
	cur  quantItem // the block being read
	off  int
	err  error
}

// Len returns the bytes of the weight not yet read.
func (r *blockReader) Len() int { return r.left }

// fill makes cur a block with bytes not yet read, taking the next from
// next once the one before is read.
func (r *blockReader) fill() error {
	for r.off == len(r.cur.block) {
		r.release()
		if r.err != nil {
			return r.err
		}
		it, ok := <-r.next
		switch {
		case !ok, it.err == nil && it.block == nil:
			r.err = errors.New("quant: internal error: the weight's blocks ended early")
		case it.err != nil:
			r.err = it.err
		case len(it.block) > r.left:
			r.err = errors.New("quant: internal error: the weight's blocks are longer than the weight")
		}
		if r.err != nil {
			return r.err
		}
		r.cur, r.off = it, 0
	}
	return nil
}

func (r *blockReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.cur.block[r.off:])
	r.off += n
	r.left -= n
	return n, nil
}

// WriteTo writes the bytes not yet read to w, a block at a time.
func (r *blockReader) WriteTo(w io.Writer) (int64, error) {
	var done int64
	for r.left > 0 {
		if err := r.fill(); err != nil {
			return done, err
		}
		n, err := w.Write(r.cur.block[r.off:])
		r.off += n
		r.left -= n
		done += int64(n)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// release gives the block read back to free, and counts it.
func (r *blockReader) release() {
	if r.cur.block != nil {
		r.read(r.cur.read)
		r.free <- r.cur.block
		r.cur, r.off = quantItem{}, 0
	}
}

func scaleShape(shape []uint64, s Strategy) []uint64 {
	if s == PerTensor {
		return []uint64{1}
	}
	return []uint64{shape[0], 1}
}

// QuantizationConfig returns config.json's quantization_config for
// strategy s and the ignore list, as compressed-tensors 0.20.0's
// ModelCompressor.update_config writes it for a QuantizationConfig of one
// group targeting Linear layers with the W8A8 scheme, in the int-quantized
// format, compressed.
func QuantizationConfig(s Strategy, ignore []string) map[string]any {
	args := func(strategy string, dynamic bool) map[string]any {
		return map[string]any{
			"dynamic":    dynamic,
			"group_size": nil,
			"num_bits":   json.Number("8"),
			"strategy":   strategy,
			"symmetric":  true,
			"type":       "int",
		}
	}
	ig := make([]any, len(ignore))
	for i, n := range ignore {
		ig[i] = n
	}
	return map[string]any{
		"config_groups": map[string]any{
			"group_0": map[string]any{
				"format":             nil,
				"input_activations":  args("token", true),
				"output_activations": nil,
				"targets":            []any{"Linear"},
				"weights":            args(s.String(), false),
			},
		},
		"format":                   "int-quantized",
		"global_compression_ratio": nil,
		"ignore":                   ig,
		"kv_cache_scheme":          nil,
		"moe_sparsity_config":      nil,
		"quant_method":             "compressed-tensors",
		"quantization_status":      "compressed",
		"sparsity_config":          map[string]any{},
		"transform_config":         map[string]any{},
		"version":                  CompressedTensorsVersion,
	}
}

// writeConfig writes the config.json of ck's folder, or an empty one if
// there is none, with the quantization_config, as update_config does.
func writeConfig(ctx context.Context, ck *checkpoint.Checkpoint, out string, s Strategy, ignore []string) error {
	cfg := map[string]any{}
	data, err := ck.ReadFile(ctx, "config.json")
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if cfg, err = pyjson.DecodeObject(data); err != nil {
			return fmt.Errorf("quant: %s/config.json: %w", ck.Dir(), err)
		}
	}
	cfg["quantization_config"] = QuantizationConfig(s, ignore)
	text, err := pyjson.Append(nil, cfg, 0)
	if err != nil {
		return err
	}
	return atomicfile.WriteNew(out, text)
}

// writeIndex writes the index of the sharded checkpoint ck with the new
// weight map and total size, keeping the other metadata.
func writeIndex(ctx context.Context, ck *checkpoint.Checkpoint, out string, weightMap map[string]string, total uint64) error {
	data, err := ck.ReadFile(ctx, ck.Index())
	if err != nil {
		return err
	}
	text, err := hfindex.Rewrite(data, total, weightMap)
	if err != nil {
		return fmt.Errorf("quant: %s/%s: %w", ck.Dir(), ck.Index(), err)
	}
	return atomicfile.WriteNew(out, text)
}
