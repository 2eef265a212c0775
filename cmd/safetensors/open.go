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

// model is what inspect, validate and stats read: one file, or a
// checkpoint (a model directory, or an index).
type model struct {
	src     tensorSource
	sharded *safetensors.Sharded // a checkpoint's; nil for one file
	header  *safetensors.Header  // one file's; nil for a checkpoint
	// warning says that the index leaves out tensors its shards hold, or
	// is empty.
	warning string
}

// openModel opens name: a URL of a file, an index or a model's base, or a
// local path that safetensors.OpenModel takes (a file, an index, a model
// directory, a Hugging Face cache snapshot), as check and diff, through
// check.Model and diff.Paths, and quantize open theirs. A local file too
// large for the address space is read through the file. inspect, validate
// and stats leave SIGINT to end the process, so ctx is the background
// context for them.
func openModel(ctx context.Context, name string) (*model, error) {
	if isURL(name) && !isCheckpointURL(name) {
		r, err := openURL(ctx, name)
		if err != nil {
			return nil, err
		}
		return &model{src: r, header: r.Header()}, nil
	}
	if isURL(name) {
		sh, err := openIndex(ctx, name)
		if err != nil {
			return nil, err
		}
		return &model{src: sh, sharded: sh, warning: unlistedWarning(name, sh.Unlisted())}, nil
	}
	mm, err := safetensors.OpenModel(name)
	if err != nil {
		return nil, err
	}
	m := &model{src: mm}
	if info, err := os.Stat(name); !mm.IsSharded() && err == nil && !info.IsDir() {
		// One file named as such; a directory is listed as a checkpoint,
		// of one shard or more.
		if m.header, err = mm.Header(mm.Shards()[0]); err != nil {
			mm.Close()
			return nil, err
		}
		return m, nil
	}
	m.sharded = mm.Sharded
	m.warning = unlistedWarning(mm.File(), mm.Unlisted())
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
	if m.sharded != nil {
		return summarizeSharded(name, m.sharded)
	}
	return summarize(name, m.header)
}

// names returns the names of m's tensors: in file order for one file, by
// name for a checkpoint.
func (m *model) names() []string {
	if m.sharded != nil {
		return m.sharded.Names()
	}
	names := make([]string, len(m.header.Tensors))
	for i, t := range m.header.Tensors {
		names[i] = t.Name
	}
	return names
}

// statsOf returns the statistics of the named tensor of m and its dtype;
// the dtype is 0 when the tensor could not be read, and set when its
// values have no statistics (C64, F4, F6). A tensor too large to read into memory at once (through a file read
// with ReadAt, on a 32-bit host) is read a chunk at a time.
func (m *model) statsOf(name string) (safetensors.Stats, safetensors.DType, error) {
	t, err := m.src.Tensor(name)
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
	sr, err := m.src.TensorReader(name)
	if err != nil {
		return safetensors.Stats{}, 0, err
	}
	h := m.header
	if m.sharded != nil {
		shard, _ := m.sharded.Shard(name) // TensorReader found it
		h, _ = m.sharded.Header(shard)
	}
	var d safetensors.DType
	for _, t := range h.Tensors {
		if t.Name == name {
			d = t.DType
		}
	}
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
func (m *model) Close() error { return m.src.Close() }
