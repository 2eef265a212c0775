package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", stderr, `Validate checks each MODEL as the reference implementation (the Hugging Face Rust
crate) checks a file, and prints its verdict: ok, "invalid" and the error that
rejects it, or "error" and why it could not be read. A sharded checkpoint's
index is checked against every shard; a model of several parts gets a verdict
for the whole and one for each part. With --values it also reads the values of
the float tensors and names those holding NaN or Inf (not a tensor named as a
bound that holds only infinities, as clipping bounds initialized to no
clipping do), showing its progress on stderr when it is a terminal.`, modelInputs+`
A DATASET is the directory of a safetensors-spark dataset
(dataset_manifest.json), checked against its shards.`,
		`the worst of the operands': 0 all valid; 1 one is invalid or holds NaN or
Inf; 2 one could not be read.`)
	asJSON := addJSONFlag(fs)
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
	out := validateOutput{Results: []validateResult{}}
	for _, name := range operands {
		var r validateResult
		if isDataset(name) {
			r = validateDataset(name, *sep)
		} else {
			r = validate(name, *values, stderr, *asJSON)
		}
		out.Status = max(out.Status, r.Status)
		if *asJSON {
			out.Results = append(out.Results, r)
			continue
		}
		if err := r.print(stdout); err != nil {
			return fail(stderr, "validate", "", err)
		}
	}
	if *asJSON {
		if err := writeJSON(stdout, out); err != nil {
			return fail(stderr, "validate", "", err)
		}
	}
	return out.Status
}

// validateOutput is what validate --json prints: a verdict per operand,
// and the exit status, the worst of theirs.
type validateOutput struct {
	Status  int              `json:"status"`
	Results []validateResult `json:"results"`
}

// validateResult is the verdict on one operand, a model or a dataset.
type validateResult struct {
	Model   string `json:"model,omitempty"`
	Dataset string `json:"dataset,omitempty"`
	// Verdict is "ok", "invalid" (the input breaks the format, or holds NaN
	// or Inf) or "error" (it could not be read); Status is the exit status
	// it gives, and Error says why for a verdict other than ok.
	Verdict  string   `json:"verdict"`
	Status   int      `json:"status"`
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings"`
	// What was found valid: for a dataset, its mode and samples too.
	TensorCount int            `json:"tensor_count"`
	FileCount   int            `json:"file_count"`
	DataBytes   uint64         `json:"data_bytes"`
	Files       []string       `json:"files"`
	Mode        string         `json:"mode,omitempty"`
	SampleCount int64          `json:"sample_count,omitempty"`
	Parts       []validatePart `json:"parts"`
	// Flagged lists the tensors that --values found holding NaN or Inf,
	// or could not read.
	Flagged []flaggedTensor `json:"flagged"`

	kind string // "file", "checkpoint", "parts" or "dataset"; unprinted
}

// validatePart is the verdict on a part of a model of several parts.
type validatePart struct {
	Part        string   `json:"part"`
	Verdict     string   `json:"verdict"`
	TensorCount int      `json:"tensor_count"`
	FileCount   int      `json:"file_count"`
	DataBytes   uint64   `json:"data_bytes"`
	Files       []string `json:"files"`
}

// flaggedTensor is a tensor holding NaN or Inf, or one that could not be
// read.
type flaggedTensor struct {
	Name       string `json:"name"`
	ValueCount uint64 `json:"value_count"`
	NaNCount   uint64 `json:"nan_count"`
	InfCount   uint64 `json:"inf_count"`
	Error      string `json:"error,omitempty"`
}

// newResult returns the result for the operand name, a dataset or not.
func newResult(name string, isDataset bool) validateResult {
	r := validateResult{Verdict: "ok", Warnings: []string{}, Files: []string{}, Parts: []validatePart{}, Flagged: []flaggedTensor{}}
	if isDataset {
		r.Dataset, r.kind = name, "dataset"
	} else {
		r.Model = name
	}
	return r
}

// failed sets r's verdict for err, which stopped its validation.
func (r *validateResult) failed(err error) {
	name := r.Model + r.Dataset
	r.Status = statusOf(err)
	r.Verdict = "error" // it could not be found or read
	if r.Status == exitFail {
		r.Verdict = "invalid"
	}
	r.Error = reason(name, err)
	if hint := remoteHint(err); hint != "" {
		r.Error += ": " + hint
	}
}

// validateDataset returns the verdict on the dataset in dir, which
// dataset.Open gives after checking its manifest against every shard.
func validateDataset(dir, sep string) validateResult {
	r := newResult(dir, true)
	d, err := openDataset(dir, sep)
	if err != nil {
		r.failed(err)
		r.Status, r.Verdict = exitFail, "invalid"
		return r
	}
	defer d.Close()
	m := d.Manifest()
	r.Mode, r.SampleCount = d.Mode().String(), m.TotalSamples
	r.FileCount = len(m.Shards)
	for _, s := range m.Shards {
		r.Files = append(r.Files, s.Path)
		r.DataBytes += uint64(s.Bytes)
	}
	return r
}

