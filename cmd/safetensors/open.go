package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/check"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/regular"
	"github.com/safetensors-go/safetensors/quant"
	"github.com/safetensors-go/safetensors/remote"
)

// modelsHelp is what 'safetensors help models' prints: what a MODEL may
// be, and how it is read.
const modelsHelp = `A MODEL, the input of every command but version, is any of these, found as the
library that saved it finds it:
  - a safetensors file;
  - a sharded checkpoint's index (model.safetensors.index.json, ...);
  - a model's folder as transformers, diffusers, timm, peft,
    sentence-transformers or open_clip save it, one file or shards;
  - a model of several parts, handled part by part, its tensors named behind
    their part's folder ("unet/conv_in.weight"): a diffusers pipeline
    (model_index.json; unet/, vae/, text_encoder/, ...) or a
    sentence-transformers model (modules.json; 2_Dense/, ...);
  - a Hugging Face cache snapshot (.../models--ORG--NAME/snapshots/REVISION),
    or the model's cache folder (.../models--ORG--NAME);
  - an http:// or https:// URL of any of these, such as
    https://huggingface.co/REPO/resolve/main for a repository's folder.

--variant NAME reads the files of a variant, such as fp16
(diffusion_pytorch_model.fp16.safetensors, model.safetensors.index.fp16.json);
without it, the files of no variant are read, and a folder that holds only
variants' files is an error that lists them.

Over HTTP, only the headers and the tensors needed are read, with range
requests, each checked and pinned to the version first seen; a request fails
after 30 s without progress, never because a read is long. The token in
HF_TOKEN goes to huggingface.co (or to the host of HF_ENDPOINT) as
"Authorization: Bearer TOKEN"; --header sends any header to every URL.
`

// variant is the --variant flag of the command being run.
var variant string

// addModelFlags adds the flags about opening a model to fs, --variant and
// --header, and starts the command with none given.
func addModelFlags(fs *flag.FlagSet) {
	requestHeaders, variant = nil, ""
	fs.StringVar(&variant, "variant", "", "read the files of the variant `NAME`, such as fp16 or bf16")
	fs.Var(&requestHeaders, "header", "send `'Name: value'` with every HTTP request (repeatable), such as 'Authorization: Bearer TOKEN'")
}

// checkpointOptions returns the options for opening name with the flags
// of the command line: --variant, and for a URL the --header flags and the
// Hugging Face token for the Hub. Every command opens its models with
// them: through openModel, or checkpoint.Convert and quant.WriteModel,
// which open the model themselves.
func checkpointOptions(name string) []checkpoint.Option {
	var opts []checkpoint.Option
	if variant != "" {
		opts = append(opts, checkpoint.Variant(variant))
	}
	if remote.IsURL(name) {
		opts = append(opts, checkpoint.RemoteOptions(remoteOptions(name)...))
	}
	return opts
}

// model is a model the command reads: a checkpoint, and how it was named.
type model struct {
	ck *checkpoint.Checkpoint
	// file is true for a checkpoint named by its one file (a path or URL
	// of a safetensors file), which is listed as a file rather than as a
	// checkpoint of one shard.
	file bool
	// warning says that the index leaves out tensors its shards hold, or
	// that parts of the model are in another format, not read.
	warning string
}

// openModel opens name, any input checkpoint.Open takes: a file, an index,
// a folder of any library's layout, a model of several parts, a Hugging
// Face cache snapshot, or a URL of any of these, with the options of the
// command line (see checkpointOptions). ctx governs its later reads over a
// network too.
func openModel(ctx context.Context, name string) (*model, error) {
	ck, err := checkpoint.Open(ctx, name, checkpointOptions(name)...)
	if err != nil {
		return nil, err
	}
	m := &model{ck: ck, file: strings.HasSuffix(name, ".safetensors") && len(ck.Files()) == 1 && ck.Index() == "" && ck.Parts() == nil}
	var warnings []string
	if w := unlistedWarning(ck.String(), ck.Unlisted()); w != "" && !m.file {
		warnings = append(warnings, w)
	}
	for _, s := range ck.Skipped() {
		warnings = append(warnings, "part "+s)
	}
	m.warning = strings.Join(warnings, "; ")
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
// name for a checkpoint (behind their parts' names for a model of several
// parts).
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

// Close closes m's files.
func (m *model) Close() error { return m.ck.Close() }

// partLabel returns the name by which the output names the part p of a
// model of several parts: its folder in the model's ("unet", "2_Dense"),
// or "." for a part in the model's own folder (a sentence-transformers
// model's transformer).
func partLabel(p *checkpoint.Checkpoint) string {
	if p.Part() == "" {
		return "."
	}
	return p.Part()
}

// partPrefix returns what the names of the tensors and files of the part p
// have in front in the model's: "unet/", or "" for a part in the model's
// own folder.
func partPrefix(p *checkpoint.Checkpoint) string {
	if p.Part() == "" {
		return ""
	}
	return p.Part() + "/"
}

// partNames returns the labels of parts, joined with commas.
func partNames(parts []*checkpoint.Checkpoint) string {
	labels := make([]string, len(parts))
	for i, p := range parts {
		labels[i] = partLabel(p)
	}
	return strings.Join(labels, ", ")
}

// invalid reports whether err says that the input breaks its format (a
// file, an index, a config.json) or holds values that make it unusable, as
// opposed to failing to be found or read: the difference between the exit
// statuses 1 and 2.
func invalid(err error) bool {
	for _, e := range []error{
		safetensors.ErrHeaderTooSmall, safetensors.ErrHeaderTooLarge, safetensors.ErrInvalidHeaderLength,
		safetensors.ErrHeaderNotUTF8, safetensors.ErrInvalidHeader, safetensors.ErrInvalidOffset,
		safetensors.ErrShapeOverflow, safetensors.ErrMisalignedSlice, safetensors.ErrSizeMismatch,
		safetensors.ErrIncompleteBuffer, safetensors.ErrUnknownDType, safetensors.ErrNotSafetensors,
		checkpoint.ErrInvalidIndex, checkpoint.ErrUnlistedTensor, check.ErrInvalidConfig, quant.ErrNotFinite,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// readRegular reads the named file, refusing anything but a regular file
// without blocking on a FIFO, as the library refuses one: with an error
// wrapping safetensors.ErrNotRegular.
func readRegular(path string) ([]byte, error) {
	return regular.ReadFile(regular.OpenFile, path)
}
