package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/regular"
)

// openInput opens the named input file, refusing anything but a regular
// file (an error wrapping safetensors.ErrNotRegular) without blocking on
// a FIFO, which would wait for a writer.
func openInput(path string) (*os.File, error) {
	f, err := regular.Open(os.OpenFile, path)
	var nr *regular.NotRegularError
	if errors.As(err, &nr) {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %v)", safetensors.ErrNotRegular, nr.Mode)}
	}
	return f, err
}

// model is what inspect, validate and stats read: a checkpoint, and how
// it was named.
type model struct {
	ck *checkpoint.Checkpoint
	// file is true for a checkpoint named by its one file (a path or URL
	// of a safetensors file), which is listed as a file rather than as a
	// checkpoint of one shard.
	file bool
	// warning says that the index leaves out tensors its shards hold.
	warning string
}

// openModel opens name, any input checkpoint.Open takes: a file, an index,
// a folder of any library's layout, a model of several parts, a Hugging
// Face cache snapshot, or a URL of any of these, with the options of the
// command line (--header, HF_TOKEN, --variant). ctx governs its later
// reads over a network too; inspect, validate and stats leave SIGINT to
// end the process, so ctx is the background context for them.
func openModel(ctx context.Context, name string) (*model, error) {
	ck, err := checkpoint.Open(ctx, name, checkpointOptions(name)...)
	if err != nil {
		return nil, err
	}
	m := &model{ck: ck, file: strings.HasSuffix(name, ".safetensors") && len(ck.Files()) == 1 && ck.Index() == "" && ck.Parts() == nil}
	if !m.file {
		m.warning = unlistedWarning(ck.String(), ck.Unlisted())
	}
	return m, nil
}

// unlistedWarning returns the warning about the tensors u that the shards
// of the checkpoint whose index is index hold and the index does not list,
// or "" if there are none.
func unlistedWarning(index string, u []string) string {
	if len(u) == 0 {
		return ""
	}
	quoted := make([]string, min(len(u), 5))
	for i := range quoted {
		quoted[i] = strconv.Quote(u[i])
	}
	more := ""
	if len(u) > 5 {
		more = fmt.Sprintf(" and %d more", len(u)-5)
	}
	return fmt.Sprintf("%s: %d tensors not listed in the index, which loaders ignore: %s%s", index, len(u), strings.Join(quoted, ", "), more)
}

// summary returns what inspect prints of m, named name.
func (m *model) summary(name string) summary {
	if m.file {
		h, _ := m.ck.Header(m.ck.Files()[0]) // one of Files
		return summarize(name, h)
	}
	return summarizeCheckpoint(name, m.ck)
}

// names returns the names of m's tensors: in file order for one file, by
// name for a checkpoint.
func (m *model) names() []string {
	if !m.file {
		return m.ck.Names()
	}
	h, _ := m.ck.Header(m.ck.Files()[0])
	names := make([]string, len(h.Tensors))
	for i, t := range h.Tensors {
		names[i] = t.Name
	}
	return names
}

// statsOf returns the statistics of the named tensor of m and its dtype;
// the dtype is 0 when the tensor could not be read, and set when its
// values have no statistics (C64, F4, F6). A tensor too large to read into memory at once (through a file read
// with ReadAt, on a 32-bit host) is read a chunk at a time.
func (m *model) statsOf(name string) (safetensors.Stats, safetensors.DType, error) {
	t, err := m.ck.Tensor(name)
	if err == nil {
		s, err := t.Stats()
		if errors.Is(err, safetensors.ErrFileChanged) {
			return s, 0, err
		}
		return s, t.DType, err
	}
	if !errors.Is(err, safetensors.ErrTensorTooLarge) {
		return safetensors.Stats{}, 0, err
	}
	sr, err := m.ck.TensorReader(name)
	if err != nil {
		return safetensors.Stats{}, 0, err
	}
	info, err := m.ck.Info(name)
	if err != nil {
		return safetensors.Stats{}, 0, err
	}
	d := info.DType
	if d.Bits()%8 != 0 {
		_, err := safetensors.Tensor{Name: name, DType: d}.Stats()
		return safetensors.Stats{}, d, err // no real value
	}
	elem := d.Bits() / 8
	buf := make([]byte, (statsChunk/elem)*elem)
	var all safetensors.Stats
	for off, size := int64(0), sr.Size(); off < size; {
		n, err := sr.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if err != nil && (err != io.EOF || off+int64(n) < size) {
			if err == io.EOF {
				err = fmt.Errorf("the file was truncated while it was read: %w", io.ErrUnexpectedEOF)
			}
			return safetensors.Stats{}, d, fmt.Errorf("tensor %q: reading bytes [%d, %d) of its data: %w", name, off, off+int64(n), err)
		}
		s, err := safetensors.Tensor{Name: name, DType: d, Shape: []uint64{uint64(n / elem)}, Data: buf[:n]}.Stats()
		if err != nil {
			return safetensors.Stats{}, d, err
		}
		if off == 0 {
			all = s
		} else {
			all = all.Merge(s)
		}
		off += int64(n)
	}
	return all, d, nil
}

// statsChunk is how many bytes of a tensor statsOf reads at a time.
const statsChunk = 16 << 20

// Close closes m's files.
func (m *model) Close() error { return m.ck.Close() }
