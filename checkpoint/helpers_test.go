package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/require"
)

// shardedFixture is testdata/sharded: tensors.json, and what the Hugging
// Face libraries make of it (make_index.py): the index's bytes and each
// shard's tensors.
type shardedFixture struct {
	maxSize int64
	tensors []safetensors.Tensor
	index   []byte
	shards  map[string][]string
}

// tensorBytes returns the size of a tensor's data.
func tensorBytes(dtype safetensors.DType, shape []uint64) int {
	n := dtype.Bits()
	for _, d := range shape {
		n *= int(d)
	}
	return n / 8
}

func loadShardedFixture(t *testing.T) shardedFixture {
	t.Helper()
	dir := filepath.Join("..", "testdata", "sharded")
	raw, err := os.ReadFile(filepath.Join(dir, "tensors.json"))
	require.NoError(t, err)
	var spec struct {
		MaxShardSize int64 `json:"max_shard_size"`
		Tensors      []struct {
			Name  string            `json:"name"`
			DType safetensors.DType `json:"dtype"`
			Shape []uint64          `json:"shape"`
		} `json:"tensors"`
	}
	require.NoError(t, json.Unmarshal(raw, &spec))
	fx := shardedFixture{maxSize: spec.MaxShardSize}
	for i, s := range spec.Tensors {
		data := make([]byte, tensorBytes(s.DType, s.Shape))
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		fx.tensors = append(fx.tensors, safetensors.Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: data})
	}
	fx.index, err = os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	raw, err = os.ReadFile(filepath.Join(dir, "shards.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &fx.shards))
	return fx
}

// writeFixture writes the fixture's checkpoint into a new directory, with
// {"format": "pt"} in every shard, as transformers writes it.
func writeFixture(t *testing.T, fx shardedFixture) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, Write(dir, fx.tensors, MaxShardSize(fx.maxSize), FileMetadata(map[string]string{"format": "pt"})))
	return dir
}

// dirNames returns the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// editIndex rewrites the checkpoint's index through edit.
func editIndex(t *testing.T, dir string, edit func(index map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var index map[string]any
	require.NoError(t, d.Decode(&index))
	edit(index)
	raw, err = json.Marshal(index)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
}

func weightMap(index map[string]any) map[string]any { return index["weight_map"].(map[string]any) }

// hubSnapshot moves the files of dir, and of its subdirectories, into a
// model's directory of the Hugging Face cache under cache
// (models--org--tiny), as blobs, and returns the model's directory and its
// snapshot directory, whose files are links to the blobs
// (../../blobs/HASH, ../../../blobs/HASH in a subdirectory), and which
// refs/main names.
func hubSnapshot(t *testing.T, dir, cache string) (repo, snapshot string) {
	t.Helper()
	repo = filepath.Join(cache, "models--org--tiny")
	snapshot = filepath.Join(repo, "snapshots", "0123abcd")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "blobs"), 0o755))
	require.NoError(t, os.MkdirAll(snapshot, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "refs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "refs", "main"), []byte("0123abcd"), 0o644))
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(snapshot, rel), 0o755)
		}
		n++
		blob := fmt.Sprintf("blob%02d", n)
		if err := os.Rename(path, filepath.Join(repo, "blobs", blob)); err != nil {
			return err
		}
		up := strings.Repeat("../", 2+strings.Count(filepath.ToSlash(rel), "/"))
		return os.Symlink(filepath.FromSlash(up+"blobs/"+blob), filepath.Join(snapshot, rel))
	})
	require.NoError(t, err)
	return repo, snapshot
}

// fileServer serves dir over HTTP as the Hugging Face Hub serves a
// repository's files, under /org/model/resolve/main, with range requests.
// It counts the requests by path, and the most in flight. Each request
// waits delay first.
type fileServer struct {
	*httptest.Server
	base string // the repository's base URL

	mu       sync.Mutex
	byPath   map[string]int
	count    atomic.Int64
	inFlight atomic.Int64
	peak     atomic.Int64
}

func serveDir(t testing.TB, dir string) *fileServer {
	return serveDirDelayed(t, dir, 0, nil)
}

// serveDirDelayed is serveDir with a delay before each answer, and
// before, a function that may answer a request itself (returning true).
func serveDirDelayed(t testing.TB, dir string, delay time.Duration, before func(w http.ResponseWriter, r *http.Request) bool) *fileServer {
	s := &fileServer{byPath: map[string]int{}}
	files := http.StripPrefix("/org/model/resolve/main", http.FileServer(http.Dir(dir)))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count.Add(1)
		s.mu.Lock()
		s.byPath[strings.TrimPrefix(r.URL.Path, "/org/model/resolve/main/")]++
		s.mu.Unlock()
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		time.Sleep(delay)
		if before != nil && before(w, r) {
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	s.base = s.URL + "/org/model/resolve/main"
	return s
}

// requests returns how many requests asked for each path, and forgets
// them.
func (s *fileServer) requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byPath
	s.byPath = map[string]int{}
	s.count.Store(0)
	return m
}

// openBoth runs f on the folder dir opened by path and by URL: rel is
// the path of the target inside dir ("" for dir itself).
func openBoth(t *testing.T, dir, rel string, f func(t *testing.T, target string)) {
	t.Run("disk", func(t *testing.T) { f(t, filepath.Join(dir, filepath.FromSlash(rel))) })
	t.Run("http", func(t *testing.T) {
		srv := serveDir(t, dir)
		target := srv.base
		if rel != "" {
			target += "/" + rel
		}
		f(t, target)
	})
}

// tensorsOf returns n U8 tensors named prefix0, prefix1, ... whose bytes
// depend on seed, each of size bytes.
func tensorsOf(prefix string, seed byte, n, size int) []safetensors.Tensor {
	ts := make([]safetensors.Tensor, n)
	for i := range ts {
		data := make([]byte, size)
		for j := range data {
			data[j] = seed + byte(i*13+j*7)
		}
		ts[i] = safetensors.Tensor{Name: fmt.Sprintf("%s%d", prefix, i), DType: safetensors.U8, Shape: []uint64{uint64(size)}, Data: data}
	}
	return ts
}

// readAll returns the bytes of every tensor Names lists, by name.
func readAll(t *testing.T, c *Checkpoint) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range c.Names() {
		tn, err := c.TensorContext(context.Background(), name)
		require.NoError(t, err, name)
		out[name] = bytes.Clone(tn.Data)
	}
	return out
}

// byName returns the tensors' bytes by name, with prefix before each name.
func byName(prefix string, ts []safetensors.Tensor) map[string][]byte {
	out := map[string][]byte{}
	for _, tn := range ts {
		out[prefix+tn.Name] = tn.Data
	}
	return out
}

// writeJSON writes v, or a string as it is, to the file at path, creating
// its directory.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	data, ok := v.(string)
	if !ok {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		data = string(raw)
	}
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}
