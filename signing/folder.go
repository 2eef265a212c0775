package signing

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors/internal/regular"
)

// GitPaths are the paths that model_signing leaves out of a signature
// unless told otherwise: those of git, in the model's folder.
var GitPaths = []string{".git", ".gitattributes", ".github", ".gitignore"}

// A Folder is a model's folder, read through an os.Root so that no name,
// symbolic link or ".." leads out of it. For a snapshot of the Hugging
// Face cache (.../models--ORG--NAME/snapshots/REVISION), whose files are
// links to ../../blobs/, the root is the model's cache folder: the links
// may lead to its blobs, and no further.
type Folder struct {
	dir    string
	root   *os.Root
	prefix string // the folder in root: "snapshots/REV/", or ""
}

// OpenFolder opens the folder dir. The Folder must be closed.
func OpenFolder(dir string) (*Folder, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("signing: %s: not a folder", dir)
	}
	rootDir, prefix := dir, ""
	if snap := filepath.Dir(filepath.Clean(dir)); filepath.Base(snap) == "snapshots" {
		cache := filepath.Dir(snap)
		if b, err := os.Stat(filepath.Join(cache, "blobs")); err == nil && b.IsDir() {
			rootDir, prefix = cache, "snapshots/"+filepath.Base(filepath.Clean(dir))+"/"
		}
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, err
	}
	return &Folder{dir: dir, root: root, prefix: prefix}, nil
}

// Dir returns the folder's path, as OpenFolder was given it.
func (f *Folder) Dir() string { return f.dir }

// Close closes the folder.
func (f *Folder) Close() error { return f.root.Close() }

// Open opens the file name (slash-separated, inside the folder) for
// reading, following symbolic links that stay inside the folder (or, for
// a cache snapshot, the model's cache folder). It refuses anything but a
// regular file (an error wrapping safetensors.ErrNotRegular) without
// waiting on a FIFO.
func (f *Folder) Open(name string) (*os.File, error) {
	if !localPath(name) {
		return nil, fmt.Errorf("signing: %s: %q is not a path inside the folder", f.dir, name)
	}
	file, err := regular.Open(f.root.OpenFile, f.prefix+name)
	if err != nil {
		return nil, f.pathError(name, err)
	}
	return file, nil
}

// Readlink returns the target of the symbolic link name, or "" if name is
// not one.
func (f *Folder) Readlink(name string) string {
	info, err := f.root.Lstat(f.prefix + name)
	if err != nil || info.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	target, err := os.Readlink(filepath.Join(f.root.Name(), filepath.FromSlash(f.prefix+name)))
	if err != nil {
		return ""
	}
	return target
}

// pathError names the file of err with the folder's path.
func (f *Folder) pathError(name string, err error) error {
	full := filepath.Join(f.dir, filepath.FromSlash(name))
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if strings.Contains(pe.Err.Error(), "escapes") {
			return fmt.Errorf("%w: %s: a symbolic link that leads out of the model's folder", ErrInvalidSignature, full)
		}
		return &fs.PathError{Op: pe.Op, Path: full, Err: pe.Err}
	}
	return fmt.Errorf("%s: %w", full, err)
}

// A File is a file of a Folder.
type File struct {
	Name string // slash-separated, in the folder
	Size int64
	// Link is the target of the symbolic link the file is, or "".
	Link string
}

// Files lists the regular files of the folder and its subfolders, but
// those under the paths in ignore (each a file or a folder, relative to
// the folder), sorted as model_signing sorts them (by path elements). A
// symbolic link counts as the file it leads to, inside the folder; one
// that leads out, to a folder, or to nothing is an error, as is a file of
// another kind (a FIFO, a device).
func (f *Folder) Files(ignore []string) ([]File, error) {
	base := strings.TrimSuffix(f.prefix, "/")
	if base == "" {
		base = "."
	}
	fsys := f.root.FS()
	var files []File
	err := fs.WalkDir(fsys, base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return f.pathError(strings.TrimPrefix(p, f.prefix), err)
		}
		name := strings.TrimPrefix(p, f.prefix)
		if p == base {
			return nil
		}
		if ignored(name, ignore) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return f.pathError(name, err)
			}
			files = append(files, File{Name: name, Size: info.Size()})
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			info, err := f.root.Stat(p)
			if err != nil {
				return f.pathError(name, err)
			}
			if !info.Mode().IsRegular() {
				return fmt.Errorf("signing: %s: a symbolic link to a %s, not to a file", filepath.Join(f.dir, filepath.FromSlash(name)), kind(info.Mode()))
			}
			target, _ := os.Readlink(filepath.Join(f.root.Name(), filepath.FromSlash(p)))
			files = append(files, File{Name: name, Size: info.Size(), Link: target})
			return nil
		}
		return fmt.Errorf("signing: %s: not a regular file (%s)", filepath.Join(f.dir, filepath.FromSlash(name)), d.Type())
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b File) int { return comparePaths(a.Name, b.Name) })
	return files, nil
}

func kind(m fs.FileMode) string {
	if m.IsDir() {
		return "folder"
	}
	return m.Type().String()
}

// ignored reports whether name is one of the paths in ignore or under one.
func ignored(name string, ignore []string) bool {
	for _, ig := range ignore {
		ig = strings.TrimSuffix(path.Clean(filepath.ToSlash(ig)), "/")
		if name == ig || strings.HasPrefix(name, ig+"/") {
			return true
		}
	}
	return false
}

// comparePaths orders slash-separated paths as Python orders
// pathlib.PurePosixPath: element by element.
func comparePaths(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}
