// Package checkpoint opens and writes models as the libraries that save
// safetensors lay them out: one file, or shards and their index; a model's
// folder as transformers, diffusers, timm, peft, sentence-transformers and
// open_clip save it, with variants (fp16, bf16); a model of several parts
// (a diffusers pipeline, a sentence-transformers model with modules in
// subfolders); a snapshot of the Hugging Face cache; on disk or over HTTP.
//
// [Open] finds a model from a path or a URL as its library's
// from_pretrained does, through one code path for every place: a folder
// on disk and a folder over HTTP (the remote package reads its files with
// range requests) differ only in how a file is read. It returns a
// [Checkpoint], the one type of a model's weights: its tensors as one set
// (Names, Tensor, TensorContext, TensorReader), its files (Files, Header,
// File, Index), the metadata of the model (Metadata) and of its index
// (IndexMetadata), its parts (Parts), and the other files of its folder,
// such as config.json (ReadFile). A Checkpoint is a
// safetensors.TensorSource, which the check and diff packages read, and a
// load.Source, which the load package's Loader loads.
//
// [Load] reads a whole model into memory in one call. [Create] and
// [Write] write a checkpoint as transformers and diffusers write theirs,
// shards and index, replacing one already in the folder so that the
// folder holds a complete checkpoint at every instant. Options
// ([Variant], [Strict], [ReadOptions], [HTTPClient], [RemoteOptions] for
// opening; [MaxShardSize], [BaseName], [FileMetadata], [WriteOptions] for
// writing) change the defaults.
//
// Errors wrap [ErrNoModel] for a folder that holds no model the package
// can find, [ErrInvalidIndex] for an index that is not what the libraries
// write or that disagrees with its shards, and [ErrUnlistedTensor] under
// Strict; and what reading the files gave (the safetensors package's
// sentinels, fs.ErrNotExist, the remote package's).
package checkpoint