// validate returns the verdict on the named model, and on each of its
// parts, and with values the tensors that hold NaN or Inf, showing the
// progress of their scan on stderr (a terminal) unless quiet.
func validate(name string, values bool, stderr io.Writer, quiet bool) validateResult {
	r := newResult(name, false)
	ctx := context.Background()
	m, err := openModel(ctx, name)
	if err != nil {
		r.failed(err)
		return r
	}
	defer m.Close()
	if m.warning != "" {
		r.Warnings = append(r.Warnings, m.warning)
	}
	sum := m.summary(name) // the tensors, and for a checkpoint only those its index lists
	r.TensorCount, r.FileCount, r.DataBytes = len(sum.Tensors), len(sum.Files), sum.DataBytes
	for _, f := range sum.Files {
		r.Files = append(r.Files, f.File)
	}
	switch parts := m.ck.Parts(); {
	case m.file:
		r.kind = "file"
	case parts != nil:
		r.kind = "parts"
		for _, p := range parts {
			ps := summarizeCheckpoint(p.Dir(), p)
			vp := validatePart{Part: partLabel(p), Verdict: "ok", TensorCount: len(ps.Tensors), FileCount: len(ps.Files), DataBytes: ps.DataBytes, Files: []string{}}
			for _, f := range ps.Files {
				vp.Files = append(vp.Files, partPrefix(p)+f.File)
			}
			r.Parts = append(r.Parts, vp)
		}
	default:
		r.kind = "checkpoint"
	}
	if !values {
		return r
	}
	var names []string
	for _, t := range sum.Tensors {
		if t.dtype.HasNaN() {
			names = append(names, t.Name)
		}
	}
	meter := newMeter(stderr, name, quiet)
	defer meter.Done()
	err = readValues(ctx, m.ck, names, false, meter, func(v tensorValues) error {
		switch {
		case v.err != nil:
			r.Flagged = append(r.Flagged, flaggedTensor{Name: v.name, Error: reason(name, v.err)})
			r.Status = max(r.Status, exitTrouble)
		case v.notFinite():
			s := v.stats
			r.Flagged = append(r.Flagged, flaggedTensor{Name: v.name, ValueCount: s.Count, NaNCount: s.NaN, InfCount: s.Inf})
			r.Status = max(r.Status, exitFail)
		}
		return nil
	})
	meter.Done()
	if err != nil {
		r.Status = max(r.Status, statusOf(err))
		r.Error = reason(name, err)
	}
	switch r.Status {
	case exitOK:
	case exitFail:
		r.Verdict = "invalid"
	default:
		r.Verdict = "error"
	}
	return r
}

// print prints r as validate's text form: a line for the operand, one for
// each part, one for each warning and each tensor flagged.
func (r validateResult) print(w io.Writer) error {
	name := r.Model + r.Dataset
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "%s: warning: %s\n", name, warning)
	}
	if r.Verdict != "ok" && len(r.Flagged) == 0 {
		_, err := fmt.Fprintf(w, "%s: %s: %s\n", name, r.Verdict, r.Error)
		return err
	}
	data := fmt.Sprintf("%d bytes of data", r.DataBytes)
	switch r.kind {
	case "dataset":
		fmt.Fprintf(w, "%s: ok, dataset, %s mode, %s in %s\n", name, r.Mode, plural(uint64(r.SampleCount), "sample"), plural(r.FileCount, "shard"))
	case "file":
		fmt.Fprintf(w, "%s: ok, %s, %s\n", name, plural(r.TensorCount, "tensor"), data)
	case "parts":
		labels := make([]string, len(r.Parts))
		for i, p := range r.Parts {
			labels[i] = p.Part
		}
		fmt.Fprintf(w, "%s: ok, %s (%s), %s in %s, %s\n", name, plural(len(r.Parts), "part"), strings.Join(labels, ", "), plural(r.TensorCount, "tensor"), plural(r.FileCount, "file"), data)
		for _, p := range r.Parts {
			fmt.Fprintf(w, "%s: part %s: ok, %s in %s, %d bytes of data\n", name, p.Part, plural(p.TensorCount, "tensor"), filesString(p.Files), p.DataBytes)
		}
	default:
		fmt.Fprintf(w, "%s: ok, %s in %s, %s\n", name, plural(r.TensorCount, "tensor"), filesString(r.Files), data)
	}
	for _, f := range r.Flagged {
		if f.Error != "" {
			fmt.Fprintf(w, "%s: tensor %s: error: %s\n", name, quoteIfNeeded(f.Name), f.Error)
			continue
		}
		fmt.Fprintf(w, "%s: tensor %s: %d NaN, %d Inf of %s\n", name, quoteIfNeeded(f.Name), f.NaNCount, f.InfCount, plural(f.ValueCount, "value"))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "%s: error: %s\n", name, r.Error)
	}
	return nil
}

// filesString names the files of a checkpoint: its one file, or the number
// of its shards.
func filesString(files []string) string {
	if len(files) == 1 {
		return quoteIfNeeded(files[0])
	}
	return plural(len(files), "shard")
}
