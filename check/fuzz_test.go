package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/safetensors-go/safetensors"
)

// FuzzRun checks any config.json against any set of tensor names, dtypes
// and shapes (a line each: name, dtype, dimensions separated by commas),
// the same JSON given as each other library's configuration file too: Run
// never panics, and fails only with ErrInvalidConfig. The seeds are the
// tiny models of testdata/models and a model of each library of the
// libraries corpus.
func FuzzRun(f *testing.F) {
	entries, err := os.ReadDir(models)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		config, err := os.ReadFile(filepath.Join(models, e.Name(), "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		r, err := safetensors.Open(filepath.Join(models, e.Name(), "model.safetensors"))
		if err != nil {
			f.Fatal(err)
		}
		var spec strings.Builder
		for _, t := range r.Header().Tensors {
			dims := make([]string, len(t.Shape))
			for i, d := range t.Shape {
				dims[i] = strconv.FormatUint(d, 10)
			}
			fmt.Fprintf(&spec, "%s %v %s\n", t.Name, t.DType, strings.Join(dims, ","))
		}
		r.Close()
		f.Add(config, spec.String())
	}
	seen := map[string]bool{}
	for _, p := range loadLibraries(f) {
		if seen[p.Library] || len(p.Tensors) > 400 {
			continue
		}
		seen[p.Library] = true
		var config []byte
		for _, data := range p.Files {
			config = data
		}
		var spec strings.Builder
		for _, t := range p.Tensors {
			var dims []string
			for _, d := range t[2].([]any) {
				dims = append(dims, strconv.FormatUint(uint64(d.(float64)), 10))
			}
			fmt.Fprintf(&spec, "%s %s %s\n", t[0], t[1], strings.Join(dims, ","))
		}
		f.Add(config, spec.String())
	}
	f.Fuzz(func(t *testing.T, config []byte, spec string) {
		src, ok := fuzzSource(spec)
		if !ok {
			return
		}
		_, err := Run(t.Context(), src, Config(config), Workers(2))
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Run: %v", err)
		}
		files := map[string][]byte{}
		for _, name := range libraryFiles {
			files[name] = config
		}
		if _, err := run(t.Context(), src, &settings{maxAbs: DefaultMaxAbs, workers: 2, files: files}); err != nil {
			t.Fatalf("run with %v: %v", libraryFiles, err)
		}
	})
}

// fuzzSource builds a Reader over tensors of the names, dtypes and shapes
// that spec lists, holding values that vary with the position (some zero,
// some large, a NaN now and then), at most 1 MiB in all; false where spec
// gives no valid file.
func fuzzSource(spec string) (*safetensors.Reader, bool) {
	var tensors []safetensors.Tensor
	total := 0
	for line := range strings.Lines(spec) {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			continue
		}
		var d safetensors.DType
		if err := d.UnmarshalText([]byte(fields[1])); err != nil {
			return nil, false
		}
		var shape []uint64
		elements := uint64(1)
		for _, s := range strings.Split(fields[2], ",") {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || n > 1<<20 {
				return nil, false
			}
			shape = append(shape, n)
			if elements *= n; elements > 1<<18 {
				return nil, false
			}
		}
		size := int(elements) * d.Bits() / 8
		if total += size; int(elements)*d.Bits()%8 != 0 || total > 1<<20 {
			return nil, false
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + len(tensors))
		}
		if len(tensors)%5 == 4 && d == safetensors.F32 && size >= 4 {
			copy(data, []byte{0, 0, 0xc0, 0x7f}) // a NaN
		}
		if len(tensors)%7 == 3 {
			clear(data)
		}
		tensors = append(tensors, safetensors.Tensor{Name: fields[0], DType: d, Shape: shape, Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, nil); err != nil {
		return nil, false
	}
	r, err := safetensors.NewReader(buf.Bytes())
	if err != nil {
		return nil, false
	}
	return r, true
}
