package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/dataset"
)

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", stderr, `Inspect lists a model's tensors (name, dtype, shape, size in bytes, offsets in
the data section of their file), its metadata, and totals by dtype. A sharded
checkpoint is listed shard by shard, with its index's own metadata (such as
total_size) under "index metadata"; a model of several parts part by part, its
tensors named behind their part's folder ("unet/conv_in.weight"), the totals
of all parts last.

With --digests it reads every tensor once and prints its digest instead:
SHA-256 over the tensor's name, dtype, shape and bytes, the same wherever the
tensor is stored (one file or shards, any order, offsets or metadata; the
definition is in docs/format.md). The output, a line a tensor ("DIGEST  NAME",
sorted by name) or with --json a document, is a manifest: saved, the verify
package checks a model against it (verify.ReadManifest, Manifest.Check),
naming each tensor that changed, is missing or is extra; the text of two
models compares line by line. It shows progress on stderr when that is a
terminal.`, modelInputs+`
A DATASET is the directory of a safetensors-spark dataset
(dataset_manifest.json), whose mode, columns and shards are listed.`,
		`0 listed; 1 the input is not a valid model or dataset; 2 it could not be read.`)
	asJSON := addJSONFlag(fs)
	digests := fs.Bool("digests", false, "print each tensor's digest, a manifest of the model")
	addModelFlags(fs)
	sep := fs.String("separator", "__", "a key-value dataset's separator between key and column in tensor names")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 1 {
		return usageError(fs, "want one MODEL, got %d", len(operands))
	}
	name := operands[0]
	if isDataset(name) {
		if *digests {
			return usageError(fs, "--digests lists a model's tensors, and %s is a dataset", name)
		}
		return inspectDataset(name, *sep, *asJSON, stdout, stderr)
	}
	ctx := context.Background()
	if *digests {
		var stop func()
		ctx, stop = catchInterrupts() // ctx stops the reads
		defer stop()
	}
	m, err := openModel(ctx, name)
	if err != nil {
		return fail(stderr, "inspect", name, err)
	}
	defer m.Close()
	warnings := []string{}
	if m.warning != "" {
		warnings = append(warnings, m.warning)
		if !*asJSON {
			fmt.Fprintf(stderr, "safetensors inspect: warning: %s\n", m.warning)
		}
	}
	if *digests {
		return inspectDigests(ctx, name, m, warnings, *asJSON, stdout, stderr)
	}
	if m.ck.Parts() != nil {
		ps := summarizeParts(name, m.ck)
		ps.Warnings = warnings
		if *asJSON {
			err = writeJSON(stdout, ps)
		} else {
			err = ps.print(stdout)
		}
	} else {
		s := m.summary(name)
		s.Warnings = warnings
		var qwarn string
		if s.Quantization, qwarn, err = summarizeQuantization(context.Background(), name, m); err != nil {
			return fail(stderr, "inspect", name, err)
		}
		if qwarn != "" {
			s.Warnings = append(s.Warnings, qwarn)
			if !*asJSON {
				fmt.Fprintf(stderr, "safetensors inspect: warning: %s\n", qwarn)
			}
		}
		if *asJSON {
			err = s.streamJSON(stdout)
		} else {
			err = s.print(stdout)
		}
	}
	if err != nil {
		return fail(stderr, "inspect", name, err)
	}
	return exitOK
}

// isDataset reports whether name is a directory holding a dataset
// manifest.
func isDataset(name string) bool {
	_, err := os.Stat(filepath.Join(name, dataset.ManifestName))
	return err == nil
}

// datasetSummary is what inspect --json prints of a dataset.
type datasetSummary struct {
	Dataset     string          `json:"dataset"` // the directory, as given
	Mode        string          `json:"mode"`
	Index       bool            `json:"index"` // whether it has a tensor index
	SampleCount int64           `json:"sample_count"`
	Bytes       int64           `json:"bytes"` // the shards' sizes, added up
	Columns     []columnSummary `json:"columns"`
	Files       []datasetFile   `json:"files"`
}

type columnSummary struct {
	Name  string   `json:"name"`
	DType string   `json:"dtype"`
	Shape []uint64 `json:"shape"`
}

type datasetFile struct {
	File        string `json:"file"` // relative to the dataset's directory
	SampleCount int64  `json:"sample_count"`
	Bytes       int64  `json:"bytes"`
}

// inspectDataset prints a dataset's mode, columns and shards.
func inspectDataset(dir, sep string, asJSON bool, stdout, stderr io.Writer) int {
	d, err := openDataset(dir, sep)
	if err != nil {
		fmt.Fprintf(stderr, "safetensors inspect: %s\n", errorNaming(dir, err))
		return exitFail // the dataset is invalid
	}
	defer d.Close()
	m := d.Manifest()
	_, statErr := os.Stat(filepath.Join(dir, dataset.IndexName))
	hasIndex := statErr == nil
	if asJSON {
		s := datasetSummary{Dataset: dir, Mode: d.Mode().String(), Index: hasIndex, SampleCount: m.TotalSamples, Bytes: m.TotalBytes,
			Columns: []columnSummary{}, Files: []datasetFile{}}
		for _, c := range d.Columns() {
			s.Columns = append(s.Columns, columnSummary{c.Name, c.DType.String(), list(c.Shape)})
		}
		for _, f := range m.Shards {
			s.Files = append(s.Files, datasetFile{f.Path, f.Samples, f.Bytes})
		}
		err = writeJSON(stdout, s)
	} else {
		fmt.Fprintf(stdout, "%s: dataset, %v mode, %s in %s, %s\n", dir, d.Mode(), plural(uint64(m.TotalSamples), "sample"), plural(len(m.Shards), "shard"), bytesString(uint64(m.TotalBytes)))
		if hasIndex {
			fmt.Fprintf(stdout, "index: %s\n", dataset.IndexName)
		}
		fmt.Fprintln(stdout)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COLUMN\tDTYPE\tSHAPE")
		for _, c := range d.Columns() {
			fmt.Fprintf(tw, "%s\t%v\t%s\n", quoteIfNeeded(c.Name), c.DType, shapeString(c.Shape))
		}
		tw.Flush()
		fmt.Fprintln(stdout)
		fmt.Fprintln(tw, "SHARD\tSAMPLES\tBYTES")
		for _, s := range m.Shards {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", quoteIfNeeded(s.Path), s.Samples, s.Bytes)
		}
		err = tw.Flush()
	}
	if err != nil {
		return fail(stderr, "inspect", dir, err)
	}
	return exitOK
}

// openDataset opens the dataset in dir whose key-value tensor names use
// sep; its error hints at --separator when the names do not split.
func openDataset(dir, sep string) (*dataset.Dataset, error) {
	d, err := dataset.Open(dir, dataset.Separator(sep))
	if err != nil && (strings.Contains(err.Error(), "has no separator") || strings.Contains(err.Error(), "neither a column nor key")) {
		err = fmt.Errorf("%w (if its tensor names join key and column with another separator than %q, give it with --separator)", err, sep)
	}
	return d, err
}

// summary is what inspect prints of a model of one part, or of a part of
// a model, and its JSON form.
type summary struct {
	// Model is what was inspected, as named on the command line; for a
	// part of a model, the part's folder.
	Model string `json:"model"`
	// Part is the part's name, its folder in the model's, for a part of a
	// model of several parts ("" for the part in the model's own folder);
	// nil otherwise.
	Part *string `json:"part,omitempty"`
	// HeaderBytes is the size of the files' headers, their 8-byte length
	// included: where the data section starts, added up over the files.
	HeaderBytes uint64 `json:"header_bytes"`
	DataBytes   uint64 `json:"data_bytes"`
	// Metadata is the file's, or the model's (Checkpoint.Metadata), whose
	// values are strings; IndexMetadata is a sharded checkpoint's index's
	// own metadata (Checkpoint.IndexMetadata), such as total_size.
	Metadata      map[string]any `json:"metadata"`
	IndexMetadata map[string]any `json:"index_metadata"`
	// Warnings say that the index leaves out tensors its shards hold, or
	// that parts of the model are in another format, not read.
	Warnings []string        `json:"warnings"`
	Files    []fileSummary   `json:"files"`
	Tensors  []tensorSummary `json:"tensors"`
	Totals   totals          `json:"totals"`
	// Quantization is how the weights are quantized, for a quantized
	// model; nil otherwise.
	Quantization *quantSummary `json:"quantization,omitempty"`

	label  string // the part's name in the output, for a part; unprinted
	single bool   // a model named by its one file, whose tensors are listed without it
}

// partsSummary is what inspect prints of a model of several parts, and its
// JSON form: the model's totals, and each part's summary.
type partsSummary struct {
	Model       string         `json:"model"`
	HeaderBytes uint64         `json:"header_bytes"`
	DataBytes   uint64         `json:"data_bytes"`
	Metadata    map[string]any `json:"metadata"` // the model's (Checkpoint.Metadata)
	Warnings    []string       `json:"warnings"`
	Parts       []summary      `json:"parts"`
	Totals      totals         `json:"totals"`

	files int // the number of files
}

// fileSummary is a file of a model: its name (relative to the model's
// folder, behind its part's), how many of the tensors listed are in it,
// and the size of its data section.
type fileSummary struct {
	File        string `json:"file"`
	TensorCount int    `json:"tensor_count"`
	DataBytes   uint64 `json:"data_bytes"`
}

type tensorSummary struct {
	File        string    `json:"file"`
	Name        string    `json:"name"`
	DType       string    `json:"dtype"`
	Shape       []uint64  `json:"shape"`
	Parameters  uint64    `json:"parameters"`
	Bytes       uint64    `json:"bytes"`
	DataOffsets [2]uint64 `json:"data_offsets"`

	dtype safetensors.DType // DType, unprinted
}

type count struct {
	TensorCount int    `json:"tensor_count"`
	Parameters  uint64 `json:"parameters"`
	Bytes       uint64 `json:"bytes"`
}

type totals struct {
	count
	ByDType map[string]count `json:"by_dtype"`
}

// stringMap returns m as a map of values of any type, empty for nil.
func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// summarize summarizes the one file named file, whose header is h.
func summarize(file string, h *safetensors.Header) summary {
	s := summary{
		Model:         file,
		HeaderBytes:   8 + h.Len,
		DataBytes:     h.DataLen(),
		IndexMetadata: map[string]any{},
		Warnings:      []string{},
		Files:         []fileSummary{{File: file, TensorCount: len(h.Tensors), DataBytes: h.DataLen()}},
		Tensors:       make([]tensorSummary, 0, len(h.Tensors)),
		Totals:        totals{ByDType: map[string]count{}},
		single:        true,
	}
	s.Metadata = stringMap(h.Metadata)
	for _, t := range h.Tensors {
		s.add(file, t)
	}
	return s
}

// summarizeCheckpoint summarizes a checkpoint: its files, and the tensors
// it lists (for a sharded checkpoint, those its index lists), file by
// file, under the names the checkpoint gives them.
func summarizeCheckpoint(name string, ck *checkpoint.Checkpoint) summary {
	s := summary{Model: name, Warnings: []string{}, Files: []fileSummary{}, Tensors: []tensorSummary{}, Totals: totals{ByDType: map[string]count{}}}
	s.Metadata = stringMap(ck.Metadata())
	s.IndexMetadata = stringMap(ck.IndexMetadata())
	for _, f := range ck.Files() {
		s.Files = append(s.Files, fileSummary{File: f})
	}
	for i := range s.Files {
		f := s.Files[i].File
		h, err := ck.Header(f)
		if err != nil {
			continue // cannot happen: the file comes from Files
		}
		prefix := ""
		if ck.Parts() != nil {
			if dir := path.Dir(f); dir != "." {
				prefix = dir + "/"
			}
		}
		s.HeaderBytes += 8 + h.Len
		s.Files[i].DataBytes = h.DataLen()
		s.DataBytes += h.DataLen()
		for _, t := range h.Tensors {
			t.Name = prefix + t.Name
			if in, err := ck.File(t.Name); err == nil && in == f {
				s.Files[i].TensorCount++
				s.add(f, t)
			}
		}
	}
	return s
}

// summarizeParts summarizes the model of several parts ck, named name:
// each part as summarizeCheckpoint does, its files and tensors named as ck
// names them, behind the part's folder.
func summarizeParts(name string, ck *checkpoint.Checkpoint) partsSummary {
	ps := partsSummary{Model: name, Metadata: stringMap(ck.Metadata()), Warnings: []string{}, Parts: []summary{}, Totals: totals{ByDType: map[string]count{}}}
	for _, p := range ck.Parts() {
		s := summarizeCheckpoint(p.Dir(), p)
		part := p.Part()
		s.Part, s.label = &part, partLabel(p)
		prefix := partPrefix(p)
		for i := range s.Files {
			s.Files[i].File = prefix + s.Files[i].File
		}
		for i := range s.Tensors {
			s.Tensors[i].File = prefix + s.Tensors[i].File
			s.Tensors[i].Name = prefix + s.Tensors[i].Name
		}
		ps.HeaderBytes += s.HeaderBytes
		ps.DataBytes += s.DataBytes
		ps.files += len(s.Files)
		ps.Totals.add(s.Totals)
		ps.Parts = append(ps.Parts, s)
	}
	return ps
}

// add adds the totals o to t.
func (t *totals) add(o totals) {
	t.TensorCount += o.TensorCount
	t.Parameters += o.Parameters
	t.Bytes += o.Bytes
	for d, c := range o.ByDType {
		tc := t.ByDType[d]
		tc.TensorCount += c.TensorCount
		tc.Parameters += c.Parameters
		tc.Bytes += c.Bytes
		t.ByDType[d] = tc
	}
}

// add adds tensor t, of the named file, to s.
func (s *summary) add(file string, t safetensors.TensorInfo) {
	size := t.DataOffsets[1] - t.DataOffsets[0]
	params := t.NumElements() // from the size: the shape's product may overflow when a dimension is zero
	s.Tensors = append(s.Tensors, tensorSummary{
		File: file, Name: t.Name, DType: t.DType.String(), Shape: list(t.Shape),
		Parameters: params, Bytes: size, DataOffsets: t.DataOffsets, dtype: t.DType,
	})
	c := s.Totals.ByDType[t.DType.String()]
	c.TensorCount++
	c.Parameters += params
	c.Bytes += size
	s.Totals.ByDType[t.DType.String()] = c
	s.Totals.TensorCount++
	s.Totals.Parameters += params
	s.Totals.Bytes += size
}

// streamJSON writes s as json.Encoder with an indent of two spaces would,
// byte for byte, but streamed: a header of millions of tensors or
// dimensions does not make it build the whole output in memory first.
func (s summary) streamJSON(out io.Writer) error {
	w := bufio.NewWriterSize(out, 64<<10)
	var buf []byte
	var err error
	// value writes v as json.MarshalIndent does, its lines after the first
	// starting with prefix.
	value := func(v any, prefix string) {
		if err != nil {
			return
		}
		b, e := json.MarshalIndent(v, prefix, "  ")
		if e != nil {
			err = e
			return
		}
		w.Write(b)
	}
	num := func(n uint64) {
		buf = strconv.AppendUint(buf[:0], n, 10)
		w.Write(buf)
	}
	// uints writes a []uint64 at the indentation of a tensor's fields.
	uints := func(ns []uint64) {
		switch {
		case ns == nil:
			w.WriteString("null")
			return
		case len(ns) == 0:
			w.WriteString("[]")
			return
		}
		w.WriteString("[")
		for i, n := range ns {
			if i > 0 {
				w.WriteString(",")
			}
			w.WriteString("\n        ")
			num(n)
		}
		w.WriteString("\n      ]")
	}
	// meta writes a map of metadata, whose values are strings.
	meta := func(m map[string]any) {
		switch {
		case m == nil:
			w.WriteString("null")
		case len(m) == 0:
			w.WriteString("{}")
		default:
			w.WriteString("{")
			for i, k := range slices.Sorted(maps.Keys(m)) {
				if i > 0 {
					w.WriteString(",")
				}
				w.WriteString("\n    ")
				value(k, "    ")
				w.WriteString(": ")
				value(m[k], "    ")
			}
			w.WriteString("\n  }")
		}
	}
	w.WriteString("{\n  \"model\": ")
	value(s.Model, "  ")
	if s.Part != nil {
		w.WriteString(",\n  \"part\": ")
		value(*s.Part, "  ")
	}
	w.WriteString(",\n  \"header_bytes\": ")
	num(s.HeaderBytes)
	w.WriteString(",\n  \"data_bytes\": ")
	num(s.DataBytes)
	w.WriteString(",\n  \"metadata\": ")
	meta(s.Metadata)
	w.WriteString(",\n  \"index_metadata\": ")
	meta(s.IndexMetadata)
	w.WriteString(",\n  \"warnings\": ")
	value(s.Warnings, "  ")
	w.WriteString(",\n  \"files\": ")
	value(s.Files, "  ")
	w.WriteString(",\n  \"tensors\": ")
	switch {
	case s.Tensors == nil:
		w.WriteString("null")
	case len(s.Tensors) == 0:
		w.WriteString("[]")
	default:
		w.WriteString("[")
		for i, t := range s.Tensors {
			if i > 0 {
				w.WriteString(",")
			}
			w.WriteString("\n    {\n      \"file\": ")
			value(t.File, "")
			w.WriteString(",\n      \"name\": ")
			value(t.Name, "")
			w.WriteString(",\n      \"dtype\": ")
			value(t.DType, "")
			w.WriteString(",\n      \"shape\": ")
			uints(t.Shape)
			w.WriteString(",\n      \"parameters\": ")
			num(t.Parameters)
			w.WriteString(",\n      \"bytes\": ")
			num(t.Bytes)
			w.WriteString(",\n      \"data_offsets\": ")
			uints(t.DataOffsets[:])
			w.WriteString("\n    }")
		}
		w.WriteString("\n  ]")
	}
	w.WriteString(",\n  \"totals\": ")
	value(s.Totals, "  ")
	if s.Quantization != nil {
		w.WriteString(",\n  \"quantization\": ")
		value(s.Quantization, "  ")
	}
	w.WriteString("\n}\n")
	if err != nil {
		return err
	}
	return w.Flush()
}

func (s summary) print(w io.Writer) error {
	head := s.Model
	if s.label != "" {
		head = "part " + s.label
	}
	fmt.Fprintf(w, "%s: %s, %s\n", head, plural(s.Totals.TensorCount, "tensor"), plural(s.Totals.Parameters, "parameter"))
	if len(s.Files) > 1 {
		fmt.Fprintf(w, "%d shards: headers %s, data %s\n", len(s.Files), bytesString(s.HeaderBytes), bytesString(s.DataBytes))
	} else {
		fmt.Fprintf(w, "header %s, data %s\n", bytesString(s.HeaderBytes), bytesString(s.DataBytes))
	}
	printMetadata(w, "metadata", s.Metadata)
	printMetadata(w, "index metadata", s.IndexMetadata)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	switch {
	case s.single:
	case len(s.Files) > 1:
		fmt.Fprint(tw, "SHARD\t")
	default:
		fmt.Fprint(tw, "FILE\t")
	}
	fmt.Fprintln(tw, "NAME\tDTYPE\tSHAPE\tBYTES\tOFFSETS")
	for _, t := range s.Tensors {
		if !s.single {
			fmt.Fprintf(tw, "%s\t", quoteIfNeeded(t.File))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t[%d, %d)\n", quoteIfNeeded(t.Name), t.DType, shapeString(t.Shape), t.Bytes, t.DataOffsets[0], t.DataOffsets[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := s.Totals.print(w); err != nil {
		return err
	}
	if s.Quantization != nil {
		s.Quantization.print(w)
	}
	return nil
}

// print prints the totals by dtype and in all, as a table.
func (t totals) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "DTYPE\tTENSORS\tPARAMETERS\tBYTES\t")
	for _, d := range slices.Sorted(maps.Keys(t.ByDType)) {
		c := t.ByDType[d]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", d, c.TensorCount, c.Parameters, c.Bytes)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t\n", t.TensorCount, t.Parameters, t.Bytes)
	return tw.Flush()
}

// printMetadata prints metadata m, if it has keys, under a title.
func printMetadata(w io.Writer, title string, m map[string]any) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(w, "  %s: %s\n", quoteIfNeeded(k), quoteIfNeeded(fmt.Sprint(m[k])))
	}
}

// print prints the model's totals, each part's section, and the totals of
// all parts.
func (ps partsSummary) print(w io.Writer) error {
	labels := make([]string, len(ps.Parts))
	for i, p := range ps.Parts {
		labels[i] = p.label
	}
	fmt.Fprintf(w, "%s: %s (%s), %s, %s\n", ps.Model, plural(len(ps.Parts), "part"), strings.Join(labels, ", "), plural(ps.Totals.TensorCount, "tensor"), plural(ps.Totals.Parameters, "parameter"))
	fmt.Fprintf(w, "%s: headers %s, data %s\n", plural(ps.files, "file"), bytesString(ps.HeaderBytes), bytesString(ps.DataBytes))
	printMetadata(w, "metadata", ps.Metadata)
	for _, p := range ps.Parts {
		fmt.Fprintln(w)
		if err := p.print(w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nall parts:")
	return ps.Totals.print(w)
}

// quoteIfNeeded quotes s if it is empty or holds spaces, quotes or
// characters that are not printable, so that a hostile name cannot forge
// lines or columns of the output.
func quoteIfNeeded(s string) string {
	q := fmt.Sprintf("%q", s)
	if s == "" || q[1:len(q)-1] != s || strings.ContainsAny(s, " \t") {
		return q
	}
	return s
}

func shapeString(shape []uint64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// bytesString gives n in bytes, and in KiB, MiB or GiB when it is that
// large.
func bytesString(n uint64) string {
	s := fmt.Sprintf("%d bytes", n)
	for i, unit := range []string{"GiB", "MiB", "KiB"} {
		if div := uint64(1) << (10 * (3 - i)); n >= div {
			return fmt.Sprintf("%s (%.1f %s)", s, float64(n)/float64(div), unit)
		}
	}
	return s
}
