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
	fs := newFlags("inspect", stdout, stderr, `Inspect lists a file's tensors (name, dtype, shape, size in bytes, offsets in the
data section), its metadata, and totals by dtype. FILE may also be a sharded
checkpoint (its *.safetensors.index.json or its directory), listed shard by
shard; or the directory of a safetensors-spark dataset (dataset_manifest.json),
whose mode, schema and shards are listed.`+remoteHelp)
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	addRemoteFlags(fs)
	sep := fs.String("separator", "__", "a key-value dataset's separator between key and column in tensor names")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 1 {
		return usageError(fs, "want one FILE or URL, got %d", len(operands))
	}
	name := operands[0]
	if isDataset(name) {
		return inspectDataset(name, *sep, *asJSON, stdout, stderr)
	}
	m, err := openModel(context.Background(), name)
	if err != nil {
		fmt.Fprintf(stderr, "safetensors inspect: %s\n", errorText(err))
		return exitFail
	}
	defer m.Close()
	if m.warning != "" {
		fmt.Fprintf(stderr, "safetensors inspect: warning: %s\n", m.warning)
	}
	s := m.summary(name)
	if *asJSON {
		err = s.writeJSON(stdout)
	} else {
		err = s.print(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "safetensors inspect: %s\n", errorText(err))
		return exitFail
	}
	return exitOK
}

// isDataset reports whether name is a directory holding a dataset
// manifest.
func isDataset(name string) bool {
	_, err := os.Stat(filepath.Join(name, dataset.ManifestName))
	return err == nil
}

