package dataset

import (
	"fmt"
	"math"
	"slices"

	"github.com/safetensors-go/safetensors"
)

// An Option changes how Create writes a dataset or how Open reads one.
// Each option's doc says which of the two takes it (Separator both);
// given to the other, or to Create in a mode it is not for, it makes the
// call fail with an error wrapping safetensors.ErrInvalidOption. So does a value out
// of range.
type Option func(*config) error

// scope is where an option applies: Open, Create in Batch mode, Create in
// KeyValue mode.
type scope uint8

const (
	forOpen scope = 1 << iota
	forBatch
	forKeyValue
	forCreate = forBatch | forKeyValue
)

// given is an option that was given, for the checks of Create and Open.
type given struct {
	name  string
	scope scope
}

// config is what the options set, for Create and Open.
type config struct {
	given []given

	// Create and Open.
	sep      string // "__" unless Separator was given
	sepGiven bool

	// Open.
	colNames []string
	readOpts []safetensors.ReadOption

	// Create; mode and columns are its arguments.
	mode           Mode
	columns        []Column
	batchSize      int
	tail           Tail
	targetMB       int // TargetShardSizeMB
	duplicates     Duplicates
	index          bool
	roundToNearest bool
	taskID         int
}

// newConfig applies opts for the function fn ("Create" or "Open"), in
// the given scope: an option for another fails.
func newConfig(fn string, sc scope, opts []Option) (*config, error) {
	c := &config{sep: "__", targetMB: 300}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", safetensors.ErrInvalidOption, fn, err)
		}
	}
	for _, g := range c.given {
		if g.scope&sc != 0 {
			continue
		}
		switch {
		case g.scope&forOpen == 0 && sc == forOpen:
			return nil, fmt.Errorf("%w: %s is an option of Create, not of Open", safetensors.ErrInvalidOption, g.name)
		case g.scope&forCreate == 0:
			return nil, fmt.Errorf("%w: %s is an option of Open, not of Create", safetensors.ErrInvalidOption, g.name)
		case sc == forBatch:
			return nil, fmt.Errorf("%w: Create: %s is for key-value mode", safetensors.ErrInvalidOption, g.name)
		default:
			return nil, fmt.Errorf("%w: Create: %s is for batch mode; key-value mode rolls shards over by size", safetensors.ErrInvalidOption, g.name)
		}
	}
	return c, nil
}

// option returns an Option named name, for the given scope, that calls
// set.
func option(name string, sc scope, set func(*config) error) Option {
	return func(c *config) error {
		c.given = append(c.given, given{name: name, scope: sc})
		return set(c)
	}
}

// Separator sets the separator between key and column in the tensor names
// of a key-value dataset, for Create and Open: "__", the connector's
// default, when not given; any other string, the empty one included (the
// connector's kv_separator ""), joins key and column with it.
//
// The manifest does not record it, so Open must be given the separator
// the writer chose. With the empty separator, a name alone cannot tell
// the key from the column: give Open the columns with Columns, or each
// tensor is read as a sample of its own, keyed by its full name, with one
// column named "". A dataset whose shards both modes could have written
// (a key-value dataset of one key, whose tensors' first dimension is its
// sample count) is read as key-value when Separator or Columns is given,
// as batch otherwise.
func Separator(sep string) Option {
	return option("Separator", forOpen|forKeyValue, func(c *config) error {
		c.sep, c.sepGiven = sep, true
		return nil
	})
}

// Columns, for Open, names the columns of a key-value dataset, so that a
// tensor name is split as key + separator + the longest column that ends
// it, rather than at the last separator. It is needed with the empty
// separator, and where a column's name holds the separator. (Create takes
// its columns as an argument.)
func Columns(names ...string) Option {
	names = slices.Clone(names)
	return option("Columns", forOpen, func(c *config) error {
		c.colNames = append(c.colNames, names...)
		return nil
	})
}

// ReadOptions, for Open, passes options of the safetensors package to the
// opening of every shard: safetensors.ReadAll reads shards into memory
// rather than mapping them, so that tensors stay valid after Close and a
// shard truncated by another process cannot fault.
func ReadOptions(opts ...safetensors.ReadOption) Option {
	opts = slices.Clone(opts)
	return option("ReadOptions", forOpen, func(c *config) error {
		c.readOpts = append(c.readOpts, opts...)
		return nil
	})
}

// BatchSize, for Create in Batch mode, which needs it, sets how many
// samples make a shard: at least 1, and few enough that a shard stays
// under 2 GiB, which the connector's reader needs.
func BatchSize(n int) Option {
	return option("BatchSize", forBatch, func(c *config) error {
		if n < 1 {
			return fmt.Errorf("BatchSize %d is less than 1", n)
		}
		c.batchSize = n
		return nil
	})
}

// TailStrategy, for Create in Batch mode, sets what is done with the last
// samples when they are fewer than the batch size: TailWrite when not
// given, as the connector's tail_strategy.
func TailStrategy(t Tail) Option {
	return option("TailStrategy", forBatch, func(c *config) error {
		if t < TailWrite || t > TailPad {
			return fmt.Errorf("unknown Tail %d", t)
		}
		c.tail = t
		return nil
	})
}

