package checkpoint

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A layout is a model folder as a library saved it, recorded by
// testdata/layouts/generate.py: its files, and what the library's own
// loader opened for each variant.
type layout struct {
	Name    string `json:"name"`
	Library string `json:"library"`
	Loader  struct {
		Call      string `json:"call"`
		ModelRoot string `json:"model_root"`
	} `json:"loader"`
	Files    map[string]layoutFile `json:"files"`
	Expected map[string]struct {
		OK      bool                `json:"ok"`
		Error   string              `json:"error"`
		Parts   map[string][]string `json:"parts"`
		Indexes map[string][]string `json:"indexes"`
	} `json:"expected"`
}

type layoutFile struct {
	JSON        *string `json:"json"`
	Safetensors *struct {
		Header string `json:"header"`
		Size   int64  `json:"size"`
	} `json:"safetensors"`
	Link  *string `json:"link"`
	Other *int64  `json:"other"`
}

// readLayouts reads testdata/layouts/layouts.jsonl.gz.
func readLayouts(t *testing.T) []layout {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "layouts", "layouts.jsonl.gz"))
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	d := json.NewDecoder(z)
	var out []layout
	for d.More() {
		var l layout
		require.NoError(t, d.Decode(&l))
		out = append(out, l)
	}
	require.NotEmpty(t, out)
	return out
}

// build lays the folder out in dir, each safetensors file with its header
// as the library wrote it and zeros for data, as rebuild.py does.
func (l *layout) build(t *testing.T, dir string) {
	t.Helper()
	for name, f := range l.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch {
		case f.JSON != nil:
			require.NoError(t, os.WriteFile(p, []byte(*f.JSON), 0o644))
		case f.Safetensors != nil:
			data := make([]byte, 8, 8+len(f.Safetensors.Header))
			binary.LittleEndian.PutUint64(data, uint64(len(f.Safetensors.Header)))
			data = append(data, f.Safetensors.Header...)
			require.NoError(t, os.WriteFile(p, data, 0o644))
			require.NoError(t, os.Truncate(p, f.Safetensors.Size))
		case f.Link != nil:
			require.NoError(t, os.Symlink(*f.Link, p))
		case f.Other != nil:
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			require.NoError(t, os.Truncate(p, *f.Other))
		}
	}
}

// hasLinks reports whether the folder holds symbolic links.
func (l *layout) hasLinks() bool {
	for _, f := range l.Files {
		if f.Link != nil {
			return true
		}
	}
	return false
}

// TestLayouts opens each model folder that the real libraries wrote
// (transformers, diffusers models and pipelines with their variants,
// sentence-transformers, peft, timm, open_clip, the Hugging Face cache),
// rebuilt from testdata/layouts, on disk and over HTTP, with each variant
// the library was asked for, and checks that Open finds exactly the weight
// files and indexes that the library's own loader opened, or fails where
// it failed.
func TestLayouts(t *testing.T) {
	for _, l := range readLayouts(t) {
		t.Run(l.Name, func(t *testing.T) {
			if l.hasLinks() {
				linktest.SkipWithout(t) // the Hugging Face cache lays snapshots out with links
			}
			dir := t.TempDir()
			l.build(t, dir)
			root := l.Loader.ModelRoot // "" but for the cache
			srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
			defer srv.Close()
			targets := map[string]string{
				"disk": filepath.Join(dir, filepath.FromSlash(root)),
				"http": strings.TrimSuffix(srv.URL+"/"+root, "/"),
			}
			if root != "" {
				// The model's cache folder, whose refs/main names the
				// snapshot.
				targets["cache folder"] = filepath.Join(dir, strings.Split(root, "/")[0])
			}
			for _, v := range slices.Sorted(keys(l.Expected)) {
				want := l.Expected[v]
				var opts []Option
				if v != "default" {
					opts = append(opts, Variant(v))
				}
				var files []string
				for _, fs := range want.Parts {
					files = append(files, fs...)
				}
				for _, fs := range want.Indexes {
					files = append(files, fs...)
				}
				for i, f := range files {
					files[i] = strings.TrimPrefix(f, root+"/")
				}
				slices.Sort(files)
				for where, target := range targets {
					c, err := Open(context.Background(), target, opts...)
					if !want.OK {
						assert.Error(t, err, "%s, variant %s: the library fails: %s", where, v, want.Error)
						if err == nil {
							c.Close()
						}
						continue
					}
					if !assert.NoError(t, err, "%s, variant %s", where, v) {
						continue
					}
					want := files
					if where == "http" && l.Library == "peft" {
						// peft's adapters but the default one are found
						// by listing the folder's subfolders, which HTTP
						// cannot.
						want = slices.DeleteFunc(slices.Clone(files), func(f string) bool { return strings.Contains(f, "/") })
					}
					assert.Equal(t, want, openedFiles(c), "%s, variant %s", where, v)
					require.NoError(t, c.Close())
				}
			}
		})
	}
}

// openedFiles returns the weight files and indexes of c, in its folder,
// sorted.
func openedFiles(c *Checkpoint) []string {
	out := c.Files()
	parts := c.Parts()
	if parts == nil {
		parts = []*Checkpoint{c}
	}
	for _, p := range parts {
		if p.Index() != "" {
			out = append(out, path.Join(p.Part(), p.Index()))
		}
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
