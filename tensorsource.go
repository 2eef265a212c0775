package safetensors

import (
	"context"
	"sync"
)

// A TensorSource is a set of named tensors, read one at a time: what the
// check and diff packages read. A *Reader satisfies it, however it was
// opened (from a path, from memory, through an io.ReaderAt, or by the
// remote package from a URL), as does the checkpoint package's Checkpoint,
// and so can any other set of tensors, such as tensors held in memory.
//
// Names returns the names of the tensors, sorted; TensorContext returns
// the named tensor, read under ctx (a read over a network is aborted when
// ctx is done), or an error for a name Names does not list or a tensor
// that cannot be read. A TensorSource given to a function that reads in
// parallel, as check.Run and diff.Compare do, must be safe for concurrent
// use, as *Reader is.
type TensorSource interface {
	Names() []string
	TensorContext(ctx context.Context, name string) (Tensor, error)
}

var _ TensorSource = (*Reader)(nil)

// An ElementSource is a TensorSource that also gives a tensor's entry in
// its header (Info) and reads a tensor piece by piece (TensorElements), so
// that a tool can read a model of any size, tensors larger than memory
// included, in memory of a bounded size: the check and diff packages and
// the command read an ElementSource so. *Reader and the checkpoint
// package's Checkpoint are ElementSources.
type ElementSource interface {
	TensorSource
	Info(name string) (TensorInfo, error)
	TensorElements(ctx context.Context, name string, start, end uint64, buf []byte) (Tensor, error)
}

var _ ElementSource = (*Reader)(nil)

// AsElementSource returns src as an ElementSource: src itself if it is
// one; otherwise one that reads each tensor whole with TensorContext the
// first time Info or TensorElements asks for it, keeps it, and cuts its
// elements from it, for a set of tensors held in memory, such as the
// caller's own. It is safe for concurrent use if src is.
func AsElementSource(src TensorSource) ElementSource {
	if es, ok := src.(ElementSource); ok {
		return es
	}
	return &wholeTensors{TensorSource: src, tensors: map[string]Tensor{}}
}

// wholeTensors is AsElementSource of a TensorSource that is not an
// ElementSource.
type wholeTensors struct {
	TensorSource
	mu      sync.Mutex
	tensors map[string]Tensor
}

// tensor returns the named tensor, read once.
func (w *wholeTensors) tensor(ctx context.Context, name string) (Tensor, error) {
	w.mu.Lock()
	t, ok := w.tensors[name]
	w.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := w.TensorContext(ctx, name)
	if err != nil {
		return Tensor{}, err
	}
	w.mu.Lock()
	w.tensors[name] = t
	w.mu.Unlock()
	return t, nil
}

func (w *wholeTensors) Info(name string) (TensorInfo, error) {
	t, err := w.tensor(context.Background(), name)
	if err != nil {
		return TensorInfo{}, err
	}
	return TensorInfo{Name: name, DType: t.DType, Shape: t.Shape, DataOffsets: [2]uint64{0, uint64(len(t.Data))}}, nil
}

func (w *wholeTensors) TensorElements(ctx context.Context, name string, start, end uint64, _ []byte) (Tensor, error) {
	t, err := w.tensor(ctx, name)
	if err != nil {
		return Tensor{}, err
	}
	return t.Elements(start, end)
}