// TargetShardSizeMB, for Create in KeyValue mode, sets the size at which a
// shard is written, in MiB, from 50 to 1000: 300 when not given, as the
// connector's target_shard_size_mb.
func TargetShardSizeMB(n int) Option {
	return option("TargetShardSizeMB", forKeyValue, func(c *config) error {
		if n < 50 || n > 1000 {
			return fmt.Errorf("TargetShardSizeMB %d is not from 50 to 1000", n)
		}
		c.targetMB = n
		return nil
	})
}

// DuplicatesStrategy, for Create in KeyValue mode, sets what is done with
// a key given twice within a shard: DuplicatesFail when not given, as the
// connector's duplicatesStrategy.
func DuplicatesStrategy(d Duplicates) Option {
	return option("DuplicatesStrategy", forKeyValue, func(c *config) error {
		if d < DuplicatesFail || d > DuplicatesLastWins {
			return fmt.Errorf("unknown Duplicates %d", d)
		}
		c.duplicates = d
		return nil
	})
}

// TensorIndex, for Create, makes Close write _tensor_index.parquet as
// Spark writes it: a directory of one Parquet part file and _SUCCESS,
// with each tensor's key, shard, shape and dtype. An empty dataset gets no
// index, as from the connector.
func TensorIndex() Option {
	return option("TensorIndex", forCreate, func(c *config) error {
		c.index = true
		return nil
	})
}

// RoundToNearest, for Create, makes WriteFloat32s and WriteKVFloat32s
// round to nearest even when they encode F16 and BF16, as PyTorch and
// NumPy do, instead of encoding as the connector does.
func RoundToNearest() Option {
	return option("RoundToNearest", forCreate, func(c *config) error {
		c.roundToNearest = true
		return nil
	})
}

// TaskID, for Create, sets the first number in the shards' names, from 0
// (when not given) to 99999, so that writers of the same dataset from
// several processes do not pick the same names; the manifest of each
// lists only its own shards.
func TaskID(n int) Option {
	return option("TaskID", forCreate, func(c *config) error {
		if n < 0 || n > 99999 {
			return fmt.Errorf("TaskID %d is not from 0 to 99999", n)
		}
		c.taskID = n
		return nil
	})
}

// Limits on what a shard may hold: the connector's reader refuses shards
// of 2 GiB or more.
const (
	maxShardSize    = math.MaxInt32 // bytes, the header included
	maxKVSampleSize = 512 << 20     // a key-value sample's bytes
)

// createConfig applies the options of Create for a dataset of the given
// mode and columns, which it copies, and checks them together.
func createConfig(mode Mode, columns []Column, opts []Option) (*config, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Create: %s", safetensors.ErrInvalidOption, fmt.Sprintf(format, args...))
	}
	badColumns := func(format string, args ...any) error {
		return fmt.Errorf("%w: Create: %s", ErrInvalidColumns, fmt.Sprintf(format, args...))
	}
	var sc scope
	switch mode {
	case Batch:
		sc = forBatch
	case KeyValue:
		sc = forKeyValue
	default:
		return nil, badColumns("mode must be Batch or KeyValue, not %v", mode)
	}
	c, err := newConfig("Create", sc, opts)
	if err != nil {
		return nil, err
	}
	c.mode = mode
	c.columns = slices.Clone(columns)
	for i := range c.columns {
		c.columns[i].Shape = slices.Clone(c.columns[i].Shape) // nil stays nil: no shape
	}
	if mode == Batch && c.batchSize == 0 {
		return nil, bad("batch mode needs BatchSize")
	}
	if len(c.columns) == 0 {
		return nil, badColumns("no columns")
	}
	seen := make(map[string]bool)
	var sample uint64
	for _, col := range c.columns {
		switch {
		case col.Name == "":
			return nil, badColumns("a column has no name")
		case seen[col.Name]:
			return nil, badColumns("column %q is given twice", col.Name)
		case !sparkDType(col.DType):
			return nil, badColumns("column %q: the connector does not read dtype %v", col.Name, col.DType)
		}
		seen[col.Name] = true
		n := uint64(col.DType.Bits() / 8)
		for _, d := range col.Shape {
			if d > math.MaxInt32 {
				return nil, badColumns("column %q: dimension %d does not fit the connector's int shapes", col.Name, d)
			}
			if d != 0 && n > maxShardSize/d {
				return nil, badColumns("column %q: a sample of shape %v is larger than 2 GiB", col.Name, col.Shape)
			}
			n *= d
		}
		sample += n
	}
	switch {
	case mode == Batch && sample > 0 && uint64(c.batchSize) > maxShardSize/sample:
		return nil, bad("a batch of %d samples of %d bytes makes a shard of 2 GiB or more, which the connector cannot read", c.batchSize, sample)
	case mode == KeyValue && sample > maxKVSampleSize:
		return nil, badColumns("a sample of %d bytes is larger than %d", sample, maxKVSampleSize)
	}
	return c, nil
}
