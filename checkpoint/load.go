package checkpoint

import (
	"context"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/parallel"
)

// loadConcurrency is how many tensors Load reads at once over HTTP.
const loadConcurrency = 16

// Load reads the model at target, any input Open takes (a file, an index,
// a folder of any library's layout, a model of several parts, a snapshot
// of the Hugging Face cache, a URL of any of these), into memory, and
// returns its tensors by name, as Names names them ("unet/conv_in.weight"
// for a part), and its Metadata: what Python's load_file does for one
// file, for a whole model, in one call, with nothing left open. The
// tensors' Data belong to the caller and may be modified. Files on disk
// are read whole, in large reads from several goroutines, as
// safetensors.ReadAll reads them; over HTTP, the tensors are read with up
// to 16 range requests at once, each of at most
// safetensors.MaxTensorAlloc bytes. The options are Open's.
//
// For a file alone, safetensors.Load does the same without the folder's
// rules. To stream a model through memory of a bounded size, as an
// inference server fills a device, use the load package's Loader.
func Load(ctx context.Context, target string, opts ...Option) (map[string]safetensors.Tensor, map[string]string, error) {
	c, err := Open(ctx, target, append([]Option{ReadOptions(safetensors.ReadAll())}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close() // read into memory: the tensors stay valid
	names := c.Names()
	out := make(map[string]safetensors.Tensor, len(names))
	var mu sync.Mutex
	err = parallel.For(ctx, len(names), loadConcurrency, func(_, i int) error {
		t, err := c.TensorContext(ctx, names[i])
		if err != nil {
			return err
		}
		t.Shape = slices.Clone(t.Shape)
		mu.Lock()
		out[names[i]] = t
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, c.Metadata(), nil
}
