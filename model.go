package safetensors

import (
	"os"
	"path/filepath"
)

// A Model is a model's weights as OpenModel finds them from a path: a
// single safetensors file or a sharded checkpoint, whose tensors read as
// one set through the embedded Sharded (Names, Tensor, Metadata, Shards,
// Unlisted, Close and the rest), together with the directory that holds
// the model's other files, such as config.json.
type Model struct {
	*Sharded
	dir, file string
	isIndex   bool
}

// OpenModel opens the model at path, which is any of the inputs that the
// command's inspect, validate, stats, check, diff and quantize take, all
// found by this one function:
//
//   - a safetensors file (any name not ending in .json);
//   - a sharded checkpoint's index file (any name ending in .json, such as
//     model.safetensors.index.json);
//   - a model directory, where it looks, as transformers' from_pretrained
//     does, for model.safetensors, then model.safetensors.index.json, then
//     the one *.safetensors.index.json, then the one *.safetensors file
//     (such as adapter_model.safetensors); more than one candidate is an
//     error wrapping ErrInvalidIndex;
//   - a snapshot of the Hugging Face cache
//     (.../models--org--name/snapshots/REVISION), a model directory whose
//     files are links into the cache's blobs.
//
// It checks what OpenIndex checks and opens the files as OpenIndex does,
// with the options given: a tensor that a shard holds but the index does
// not list is left out of Names, as loaders leave it out, and Unlisted
// names it (under Strict, it is an error wrapping ErrUnlistedTensor). One
// thing differs: a file too large for the address space (on a 32-bit
// host, a file of 2 GiB or more), which Open cannot map, is read through
// the file as NewReaderAt reads it, unless ReadAll or ReadInto asks for it
// in memory: its tensors are then copies, each of at most MaxTensorAlloc
// bytes and less than the address space, and TensorReader streams larger
// ones. An error never comes with a Model.
func OpenModel(path string, opts ...ReadOption) (*Model, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	cfg.readAtLarge = true
	file, isIndex, err := findCheckpoint(path)
	if err != nil {
		return nil, err
	}
	s, err := openCheckpoint(file, isIndex, cfg)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		dir = path
	}
	return &Model{Sharded: s, dir: dir, file: file, isIndex: isIndex}, nil
}

// Dir returns the directory of the model's other files, config.json
// among them: the directory OpenModel was given, or that of the file.
func (m *Model) Dir() string { return m.dir }

// File returns the file that OpenModel opened: the safetensors file, or
// the sharded checkpoint's index.
func (m *Model) File() string { return m.file }

// IsSharded reports whether the model is a sharded checkpoint, opened
// through its index, rather than a single file.
func (m *Model) IsSharded() bool { return m.isIndex }
