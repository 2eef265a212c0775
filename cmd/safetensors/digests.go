package main

import (
	"context"
	"io"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/verify"
)

// digestsOutput is what inspect --digests --json prints: every tensor of
// the model with its digest, sorted by name; a manifest that
// verify.ReadManifest reads.
type digestsOutput struct {
	Model       string          `json:"model"`
	TensorCount int             `json:"tensor_count"`
	Bytes       uint64          `json:"bytes"`
	Warnings    []string        `json:"warnings"`
	Tensors     []digestsTensor `json:"tensors"`
}

type digestsTensor struct {
	File   string                   `json:"file"`
	Name   string                   `json:"name"`
	DType  string                   `json:"dtype"`
	Shape  []uint64                 `json:"shape"`
	Bytes  uint64                   `json:"bytes"`
	Digest safetensors.TensorDigest `json:"digest"`
}

// inspectDigests prints the digest of every tensor of the model m, named
// name: as a manifest in text, a line a tensor, or as JSON.
func inspectDigests(ctx context.Context, name string, m *model, warnings []string, asJSON bool, stdout, stderr io.Writer) int {
	meter := newMeter(stderr, name, asJSON)
	defer meter.Done()
	var opts []verify.ManifestOption
	if meter != nil {
		opts = append(opts, verify.ManifestProgress(meter.Update))
	}
	man, err := verify.ManifestOf(ctx, m.ck, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "inspect", name, err)
	}
	if asJSON {
		out := digestsOutput{Model: name, TensorCount: len(man.Tensors), Warnings: warnings, Tensors: make([]digestsTensor, 0, len(man.Tensors))}
		for _, t := range man.Tensors {
			out.Bytes += t.Bytes
			out.Tensors = append(out.Tensors, digestsTensor{File: digestFile(name, m, t.Name), Name: t.Name, DType: t.DType, Shape: list(t.Shape), Bytes: t.Bytes, Digest: t.Digest})
		}
		err = writeJSON(stdout, out)
	} else {
		err = man.WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "inspect", name, err)
	}
	return exitOK
}

// digestFile returns the file of the model m that holds the named
// tensor, as inspect names it: the operand for a model named by its one
// file, else relative to the model's folder.
func digestFile(name string, m *model, tensor string) string {
	if m.file {
		return name
	}
	f, err := m.ck.File(tensor)
	if err != nil {
		return ""
	}
	return f
}
