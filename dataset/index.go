package dataset

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"

	"github.com/safetensors-go/safetensors"
)

// indexRow is a row of _tensor_index.parquet, in the connector's schema:
// tensor_key and file_name strings, shape a list of int32, dtype a string.
type indexRow struct {
	TensorKey string  `parquet:"tensor_key"`
	FileName  string  `parquet:"file_name"`
	Shape     []int32 `parquet:"shape,list"`
	DType     string  `parquet:"dtype"`
}

// indexBatch is the number of rows written to the Parquet writer at a time.
const indexBatch = 4096

// writeIndex writes _tensor_index.parquet from the entries spilled while
// the shards were written, and removes the spill.
func (w *Writer) writeIndex() error {
	spill := w.index
	w.index = nil
	defer func() {
		spill.Close()
		os.Remove(spill.Name())
	}()
	if err := w.indexBuf.Flush(); err != nil {
		return err
	}
	if _, err := spill.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReader(spill)
	path := filepath.Join(w.dir, IndexName)
	err := writeAtomic(path, func(f io.Writer) error {
		pw := parquet.NewGenericWriter[indexRow](f)
		rows := make([]indexRow, 0, indexBatch)
		for {
			row, err := readSpilled(r, w.shards)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			rows = append(rows, row)
			if len(rows) == indexBatch {
				if _, err := pw.Write(rows); err != nil {
					return err
				}
				rows = rows[:0]
			}
		}
		if _, err := pw.Write(rows); err != nil {
			return err
		}
		return pw.Close()
	})
	if err != nil {
		return err
	}
	w.paths = append(w.paths, path)
	return nil
}

// readSpilled reads an entry that spillIndex wrote.
func readSpilled(r *bufio.Reader, shards []Shard) (indexRow, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return indexRow{}, err // io.EOF at the end
	}
	key := make([]byte, n)
	if _, err := io.ReadFull(r, key); err != nil {
		return indexRow{}, err
	}
	var v [3]uint64 // shard, dtype, rank
	for i := range v {
		if v[i], err = binary.ReadUvarint(r); err != nil {
			return indexRow{}, err
		}
	}
	shape := make([]int32, v[2])
	for i := range shape {
		d, err := binary.ReadUvarint(r)
		if err != nil {
			return indexRow{}, err
		}
		shape[i] = int32(d) // checked to fit by Options.check
	}
	return indexRow{TensorKey: string(key), FileName: shards[v[0]].Path, Shape: shape, DType: safetensors.DType(v[1]).String()}, nil
}

// keyRow is the part of an index row that lookups read: Parquet reads only
// those two columns.
type keyRow struct {
	TensorKey string `parquet:"tensor_key"`
	FileName  string `parquet:"file_name"`
}

// readIndex reads the tensor keys and file names of the dataset's index.
// A malformed file gives an error: the Parquet library's panics on such
// files are recovered.
func readIndex(root *os.Root) (m map[string]string, err error) {
	f, err := root.Open(IndexName)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, fmt.Errorf("%w: %s: %v", ErrInvalidDataset, IndexName, p)
		}
	}()
	pf, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidDataset, IndexName, err)
	}
	for _, col := range []string{"tensor_key", "file_name"} {
		if _, ok := pf.Schema().Lookup(col); !ok {
			return nil, fmt.Errorf("%w: %s has no column %s", ErrInvalidDataset, IndexName, col)
		}
	}
	r := parquet.NewGenericReader[keyRow](pf)
	defer r.Close()
	m = make(map[string]string, min(r.NumRows(), 1<<16)) // the row count comes from the file
	rows := make([]keyRow, indexBatch)
	for {
		n, err := r.Read(rows)
		for _, row := range rows[:n] {
			m[row.TensorKey] = row.FileName
		}
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidDataset, IndexName, err)
		}
	}
}
