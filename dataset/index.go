package dataset

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
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

// writeIndex writes _tensor_index.parquet as Spark writes it: a directory
// holding one snappy-compressed Parquet part file and an empty _SUCCESS,
// from the entries spilled while the shards were written. Spark's Parquet
// reader skips files whose names start with "_" or ".", so a single file
// named _tensor_index.parquet would be invisible to it. The directory is
// written under a temporary name and renamed into place.
func (w *Writer) writeIndex() error {
	path := filepath.Join(w.dir, IndexName)
	if err := atomicfile.WriteDir(path, w.writeIndexFiles); err != nil {
		return err
	}
	w.paths = append(w.paths, path)
	return nil
}

// writeIndexFiles writes the part file and _SUCCESS into dir.
func (w *Writer) writeIndexFiles(dir string) error {
	part := filepath.Join(dir, fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid4()))
	err := atomicfile.WriteFile(part, func(f io.Writer) error {
		pw := parquet.NewGenericWriter[indexRow](f, parquet.Compression(&parquet.Snappy))
		rows := make([]indexRow, 0, indexBatch)
		err := w.readSpill(func(e *spillEntry) error {
			shape := make([]int32, len(e.shape))
			for i, d := range e.shape {
				shape[i] = int32(d) // checked to fit by createConfig
			}
			rows = append(rows, indexRow{TensorKey: string(e.name), FileName: w.shards[e.shard].Path, Shape: shape, DType: e.dtype.String()})
			if len(rows) == indexBatch {
				if _, err := pw.Write(rows); err != nil {
					return err
				}
				rows = rows[:0]
			}
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := pw.Write(rows); err != nil {
			return err
		}
		return pw.Close()
	})
	if err != nil {
		return err
	}
	return atomicfile.WriteNew(filepath.Join(dir, "_SUCCESS"), nil)
}

// spillEntry is an entry of the spill file: a tensor's name, shard, dtype
// and shape. readSpilled reuses its slices.
type spillEntry struct {
	name  []byte
	shard int
	dtype safetensors.DType
	shape []uint64
}

// readSpilled reads an entry that spillTensor wrote into e.
func readSpilled(r *bufio.Reader, e *spillEntry) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err // io.EOF at the end
	}
	e.name = slices.Grow(e.name[:0], int(n))[:n]
	if _, err := io.ReadFull(r, e.name); err != nil {
		return err
	}
	var v [3]uint64 // shard, dtype, rank
	for i := range v {
		if v[i], err = binary.ReadUvarint(r); err != nil {
			return err
		}
	}
	e.shard, e.dtype = int(v[0]), safetensors.DType(v[1])
	e.shape = slices.Grow(e.shape[:0], int(v[2]))[:v[2]]
	for i := range e.shape {
		if e.shape[i], err = binary.ReadUvarint(r); err != nil {
			return err
		}
	}
	return nil
}

// keyRow is the part of an index row that lookups read: Parquet reads only
// those two columns.
type keyRow struct {
	TensorKey string `parquet:"tensor_key"`
	FileName  string `parquet:"file_name"`
}

// maxIndexParts bounds the part files of an index directory that a lookup
// reads.
const maxIndexParts = 1 << 16

// readIndex reads the tensor keys and file names of the dataset's index,
// a single Parquet file or a directory of part files as Spark writes it
// (where, as Spark does, it skips names that start with "_" or ".", such
// as _SUCCESS and Hadoop's .crc files), and maps each key to its shard; a
// key in two shards maps to the later in the manifest.
func (d *Dataset) readIndex() (map[string]int, error) {
	m := make(map[string]int)
	if d.indexKind == indexFile {
		return m, d.readIndexFile(IndexName, m)
	}
	dir, err := d.root.Open(IndexName)
	if err != nil {
		return nil, err
	}
	entries, err := dir.ReadDir(maxIndexParts + 1)
	dir.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > maxIndexParts {
		return nil, d.errorf("%s holds more than %d files", IndexName, maxIndexParts)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
			continue
		}
		if err := d.readIndexFile(path.Join(IndexName, name), m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readIndexFile adds the rows of one Parquet file of the index to m. A
// malformed file gives an error: the Parquet library's panics on such
// files are recovered.
func (d *Dataset) readIndexFile(name string, m map[string]int) (err error) {
	f, err := openRegular(d.root, d.dir, filepath.FromSlash(name))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = d.errorf("%s: %v", name, p)
		}
	}()
	pf, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		return d.errorf("%s: %v", name, err)
	}
	for _, col := range []string{"tensor_key", "file_name"} {
		if _, ok := pf.Schema().Lookup(col); !ok {
			return d.errorf("%s has no column %s", name, col)
		}
	}
	r := parquet.NewGenericReader[keyRow](pf)
	defer r.Close()
	rows := make([]keyRow, indexBatch)
	for {
		n, err := r.Read(rows)
		for _, row := range rows[:n] {
			i, ok := d.shardNum[row.FileName]
			if !ok {
				return d.errorf("%s: tensor %q is in %s, which the manifest does not list", name, row.TensorKey, row.FileName)
			}
			if j, ok := m[row.TensorKey]; !ok || i > j {
				m[row.TensorKey] = i
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return d.errorf("%s: %v", name, err)
		}
	}
}
