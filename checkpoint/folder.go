package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/regular"
	"github.com/safetensors-go/safetensors/remote"
)

// A folder is where a model's files are, on disk or over HTTP: the one
// thing that differs between a local model and a remote one. Everything
// above it, finding a model's files in a folder and checking them, is
// written once. Names are slash-separated and relative to the folder.
type folder interface {
	// path returns what errors and Dir call the named file: a path or a
	// URL; "" names the folder itself.
	path(name string) string
	// open opens the named safetensors file; a file that does not exist,
	// or is a folder, gives an error wrapping fs.ErrNotExist.
	open(ctx context.Context, name string, o *options) (*file, error)
	// read reads the named file whole, of at most MaxFileSize bytes; a file
	// that does not exist, or is a folder, gives an error wrapping
	// fs.ErrNotExist.
	read(ctx context.Context, name string) ([]byte, error)
	// exists reports whether the named file is there, as a regular file.
	exists(ctx context.Context, name string) bool
	// list returns the names of the regular files (and links to them) in
	// the folder, or errNoList where the folder cannot be listed, as over
	// HTTP.
	list() ([]string, error)
	// dirs returns the names of the subfolders of the folder (not hidden
	// ones), or errNoList where the folder cannot be listed.
	dirs() ([]string, error)
	// sub returns the named subfolder.
	sub(name string) folder
	// shards returns the folder in which the shards of the index file
	// named index are opened: the index's own folder, confined so that
	// no shard leads out of it.
	shards(index string) (folder, func(), error)
}

// errNoList is the error of folder.list for a folder that cannot be
// listed.
var errNoList = errors.New("the folder cannot be listed")

// localFolder is a directory on disk.
type localFolder struct {
	dir string
	// root, when not nil, confines the files opened: root holds dir, as
	// prefix, and no file may lead out of it, even through links.
	root   *os.Root
	prefix string
}

func (f *localFolder) path(name string) string {
	if name == "" {
		return f.dir
	}
	return filepath.Join(f.dir, filepath.FromSlash(name))
}

// openRegular opens the named file, refusing anything but a regular file
// without waiting for a FIFO's writer, inside the root if there is one.
func (f *localFolder) openRegular(name string) (*os.File, error) {
	var file *os.File
	var err error
	if f.root != nil {
		file, err = regular.Open(f.root.OpenFile, filepath.Join(f.prefix, filepath.FromSlash(name)))
	} else {
		file, err = regular.Open(regular.OpenFile, f.path(name))
	}
	var nr *regular.NotRegularError
	if errors.As(err, &nr) && nr.Mode.IsDir() {
		// A folder where a file is looked for is no such file, as the
		// libraries' os.path.isfile has it: a folder named
		// model.safetensors does not hide model.safetensors.index.json.
		return nil, &os.PathError{Op: "open", Path: f.path(name), Err: errIsDir}
	}
	if err != nil && f.root != nil {
		// Name the file as the caller knows it, not by its path in the
		// root.
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, &os.PathError{Op: pe.Op, Path: f.path(name), Err: pe.Err}
		}
	}
	return file, err
}

// sizedFile is a file read through ReadAt, of the size it had when it was
// opened: a read that finds it shorter says that it was truncated while
// it was read, naming it.
type sizedFile struct {
	*os.File
	size int64
	path string
}

func (f *sizedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if n < len(p) && (err == nil || err == io.EOF) && off+int64(len(p)) <= f.size {
		err = fmt.Errorf("%s: the file was truncated while it was read: %w", f.path, io.ErrUnexpectedEOF)
	}
	return n, err
}

// errIsDir is the error for a folder where a file is looked for: it
// matches fs.ErrNotExist, since no file of that name exists.
var errIsDir = isDirError{}

type isDirError struct{}

func (isDirError) Error() string { return "a folder, not a file" }

func (isDirError) Is(target error) bool { return target == fs.ErrNotExist }

// maxMapped is the size of the largest file that is mapped: what fits in
// the address space. A larger file (of 2 GiB or more on a 32-bit host) is
// read through the file instead. Tests lower it.
var maxMapped = int64(math.MaxInt)

