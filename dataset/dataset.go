// Package dataset reads and writes tensor datasets in the layout of the
// safetensors-spark connector, so that Go programs can read what Apache
// Spark writes with df.write.format("safetensors"), and write datasets that
// spark.read.format("safetensors") reads back.
//
// A dataset is a directory of safetensors shards named
// part-{task:05d}-{shard:04d}-{uuid}.safetensors, a dataset_manifest.json
// that lists them with their sample counts and sizes and gives the schema
// (each column's dtype and per-sample shape), and, on request, a
// _tensor_index.parquet that maps each tensor to its shard.
//
// Samples are laid out in one of two modes:
//
//   - Batch: every BatchSize samples make one shard holding one tensor per
//     column, named after the column and shaped [n, sample shape...].
//   - KeyValue: each sample has a key and gives one tensor per column,
//     named key + separator + column ("user42__embedding"); shards roll over
//     at a target size.
//
// The connector encodes F16 and BF16 by truncation, and so do the float32
// helpers here by default, so that the bytes match what Spark writes;
// Options.RoundToNearest rounds to nearest even instead, as PyTorch does.
// Unlike the connector, truncation here keeps F16 subnormals and never turns
// a NaN into an infinity.
//
// This package is separate from the safetensors package so that programs
// that read model files do not link the Parquet library.
package dataset

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
)

// The file names of a dataset directory.
const (
	ManifestName = "dataset_manifest.json"
	IndexName    = "_tensor_index.parquet"
)

var (
	// ErrInvalidOptions is returned by Create for options that cannot make
	// a dataset: both modes or none, sizes out of range, unknown dtypes.
	ErrInvalidOptions = errors.New("dataset: invalid options")

	// ErrInvalidSample is returned for a sample that does not fit the
	// columns: the wrong number of values or of bytes.
	ErrInvalidSample = errors.New("dataset: invalid sample")

	// ErrDuplicateKey is returned in KeyValue mode for a key given twice
	// within a shard with DuplicatesFail, or for two samples whose tensor
	// names collide ("a__b" with column "c", "a" with column "b__c").
	ErrDuplicateKey = errors.New("dataset: duplicate key")

	// ErrInvalidDataset is returned by Open for a directory whose manifest
	// is malformed or disagrees with its shards.
	ErrInvalidDataset = errors.New("dataset: invalid dataset")

	// ErrExists is returned by Create for a directory that already holds a
	// dataset, or shards or temporary files that a writer left behind.
	ErrExists = errors.New("dataset: a dataset already exists there")

	// ErrShardFault is returned, naming the shard, when reading a mapped
	// shard faults: another process truncated the file while it was open.
	ErrShardFault = errors.New("dataset: a shard could not be read: truncated while mapped")
)

// Mode is how samples are laid out in shards.
type Mode int

const (
	// Batch stacks every BatchSize samples into one shard with one tensor
	// per column.
	Batch Mode = iota + 1
	// KeyValue writes one tensor per column of each sample, named after
	// the sample's key.
	KeyValue
)

// String returns "batch" or "key-value".
func (m Mode) String() string {
	switch m {
	case Batch:
		return "batch"
	case KeyValue:
		return "key-value"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Column is one tensor of every sample: its name, dtype and per-sample
// shape.
type Column struct {
	Name  string
	DType safetensors.DType
	Shape []uint64
}

// sampleBytes returns the size of one sample's tensor of the column.
func (c Column) sampleBytes() uint64 {
	n := uint64(c.DType.Bits() / 8)
	for _, d := range c.Shape {
		n *= d
	}
	return n
}

// findColumn returns the position of the named column in cols, sorted by
// name, and whether it is there.
func findColumn(cols []Column, name string) (int, bool) {
	return slices.BinarySearchFunc(cols, name, func(c Column, name string) int { return strings.Compare(c.Name, name) })
}

// sparkDType reports whether the connector reads dtype d: the twelve
// dtypes of its tensor struct.
func sparkDType(d safetensors.DType) bool {
	switch d {
	case safetensors.F16, safetensors.F32, safetensors.F64, safetensors.BF16,
		safetensors.U8, safetensors.I8, safetensors.U16, safetensors.I16,
		safetensors.U32, safetensors.I32, safetensors.U64, safetensors.I64:
		return true
	}
	return false
}

// Manifest is dataset_manifest.json.
type Manifest struct {
	FormatVersion      string  `json:"format_version"`      // "1.0"
	SafetensorsVersion string  `json:"safetensors_version"` // "1.0"
	TotalSamples       int64   `json:"total_samples"`
	TotalBytes         int64   `json:"total_bytes"` // the shards' file sizes, added up
	Shards             []Shard `json:"shards"`
	// Schema gives each column's dtype and the shape of one sample's
	// tensor; a Batch shard holds [samples, shape...].
	Schema map[string]ColumnSchema `json:"schema"`
}

// Shard is a shard's entry in the manifest.
type Shard struct {
	Path    string `json:"shard_path"` // relative to the dataset's directory
	Samples int64  `json:"samples_count"`
	Bytes   int64  `json:"bytes"` // the file's size
}

// ColumnSchema is a column's entry in the manifest's schema.
type ColumnSchema struct {
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// The versions a manifest carries.
const (
	FormatVersion      = "1.0"
	SafetensorsVersion = "1.0"
)
