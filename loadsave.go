package safetensors

import (
	"maps"
	"slices"
)

// Load reads the safetensors file at path into memory and returns its
// tensors by name and its metadata, as Python's safetensors load_file does:
// one call, nothing left open. The tensors' Data are slices of one buffer
// that belongs to the caller alone, and stay valid for as long as any of
// them is used; they may be modified. Nothing needs closing.
//
// Load reads the whole data section (the file's size, in memory); for files
// larger than memory, or to read only some tensors, use Open, which maps
// the file and reads only what is touched, but whose tensors die with its
// Close; to stream the tensors of a file or a checkpoint through memory of
// a bounded size, as an inference server fills a device, use the load
// package's Loader; to read a whole model, the checkpoint package's Load. The
// file is validated as Open validates it, and Load's errors are Open's.
//
// To read a tensor as float32s whatever its dtype, as GetTensorFloat32-style
// APIs do, call Float32s on it:
//
//	tensors, _, err := safetensors.Load("model.safetensors")
//	values, err := tensors["lm_head.weight"].Float32s()
func Load(path string) (map[string]Tensor, map[string]string, error) {
	r, err := Open(path, ReadAll())
	if err != nil {
		return nil, nil, err
	}
	defer r.Close() // it holds nothing after ReadAll; the tensors stay valid
	ts, err := r.Tensors()
	if err != nil {
		return nil, nil, err
	}
	m := make(map[string]Tensor, len(ts))
	for _, t := range ts {
		t.Shape = slices.Clone(t.Shape)
		m[t.Name] = t
	}
	return m, r.Metadata(), nil
}

// Save writes tensors, keyed by name, and metadata (nil for none) to a
// safetensors file at path, as Python's safetensors save_file does: byte for
// byte the file the reference writes, which appears only once complete
// (see WriteFile). A tensor's map key is its name; its Name field must be
// empty or the same. Options such as Alignment are WriteFile's.
func Save(path string, tensors map[string]Tensor, metadata map[string]string, opts ...WriteOption) error {
	list := make([]Tensor, 0, len(tensors))
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		t := tensors[name]
		if t.Name != "" && t.Name != name {
			return tensorErrorf(name, ErrInvalidHeader, "the tensor under key %q is named %q", name, t.Name)
		}
		t.Name = name
		list = append(list, t)
	}
	return WriteFile(path, list, metadata, opts...)
}