func (f *localFolder) open(ctx context.Context, name string, o *options) (*file, error) {
	osf, err := f.openRegular(name)
	if err != nil {
		return nil, err
	}
	info, err := osf.Stat()
	if err != nil {
		osf.Close()
		return nil, err
	}
	if info.Size() > maxMapped {
		// It cannot be mapped: read it through the file, which the
		// checkpoint then owns.
		r, err := safetensors.NewReaderAt(&sizedFile{osf, info.Size(), f.path(name)}, info.Size(), o.read...)
		if err != nil {
			osf.Close()
			return nil, &os.PathError{Op: "open", Path: f.path(name), Err: err}
		}
		return &file{name: name, r: r, closer: osf}, nil
	}
	defer osf.Close()
	r, err := safetensors.NewFileReader(osf, o.read...)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && pe.Path == osf.Name() {
			err = &os.PathError{Op: pe.Op, Path: f.path(name), Err: pe.Err}
		}
		return nil, err
	}
	return &file{name: name, r: r}, nil
}

func (f *localFolder) read(ctx context.Context, name string) ([]byte, error) {
	osf, err := f.openRegular(name)
	if err != nil {
		return nil, err
	}
	defer osf.Close()
	data, err := io.ReadAll(io.LimitReader(osf, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("checkpoint: %s: larger than %d bytes", f.path(name), MaxFileSize)
	}
	return data, nil
}

func (f *localFolder) exists(ctx context.Context, name string) bool {
	file, err := f.openRegular(name)
	if err != nil {
		return false
	}
	file.Close()
	return true
}

func (f *localFolder) list() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			// A link counts as what it leads to: the files of a snapshot
			// of the Hugging Face cache are links to its blobs.
			if info, err := os.Stat(filepath.Join(f.dir, e.Name())); err != nil || !info.Mode().IsRegular() {
				continue
			}
		} else if !e.Type().IsRegular() {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

func (f *localFolder) dirs() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (f *localFolder) sub(name string) folder {
	s := &localFolder{dir: f.path(name), root: f.root}
	if f.root != nil {
		s.prefix = filepath.Join(f.prefix, filepath.FromSlash(name))
	}
	return s
}

// shards confines the shards of an index to the index's directory or, in a
// snapshot of the Hugging Face cache, to the model's cache directory,
// whose blobs the snapshot's files link to.
func (f *localFolder) shards(index string) (folder, func(), error) {
	dir := filepath.Dir(f.path(index))
	rootDir, prefix := shardRoot(dir)
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, nil, err
	}
	return &localFolder{dir: dir, root: root, prefix: prefix}, func() { root.Close() }, nil
}

// shardRoot returns the directory that the shards of an index in dir must
// stay inside, and dir's path inside it: dir itself, or, for a snapshot of
// the Hugging Face cache (a directory whose parent is named "snapshots",
// and whose grandparent is the model's cache directory, named
// models--org--name, datasets--... or spaces--...), the model's cache
// directory, whose blobs the snapshot's files link to; or, where the cache
// has a shared store of blobs (cache/blobs/, huggingface_hub 2.4 and
// later), to which the model's blobs link in turn, the cache. A directory
// below a snapshot (a part's folder, such as unet/) is confined likewise.
func shardRoot(dir string) (root, prefix string) {
	dir = filepath.Clean(dir)
	for d, rest := dir, ""; ; {
		parent := filepath.Dir(d)
		if parent == d {
			return dir, ""
		}
		if filepath.Base(parent) == "snapshots" {
			repo := filepath.Dir(parent)
			for _, kind := range []string{"models--", "datasets--", "spaces--"} {
				if repo != parent && strings.HasPrefix(filepath.Base(repo), kind) {
					inRepo := filepath.Join("snapshots", filepath.Base(d), rest)
					// With huggingface_hub's shared store of Xet blobs (2.4
					// and later, by default), the model's blobs are links
					// to the cache's own blobs/, beside the model's folder.
					cache := filepath.Dir(repo)
					if info, err := os.Stat(filepath.Join(cache, "blobs")); err == nil && info.IsDir() && cache != repo {
						return cache, filepath.Join(filepath.Base(repo), inRepo)
					}
					return repo, inRepo
				}
			}
			return dir, ""
		}
		rest = filepath.Join(filepath.Base(d), rest)
		d = parent
	}
}

// remoteFolder is a folder over HTTP: a base URL, under which each file is
// a URL.
type remoteFolder struct {
	base *url.URL // no query, no fragment
	o    *options
	// target is the name of the file that Open was given the URL of, and
	// targetURL that URL, whose query (the signature of a presigned URL)
	// the file needs; the folder's other files get none.
	target, targetURL string
}