// inspectDataset prints a dataset's mode, schema and shards.
func inspectDataset(dir, sep string, asJSON bool, stdout, stderr io.Writer) int {
	d, err := openDataset(dir, sep)
	if err != nil {
		fmt.Fprintf(stderr, "safetensors inspect: %s\n", errorText(err))
		return exitFail
	}
	defer d.Close()
	m := d.Manifest()
	_, statErr := os.Stat(filepath.Join(dir, dataset.IndexName))
	hasIndex := statErr == nil
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			Dir      string           `json:"dir"`
			Mode     string           `json:"mode"`
			Index    bool             `json:"index"`
			Manifest dataset.Manifest `json:"manifest"`
		}{dir, d.Mode().String(), hasIndex, m})
	} else {
		fmt.Fprintf(stdout, "%s: dataset, %v mode, %d samples in %d shards, %s\n", dir, d.Mode(), m.TotalSamples, len(m.Shards), bytesString(uint64(m.TotalBytes)))
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
		fmt.Fprintf(stderr, "safetensors inspect: %s\n", errorText(err))
		return exitFail
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

// summary is what inspect prints, and its JSON form.
type summary struct {
	File        string          `json:"file"`
	HeaderBytes uint64          `json:"header_bytes"` // N, after the 8-byte length; all shards' for a checkpoint
	DataBytes   uint64          `json:"data_bytes"`
	Metadata    map[string]any  `json:"metadata"` // strings, for a file or a checkpoint's index
	Shards      []shardSummary  `json:"shards,omitempty"`
	Tensors     []tensorSummary `json:"tensors"`
	Totals      totals          `json:"totals"`
}

type shardSummary struct {
	File      string `json:"file"`
	Tensors   int    `json:"tensors"`
	DataBytes uint64 `json:"data_bytes"`
}

type tensorSummary struct {
	Shard       string    `json:"shard,omitempty"`
	Name        string    `json:"name"`
	DType       string    `json:"dtype"`
	Shape       []uint64  `json:"shape"`
	Parameters  uint64    `json:"parameters"`
	Bytes       uint64    `json:"bytes"`
	DataOffsets [2]uint64 `json:"data_offsets"`

	dtype safetensors.DType // DType, unprinted
}

type count struct {
	Tensors    int    `json:"tensors"`
	Parameters uint64 `json:"parameters"`
	Bytes      uint64 `json:"bytes"`
}

type totals struct {
	count
	ByDType map[string]count `json:"by_dtype"`
}

func summarize(file string, h *safetensors.Header) summary {
	s := summary{
		File:        file,
		HeaderBytes: h.Len,
		DataBytes:   h.DataLen(),
		Tensors:     make([]tensorSummary, 0, len(h.Tensors)),
		Totals:      totals{ByDType: map[string]count{}},
	}
	if h.Metadata != nil {
		s.Metadata = make(map[string]any, len(h.Metadata))
		for k, v := range h.Metadata {
			s.Metadata[k] = v
		}
	}
	for _, t := range h.Tensors {
		s.add("", t)
	}
	return s
}

// summarizeCheckpoint summarizes a checkpoint: its files, and the tensors
// it lists (for a sharded checkpoint, those its index lists), file by
// file, under the names the checkpoint gives them.
func summarizeCheckpoint(file string, ck *checkpoint.Checkpoint) summary {
	s := summary{File: file, Totals: totals{ByDType: map[string]count{}}}
	if md := ck.Metadata(); md != nil {
		s.Metadata = make(map[string]any, len(md))
		for k, v := range md {
			s.Metadata[k] = v
		}
	}
	for _, f := range ck.Files() {
		s.Shards = append(s.Shards, shardSummary{File: f})
	}
	for i := range s.Shards {
		f := s.Shards[i].File
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
		s.HeaderBytes += h.Len
		s.Shards[i].DataBytes = h.DataLen()
		s.DataBytes += h.DataLen()
		for _, t := range h.Tensors {
			t.Name = prefix + t.Name
			if in, err := ck.File(t.Name); err == nil && in == f {
				s.Shards[i].Tensors++
				s.add(f, t)
			}
		}
	}
	return s
}

// add adds tensor t, of the named shard, to s.
func (s *summary) add(shard string, t safetensors.TensorInfo) {
	size := t.DataOffsets[1] - t.DataOffsets[0]
	// The element count from the size, which the header's validation
	// bounds, rather than from the shape, whose product may overflow when a
	// dimension is zero.
	params := size * 8 / uint64(t.DType.Bits())
	s.Tensors = append(s.Tensors, tensorSummary{
		Shard: shard, Name: t.Name, DType: t.DType.String(), Shape: t.Shape,
		Parameters: params, Bytes: size, DataOffsets: t.DataOffsets, dtype: t.DType,
	})
	c := s.Totals.ByDType[t.DType.String()]
	c.Tensors++
	c.Parameters += params
	c.Bytes += size
	s.Totals.ByDType[t.DType.String()] = c
	s.Totals.Tensors++
	s.Totals.Parameters += params
	s.Totals.Bytes += size
}

// writeJSON writes s as json.Encoder with an indent of two spaces would,
// byte for byte, but streamed: a header of millions of tensors or
// dimensions does not make it build the whole output in memory first.
func (s summary) writeJSON(out io.Writer) error {
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
	w.WriteString("{\n  \"file\": ")
	value(s.File, "  ")
	w.WriteString(",\n  \"header_bytes\": ")
	num(s.HeaderBytes)
	w.WriteString(",\n  \"data_bytes\": ")
	num(s.DataBytes)
	w.WriteString(",\n  \"metadata\": ")
	switch {
	case s.Metadata == nil:
		w.WriteString("null")
	case len(s.Metadata) == 0:
		w.WriteString("{}")
	default:
		w.WriteString("{")
		for i, k := range slices.Sorted(maps.Keys(s.Metadata)) {
			if i > 0 {
				w.WriteString(",")
			}
			w.WriteString("\n    ")
			value(k, "    ")
			w.WriteString(": ")
			value(s.Metadata[k], "    ")
		}
		w.WriteString("\n  }")
	}
	if len(s.Shards) > 0 {
		w.WriteString(",\n  \"shards\": ")
		value(s.Shards, "  ")
	}
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
			w.WriteString("\n    {")
			if t.Shard != "" {
				w.WriteString("\n      \"shard\": ")
				value(t.Shard, "")
				w.WriteString(",")
			}
			w.WriteString("\n      \"name\": ")
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
	w.WriteString("\n}\n")
	if err != nil {
		return err
	}
	return w.Flush()
}

func (s summary) print(w io.Writer) error {
	fmt.Fprintf(w, "%s: %d tensors, %d parameters\n", s.File, s.Totals.Tensors, s.Totals.Parameters)
	if s.Shards != nil {
		fmt.Fprintf(w, "%d shards: headers %s, data %s\n", len(s.Shards), bytesString(8*uint64(len(s.Shards))+s.HeaderBytes), bytesString(s.DataBytes))
	} else {
		fmt.Fprintf(w, "header %s, data %s\n", bytesString(8+s.HeaderBytes), bytesString(s.DataBytes))
	}
	if len(s.Metadata) > 0 {
		fmt.Fprintln(w, "\nmetadata:")
		for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
			fmt.Fprintf(w, "  %s: %s\n", quoteIfNeeded(k), quoteIfNeeded(fmt.Sprint(s.Metadata[k])))
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if s.Shards != nil {
		fmt.Fprint(tw, "SHARD\t")
	}
	fmt.Fprintln(tw, "NAME\tDTYPE\tSHAPE\tBYTES\tOFFSETS")
	for _, t := range s.Tensors {
		if s.Shards != nil {
			fmt.Fprintf(tw, "%s\t", quoteIfNeeded(t.Shard))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t[%d, %d)\n", quoteIfNeeded(t.Name), t.DType, shapeString(t.Shape), t.Bytes, t.DataOffsets[0], t.DataOffsets[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "DTYPE\tTENSORS\tPARAMETERS\tBYTES\t")
	for _, d := range slices.Sorted(maps.Keys(s.Totals.ByDType)) {
		c := s.Totals.ByDType[d]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", d, c.Tensors, c.Parameters, c.Bytes)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t\n", s.Totals.Tensors, s.Totals.Parameters, s.Totals.Bytes)
	return tw.Flush()
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
