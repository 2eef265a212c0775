package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/remote"
)

// quantSummary is what inspect says of a quantized model
// (checkpoint.Quantization), and its JSON form.
type quantSummary struct {
	Method string `json:"method"`
	// Format is compressed-tensors' format, or "".
	Format string `json:"format"`
	// BlockSize is the rows and columns a scale covers; [] where a weight
	// has one scale.
	BlockSize []uint64 `json:"block_size"`
	// Inferred says that there is no quantization_config: the method
	// comes from the tensors; Ambiguous says what they leave open.
	Inferred         bool                     `json:"inferred"`
	Ambiguous        string                   `json:"ambiguous"`
	BitsPerParameter float64                  `json:"bits_per_parameter"`
	WeightCount      int                      `json:"weight_count"`
	Weights          []quantWeightSummary     `json:"weights"`
	Others           []string                 `json:"others"`
	q                *checkpoint.Quantization // unprinted
}

// quantWeightSummary is a quantized weight: its name and shape once
// dequantized, the bits of a value, and the tensors that store it.
type quantWeightSummary struct {
	Name    string   `json:"name"`
	Shape   []uint64 `json:"shape"`
	Bits    int      `json:"bits"`
	Tensors []string `json:"tensors"`
	Error   string   `json:"error,omitempty"`
}

// summarizeQuantization returns what inspect says of the quantization of
// the model m, named name, or nil for a model that is not quantized: from
// its config.json and its tensors (checkpoint.Quantization), or from its
// tensors alone for a file named by its URL, whose folder is not asked
// for, or where config.json cannot be read, which the warning returned
// says.
func summarizeQuantization(ctx context.Context, name string, m *model) (*quantSummary, string, error) {
	ck := m.ck
	var q *checkpoint.Quantization
	var err error
	var warning string
	if !m.file || !remote.IsURL(name) {
		q, err = ck.Quantization(ctx)
		if err != nil {
			warning = fmt.Sprintf("the quantization inferred from the tensors alone: %s", errorText(err))
		}
	}
	if m.file && remote.IsURL(name) || err != nil {
		var infos []safetensors.TensorInfo
		for _, n := range ck.Names() {
			info, err := ck.Info(n)
			if err != nil {
				return nil, "", err
			}
			info.Name = n
			infos = append(infos, info)
		}
		if q = checkpoint.RecognizeQuantization(nil, infos); q != nil {
			if err := q.ReadShapes(ctx, ck); err != nil {
				return nil, "", err
			}
		}
	}
	if q == nil {
		return nil, warning, nil
	}
	s := &quantSummary{Method: q.Method, Format: q.Format, BlockSize: list(q.BlockSize), Inferred: q.Inferred, Ambiguous: q.Ambiguous,
		BitsPerParameter: math.Round(q.BitsPerParameter()*1000) / 1000, WeightCount: len(q.Weights), Weights: []quantWeightSummary{}, Others: list(q.Others), q: q}
	for _, w := range q.Weights {
		ws := quantWeightSummary{Name: w.Name, Shape: list(w.Shape), Bits: w.Bits, Tensors: list(w.Tensors())}
		if w.Err != nil {
			ws.Error = w.Err.Error()
		}
		s.Weights = append(s.Weights, ws)
	}
	return s, warning, nil
}

// method describes the method in words: "fp8, blocks of 128x128".
func (s *quantSummary) method() string {
	m := s.Method
	if s.Format != "" {
		m += " " + s.Format
	}
	if len(s.BlockSize) == 2 {
		m += fmt.Sprintf(", blocks of %dx%d", s.BlockSize[0], s.BlockSize[1])
	}
	if s.Inferred {
		m += " (inferred from the tensors: no quantization_config)"
	}
	return m
}

// print prints the quantization: the method, and a line a weight.
func (s *quantSummary) print(w io.Writer) {
	switch s.Method {
	case checkpoint.MethodFP8, checkpoint.MethodMXFP4, checkpoint.MethodCompressedTensors:
	default:
		fmt.Fprintf(w, "\nquantization: %s (a method whose tensors inspect does not describe)\n", s.method())
		return
	}
	fmt.Fprintf(w, "\nquantization: %s; %s quantized, %.3g bits per parameter\n", s.method(), plural(s.WeightCount, "weight"), s.BitsPerParameter)
	if s.Ambiguous != "" {
		fmt.Fprintf(w, "  ambiguous: %s\n", s.Ambiguous)
	}
	for _, q := range s.Weights {
		fmt.Fprintf(w, "  %s %s, %d bits: %s", quoteIfNeeded(q.Name), shapeString(q.Shape), q.Bits, strings.Join(q.Tensors, ", "))
		if q.Error != "" {
			fmt.Fprintf(w, " (%s)", q.Error)
		}
		fmt.Fprintln(w)
	}
	if len(s.Others) > 0 {
		fmt.Fprintf(w, "  and the method's %s\n", strings.Join(s.Others, ", "))
	}
}
