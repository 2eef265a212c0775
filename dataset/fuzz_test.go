package dataset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen opens a small valid dataset under any manifest, and looks a
// tensor up through any index file. Nothing may panic; Open's errors must
// wrap ErrInvalidDataset or come from the file system.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	w, err := Create(dir, Batch, testColumns, BatchSize(2), TensorIndex())
	if err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		label, image := sample(i)
		if err := w.WriteSample(label, image); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		f.Fatal(err)
	}
	parts, err := filepath.Glob(filepath.Join(dir, IndexName, "part-*"))
	if err != nil || len(parts) != 1 {
		f.Fatal(parts, err)
	}
	index, err := os.ReadFile(parts[0])
	if err != nil {
		f.Fatal(err)
	}
	// The fuzzed index is a single file, which Open reads too.
	if err := os.RemoveAll(filepath.Join(dir, IndexName)); err != nil {
		f.Fatal(err)
	}
	f.Add(manifest, index)
	f.Add([]byte(`{"format_version":"1.0","total_samples":0,"total_bytes":0,"shards":[],"schema":{"x":{"dtype":"F32","shape":[-1]}}}`), index[:len(index)/2])
	f.Fuzz(func(t *testing.T, manifest, index []byte) {
		if err := os.WriteFile(filepath.Join(dir, ManifestName), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, IndexName), index, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Open(dir)
		if err != nil {
			var pe *os.PathError
			if !errors.Is(err, ErrInvalidDataset) && !errors.As(err, &pe) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		defer d.Close()
		for _, err := range d.Samples(context.Background()) {
			if err != nil {
				break
			}
		}
		// Through the fuzzed index: any answer but a panic, which the
		// Parquet library gives on some malformed files and Tensor must
		// turn into an error.
		d.Tensor("image")
	})
}
