package safetensors

// A TensorSource is a set of named tensors, read one at a time: what the
// check and diff packages read. *Reader, *Sharded and *Model satisfy it,
// however they were opened (from a path, from memory, through an
// io.ReaderAt, or by the remote package from a URL), and so can any other
// set of tensors, such as tensors held in memory.
//
// Names returns the names of the tensors, sorted; Tensor returns the named
// tensor, or an error for a name Names does not list or a tensor that
// cannot be read. A TensorSource given to a function that reads in
// parallel, as check.Run and diff.Compare do, must be safe for concurrent
// use, as *Reader, *Sharded and *Model are.
type TensorSource interface {
	Names() []string
	Tensor(name string) (Tensor, error)
}

var (
	_ TensorSource = (*Reader)(nil)
	_ TensorSource = (*Sharded)(nil)
	_ TensorSource = (*Model)(nil)
)
