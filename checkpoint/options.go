package checkpoint

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
)

// An Option changes how a checkpoint is opened (Open, Load), written
// (Create, Write) or converted (Convert, which opens one and writes
// another). Each option says which calls take it; given to another, it
// makes the call return an error wrapping safetensors.ErrInvalidOption.
type Option func(*options) error

// op is the kind of call options are given to, or a set of kinds.
type op int

const (
	opOpen    op = 1 << iota // Open, Load
	opWrite                  // Create, Write
	opConvert                // Convert

	opRead = opOpen | opConvert // the calls that open a checkpoint
)

type options struct {
	op op

	variant string
	strict  bool
	read    []safetensors.ReadOption
	client  *http.Client
	remote  []remote.Option

	maxShardSize int64
	shardSizeSet bool // MaxShardSize was given
	shards       int  // the number of shards Shards asks for, or 0
	base         string
	fileMeta     map[string]string
	write        []safetensors.WriteOption

	rounding   safetensors.Rounding
	progress   func(done, total uint64)
	dequantize bool
}

// DefaultMaxShardSize is the largest a shard grows by default when
// writing, as transformers 5's save_pretrained: 50 GB.
const DefaultMaxShardSize = 50_000_000_000

func newOptions(kind op, opts []Option) (*options, error) {
	o := &options{op: kind, maxShardSize: DefaultMaxShardSize, base: "model"}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if o.strict {
		o.read = append(o.read, safetensors.Strict())
	}
	return o, nil
}

// only returns an error for an option given to a call that does not take
// it: one of the kinds.
func (o *options) only(name string, kinds op) error {
	if o.op&kinds != 0 {
		return nil
	}
	var calls []string
	for _, k := range []struct {
		op    op
		calls []string
	}{{opOpen, []string{"Open", "Load"}}, {opWrite, []string{"Create", "Write"}}, {opConvert, []string{"Convert"}}} {
		if kinds&k.op != 0 {
			calls = append(calls, k.calls...)
		}
	}
	list := calls[len(calls)-1]
	if len(calls) > 1 {
		list = strings.Join(calls[:len(calls)-1], ", ") + " and " + list
	}
	return fmt.Errorf("%w: %s applies to %s only", safetensors.ErrInvalidOption, name, list)
}

// Variant returns an option that selects the variant of a model's files,
// such as "fp16" or "bf16": when opening, diffusion_pytorch_model.fp16.safetensors
// rather than diffusion_pytorch_model.safetensors, model.safetensors.index.fp16.json
// rather than model.safetensors.index.json, as the libraries' from_pretrained(variant=...)
// reads them; in a model of several parts, each part's files of the
// variant, or the part's files of no variant where it has none of the
// variant, as diffusers does, and an error wrapping ErrNoModel where no
// part has it. When writing, it names the files so. Without it, Open reads
// the files of no variant, and fails with an error that lists the
// variants where there are only files of variants. The variant is a name
// of letters, digits, '_' and '-'. Open, Load, Convert, Create and Write
// take it.
func Variant(name string) Option {
	return func(o *options) error {
		if !validVariant(name) {
			return fmt.Errorf("%w: Variant(%q): a variant is a name of letters, digits, '_' and '-'", safetensors.ErrInvalidOption, name)
		}
		o.variant = name
		return nil
	}
}

// validVariant reports whether v may name a variant.
func validVariant(v string) bool {
	return v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
}

// Strict returns an option that reads every file with safetensors.Strict
// and also refuses a checkpoint whose shards hold tensors that its index
// does not list, with an error wrapping ErrUnlistedTensor; without it,
// such tensors are left out, as loaders leave them out, and Unlisted names
// them. Open, Load and Convert take it.
func Strict() Option {
	return func(o *options) error {
		o.strict = true
		return o.only("Strict", opRead)
	}
}

// ReadOptions returns an option that opens every file of the checkpoint
// with the given options, such as safetensors.ReadAll() or
// safetensors.ReadInto(buf), whose buffer the files then share, each data
// section after the other. Use Strict rather than safetensors.Strict,
// which would apply to the files alone. Open, Load and Convert take it.
func ReadOptions(opts ...safetensors.ReadOption) Option {
	return func(o *options) error {
		o.read = append(o.read, opts...)
		return o.only("ReadOptions", opRead)
	}
}