func (f *remoteFolder) path(name string) string {
	switch {
	case name == "":
		return f.base.String()
	case name == f.target:
		return f.targetURL
	}
	return f.base.JoinPath(strings.Split(name, "/")...).String()
}

func (f *remoteFolder) open(ctx context.Context, name string, o *options) (*file, error) {
	opts := append(slices.Clip(o.remote), remote.ReadOptions(o.read...))
	r, err := remote.Open(ctx, o.client, f.path(name), opts...)
	if err != nil {
		return nil, err
	}
	return &file{name: name, r: r}, nil
}

func (f *remoteFolder) read(ctx context.Context, name string) ([]byte, error) {
	return remote.ReadFile(ctx, f.o.client, f.path(name), MaxFileSize, f.o.remote...)
}

func (f *remoteFolder) exists(ctx context.Context, name string) bool {
	_, err := remote.OpenFile(ctx, f.o.client, f.path(name), f.o.remote...)
	return err == nil
}

func (f *remoteFolder) list() ([]string, error) { return nil, errNoList }

func (f *remoteFolder) dirs() ([]string, error) { return nil, errNoList }

func (f *remoteFolder) sub(name string) folder {
	return &remoteFolder{base: f.base.JoinPath(strings.Split(name, "/")...), o: f.o}
}

// shards of a remote index are under the index's URL: a URL cannot be
// left by a file name that localName allows.
func (f *remoteFolder) shards(index string) (folder, func(), error) {
	if dir := path.Dir(index); dir != "." {
		return f.sub(dir), func() {}, nil
	}
	return f, func() {}, nil
}

// onDisk returns the directory on disk that f is, if it is one.
func onDisk(f folder) (*localFolder, bool) {
	if m, ok := f.(*memo); ok {
		f = m.folder
	}
	l, ok := f.(*localFolder)
	return l, ok
}

// memo is a folder that keeps the small files it read, what was found
// missing, and its listing, so that a file discovery looked at
// (model_index.json, modules.json, config.json) is read once, and ReadFile
// of it later costs nothing; over HTTP, it reads several at once.
type memo struct {
	folder
	mu     sync.Mutex
	reads  map[string]memoRead
	subs   map[string]*memo
	listed *memoList // the folder's listing, once listed
}

type memoList struct {
	names []string
	err   error
}

// list lists the folder once: finding a model looks at its listing more
// than once (a distributed checkpoint, the one file, other formats).
func (m *memo) list() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listed == nil {
		names, err := m.folder.list()
		m.listed = &memoList{names, err}
	}
	return m.listed.names, m.listed.err
}

type memoRead struct {
	data []byte
	err  error
}

// remember returns dir as a memo, or dir itself if it is one.
func remember(dir folder) *memo {
	if m, ok := dir.(*memo); ok {
		return m
	}
	return &memo{folder: dir, reads: map[string]memoRead{}, subs: map[string]*memo{}}
}

func (m *memo) read(ctx context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	r, ok := m.reads[name]
	m.mu.Unlock()
	if ok {
		return r.data, r.err
	}
	data, err := m.folder.read(ctx, name)
	if err == nil || notExist(err) {
		// Only answers are kept; a failure to ask (a context done, a
		// server down) is tried again.
		m.mu.Lock()
		m.reads[name] = memoRead{data, err}
		m.mu.Unlock()
	}
	return data, err
}

// found returns the files the memo and its subfolders read, by their
// names in the folder.
func (m *memo) found() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for name, r := range m.reads {
		if r.err == nil {
			out[name] = r.data
		}
	}
	for dir, s := range m.subs {
		for name, data := range s.found() {
			out[dir+"/"+name] = data
		}
	}
	return out
}

// prefetch reads the named files at once, for read to answer, over
// HTTP; on disk it does nothing.
func (m *memo) prefetch(ctx context.Context, names ...string) {
	if _, local := onDisk(m.folder); local {
		return // no round trip to save: each is read when it is asked for
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.read(ctx, name)
		}()
	}
	wg.Wait()
}

func (m *memo) sub(name string) folder {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.subs[name]
	if !ok {
		s = remember(m.folder.sub(name))
		m.subs[name] = s
	}
	return s
}
