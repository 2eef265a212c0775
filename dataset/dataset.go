// Package dataset reads and writes tensor datasets as the safetensors-spark
// connector (github.com/SemyonSinchenko/safetensors-spark) does, so that Go
// programs read what Apache Spark writes with df.write.format("safetensors"),
// and write datasets that spark.read.format("safetensors"), the connector's
// Python dataset.py and Spark's Parquet reader read as their own. The tests
// read datasets written by the real connector (testdata/spark).
//
// A dataset is a directory of safetensors shards named
// part-{task:05d}-{shard:04d}-{uuid}.safetensors; a dataset_manifest.json
// that lists them with their sample counts and file sizes, and gives the
// schema; and, on request, _tensor_index.parquet, which maps each tensor to
// its shard. As Spark writes it, the index is a directory of Parquet part
// files and _SUCCESS: Spark skips files whose names start with "_", so it
// cannot read a single file of that name. Open reads either form.
//
// Create writes a dataset and Open reads one; both take options of one type,
// Option, each of which says whether it is for Create, for Open or for both
// (Separator).
//
// Samples are laid out in one of two modes, the second argument of Create:
//
//   - Batch: every BatchSize samples make one shard holding one tensor per
//     column, named after the column and shaped [n, sample shape...]; the
//     last shard holds the rest (TailWrite, the connector's default), is
//     dropped (TailDrop) or is padded with zero samples (TailPad), as
//     TailStrategy says. The
//     manifest's schema gives each column's dtype and the first shard's
//     shape, batch dimension included.
//   - KeyValue: each sample has a key and gives one tensor per column,
//     named key + separator + column ("user42__embedding"); a shard is
//     written once its samples reach a target size (TargetShardSizeMB). A
//     key given twice within a shard fails the dataset or replaces the
//     first sample (DuplicatesStrategy). A column without a
//     shape takes tensors whose shapes differ from key to key, through
//     WriteKVTensors. The manifest's schema has an entry per tensor, with
//     its shape, and a shard's sample count counts every sample given to
//     it, also one that a later sample with the same key replaced. The
//     separator is not recorded: Create and Open take it as an option
//     (Separator).
//
// Samples, which reads every value of a dataset, takes a context.Context,
// and stops once it is done.
//
// # Float encoding
//
// WriteFloat32s and WriteKVFloat32s encode F16 and BF16 exactly as the
// connector encodes float arrays (its dtype option), for every float32
// input: BF16 is the top 16 bits of the value after a round trip through a
// double, which quiets a signalling NaN (0x7f800001 gives 0x7fc0, not the
// infinity 0x7f80); F16 truncates toward zero, but every NaN becomes 0x7e00
// (0xfe00 with the sign), magnitudes below 2^-14 become a signed zero (no
// subnormals) and 65536 and above become infinity. The safetensors
// package's Truncate rounding gives the same BF16 bits (it quiets NaNs
// too), but differs for F16: it keeps subnormals and NaN payloads.
// The RoundToNearest option rounds to nearest even instead, as PyTorch and
// NumPy do.
//
// # Failures
//
// Every shard, the index and the manifest are written under a hidden
// temporary name and renamed into place, and Close writes the manifest
// last, so a dataset is complete once its manifest exists. A writer that
// fails or is aborted removes what it wrote. A writer killed (SIGKILL, a
// crash, a power loss) cannot: it leaves, in the dataset's directory,
// shards part-*.safetensors with no dataset_manifest.json, and hidden
// temporary files: .part-*.safetensors.tmp* (the shards of either mode),
// .tensor_index-spill.tmp*, .dataset_manifest.json.tmp* and a directory
// ._tensor_index.parquet.tmp*. The connector's reader reads every shard
// of a directory, listed in the manifest or not, so Create refuses a
// directory that holds any of these (ErrExists, naming them) rather than
// let another writer's shards pass for the new dataset's; remove them
// (ls -a shows them) or write elsewhere.
//
// Open refuses a FIFO or other special file as manifest, shard or index
// without blocking. Shards are mapped by the safetensors package, and
// Samples copies each sample out of its shard under
// safetensors.GuardFaults, so a shard truncated by another process while
// open gives an error wrapping ErrShardFault and safetensors.ErrFileChanged,
// named as the safetensors package names such a fault, not a crash. The
// tensors from Tensor and Batches are the mapped bytes themselves: touching
// them after such a truncation faults, as the safetensors package's
// tensors do, unless the code that touches them runs under
// safetensors.GuardFaults too. ReadOptions(safetensors.ReadAll()) reads
// shards into memory instead of mapping them.
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
	// ErrInvalidColumns is returned by Create for a mode and columns that
	// cannot make a dataset: an unknown mode, no or duplicate columns, an
	// unknown dtype, a batch whose shard would be too large for the
	// connector. An option out of range, given to Open when it is one of
	// Create or the other way round, or one of the other mode, gives an
	// error wrapping safetensors.ErrInvalidOption instead.
	ErrInvalidColumns = errors.New("dataset: invalid mode or columns")

	// ErrWrongMode is returned by Batches for a key-value dataset.
	ErrWrongMode = errors.New("dataset: not for this dataset's mode")

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

	// ErrShardFault is returned by Samples, naming the shard, the sample
	// and the tensor, when copying a sample out of a mapped shard faults
	// because another process truncated the file while it was mapped. The
	// error wraps safetensors.ErrFileChanged too, whose text gives the
	// file and the offset of the missing bytes, as the safetensors
	// package's own functions report such a fault.
	ErrShardFault = errors.New("dataset: a mapped shard could not be read")
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
//
// Shape nil means that the column gives no shape. In Batch mode, which
// stacks samples, and for WriteKV and WriteKVFloat32s, whose values carry
// no shape, such a column holds scalars. In KeyValue mode, WriteKVTensors
// takes a tensor of any shape for it, so that its shape may differ from
// key to key, as in the connector. A column whose Shape is not nil takes
// that shape only; []uint64{} is a scalar.
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
	// Schema is the schema as the connector writes it. In Batch mode it
	// has an entry for each column, with its dtype and the first shard's
	// shape, batch dimension included ("image": [4, 3, 224, 224] for
	// shards of 4 samples). In KeyValue mode it has an entry for each
	// tensor, named key + separator + column ("user42__embedding"), with
	// its dtype and shape. An empty dataset has an empty schema. Older
	// versions of this package wrote each column's shape of one sample,
	// without the batch dimension; Open accepts that too.
	Schema map[string]ColumnSchema `json:"schema"`
}

// Shard is a shard's entry in the manifest.
type Shard struct {
	Path    string `json:"shard_path"` // relative to the dataset's directory
	Samples int64  `json:"samples_count"`
	Bytes   int64  `json:"bytes"` // the file's size
}

// ColumnSchema is an entry of the manifest's schema: the dtype and shape of
// a Batch column's tensors in the first shard, or of one KeyValue tensor
// (see Manifest.Schema).
type ColumnSchema struct {
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// The versions a manifest carries.
const (
	FormatVersion      = "1.0"
	SafetensorsVersion = "1.0"
)