// HTTPClient returns an option that reads a checkpoint given by a URL with
// the client c rather than remote.DefaultClient. Open, Load and Convert
// take it.
func HTTPClient(c *http.Client) Option {
	return func(o *options) error {
		o.client = c
		return o.only("HTTPClient", opRead)
	}
}

// RemoteOptions returns an option that reads a checkpoint given by a URL
// with the remote package's options, such as remote.RequestHeader for a token,
// remote.Retries or remote.StallTimeout. Open, Load and Convert take it.
func RemoteOptions(opts ...remote.Option) Option {
	return func(o *options) error {
		o.remote = append(o.remote, opts...)
		return o.only("RemoteOptions", opRead)
	}
}

// MaxShardSize returns an option that sets the most bytes of tensor data
// a shard holds when writing (DefaultMaxShardSize by default): n must be
// positive. Create and Write take it.
func MaxShardSize(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: MaxShardSize(%d): the size must be positive", safetensors.ErrInvalidOption, n)
		}
		o.maxShardSize, o.shardSizeSet = n, true
		return o.only("MaxShardSize", opWrite)
	}
}

// Shards returns an option that writes the tensors in exactly n shards,
// rather than in shards of at most MaxShardSize bytes: the tensors are kept
// whole and in the order given, and split where the largest shard's bytes
// of tensor data are the fewest possible (balanced by bytes, not by the
// number of tensors). n must be positive, and Create and Write fail with
// an error wrapping safetensors.ErrInvalidOption when there are fewer
// tensors than shards or the option is given with MaxShardSize. Shards(1)
// writes a single file with no index, as a checkpoint that fits in one
// shard is written. Create and Write take it.
func Shards(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: Shards(%d): the number must be positive", safetensors.ErrInvalidOption, n)
		}
		o.shards = n
		return o.only("Shards", opWrite)
	}
}

// BaseName returns an option that sets the base name of the files written
// ("model" by default, as transformers names them;
// "diffusion_pytorch_model" for diffusers): base.safetensors, or
// base-00001-of-00003.safetensors and base.safetensors.index.json. It must
// be a file name. Create and Write take it.
func BaseName(base string) Option {
	return func(o *options) error {
		if base == "" || base == "." || base == ".." || strings.ContainsAny(base, `/\`) || !localName(base) {
			return fmt.Errorf("%w: BaseName(%q): not a file name", safetensors.ErrInvalidOption, base)
		}
		o.base = base
		return o.only("BaseName", opWrite)
	}
}

// FileMetadata returns an option that writes metadata, such as
// {"format": "pt"}, into the header of every file written. Create and
// Write take it.
func FileMetadata(m map[string]string) Option {
	return func(o *options) error {
		o.fileMeta = m
		return o.only("FileMetadata", opWrite)
	}
}

// WriteOptions returns an option that writes every file with the given
// options, such as safetensors.Alignment(64). Create and Write take it.
func WriteOptions(opts ...safetensors.WriteOption) Option {
	return func(o *options) error {
		o.write = append(o.write, opts...)
		return o.only("WriteOptions", opWrite)
	}
}

// Rounding returns an option that sets how Convert rounds values to F16
// or BF16: safetensors.RoundNearestEven (the default, as PyTorch does) or
// safetensors.Truncate. Convert takes it.
func Rounding(r safetensors.Rounding) Option {
	return func(o *options) error {
		if r != safetensors.RoundNearestEven && r != safetensors.Truncate {
			return fmt.Errorf("%w: Rounding(%v): not a rounding", safetensors.ErrInvalidOption, r)
		}
		o.rounding = r
		return o.only("Rounding", opConvert)
	}
}

// Progress returns an option that makes Convert call f as it goes, with
// the bytes of tensor data read so far and in all, from the goroutine
// that called Convert. Convert takes it.
func Progress(f func(done, total uint64)) Option {
	return func(o *options) error {
		o.progress = f
		return o.only("Progress", opConvert)
	}
}
