package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors/internal/filekind"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/remote"
)

// The files that make a folder a model of several parts.
const (
	// modelIndexFile is a diffusers pipeline's list of components.
	modelIndexFile = "model_index.json"
	// modulesFile is a sentence-transformers model's list of modules.
	modulesFile = "modules.json"
	// configFile is what every model's folder holds beside its weights, as
	// transformers' PreTrainedModel and diffusers' ModelMixin save it: a
	// pipeline component with one holds weights.
	configFile = "config.json"
)

// weightBases are the base names of the weight files that the libraries
// write, in the order Open looks for them: transformers, timm and
// sentence-transformers (model), diffusers (diffusion_pytorch_model), peft
// (adapter_model) and open_clip (open_clip_model). Each has a single file,
// base.safetensors, and a sharded form, base.safetensors.index.json, that
// the library looks for after it.
var weightBases = []string{"model", "diffusion_pytorch_model", "adapter_model", "open_clip_model"}

// fileName returns the name of the single weight file of base, with the
// variant's name before the extension, as transformers' and diffusers'
// _add_variant put it: model.safetensors, model.fp16.safetensors.
func fileName(base, variant string) string {
	if variant == "" {
		return base + ".safetensors"
	}
	return base + "." + variant + ".safetensors"
}

// indexName returns the name of the index of base's sharded form, with the
// variant's name before the extension: model.safetensors.index.json,
// model.safetensors.index.fp16.json.
func indexName(base, variant string) string {
	if variant == "" {
		return base + ".safetensors.index.json"
	}
	return base + ".safetensors.index." + variant + ".json"
}

// shardName returns the name of shard i of n of base with the variant, as
// the libraries name shards: model-00001-of-00003.safetensors,
// model.fp16-00001-of-00003.safetensors.
func shardName(base, variant string, i, n int) string {
	stem := strings.TrimSuffix(fileName(base, variant), ".safetensors")
	return fmt.Sprintf("%s-%05d-of-%05d.safetensors", stem, i, n)
}

// variantOf returns the variant a weight file's name gives:
// "fp16" for diffusion_pytorch_model.fp16.safetensors, for the shard
// model.fp16-00001-of-00002.safetensors and for diffusers' legacy shard
// diffusion_pytorch_model-00001-of-00002.fp16.safetensors; "" for a name
// of no variant, or of no library's base name.
func variantOf(name string) string {
	stem, ok := strings.CutSuffix(name, ".safetensors")
	if !ok {
		return ""
	}
	// diffusers' legacy shards: base-00001-of-00002.fp16.safetensors.
	if i := strings.LastIndexByte(stem, '.'); i > 0 && len(stem[:i]) > 15 && isShardSuffix(stem[i-14:i]) && stem[i-15] == '-' {
		if base := stem[:i-15]; slices.Contains(weightBases, base) && validVariant(stem[i+1:]) {
			return stem[i+1:]
		}
	}
	if n := len("-00001-of-00002"); len(stem) > n && stem[len(stem)-n] == '-' && isShardSuffix(stem[len(stem)-n+1:]) {
		stem = stem[:len(stem)-n]
	}
	base, v, ok := strings.Cut(stem, ".")
	if !ok || !slices.Contains(weightBases, base) || !validVariant(v) {
		return ""
	}
	return v
}

// isShardSuffix reports whether s is "00001-of-00002" or the like.
func isShardSuffix(s string) bool {
	i, of, ok := strings.Cut(s, "-of-")
	digits := func(s string) bool { return len(s) == 5 && strings.Trim(s, "0123456789") == "" }
	return ok && digits(i) && digits(of)
}

// indexVariant returns the variant an index's name gives: "fp16" for
// model.safetensors.index.fp16.json and for diffusers' legacy
// diffusion_pytorch_model.safetensors.fp16.index.json, "" otherwise.
func indexVariant(name string) string {
	_, rest, ok := strings.Cut(name, ".safetensors.index.")
	if !ok {
		// diffusers' legacy form: base.safetensors.fp16.index.json.
		_, rest, _ = strings.Cut(name, ".safetensors.") // "" without it: no suffix
		if rest, ok = strings.CutSuffix(rest, ".index.json"); !ok || !validVariant(rest) {
			return ""
		}
		return rest
	}
	v, ok := strings.CutSuffix(rest, ".json")
	if !ok || !validVariant(v) {
		return ""
	}
	return v
}

// openFolder opens the model in the folder dir: a pipeline, a
// sentence-transformers model, or the weights of one model.
func openFolder(ctx context.Context, d folder, o *options) (*Checkpoint, error) {
	dir := remember(d)
	// Over HTTP, asking for the three at once saves two round trips.
	dir.prefetch(ctx, modelIndexFile, modulesFile, configFile)
	if data, err := dir.read(ctx, modelIndexFile); err == nil {
		return openPipeline(ctx, dir, data, o)
	} else if !notExist(err) {
		return nil, err
	}
	if data, err := dir.read(ctx, modulesFile); err == nil {
		return openModules(ctx, dir, data, o)
	} else if !notExist(err) {
		return nil, err
	}
	c, err := openWeights(ctx, dir, o, o.variant)
	if err != nil || len(c.files) != 1 || c.files[0].name != fileName(peftBase, "") {
		return c, err
	}
	return openAdapters(ctx, dir, c, o)
}

// peftBase is the base name of peft's weight files.
const peftBase = "adapter_model"

// openAdapters returns the adapters that peft's save_pretrained writes
// beside its default one, c, in a folder on disk: each adapter but the
// default in a subfolder named after it, with its adapter_config.json. A
// folder with such subfolders is a model of several parts, the default
// adapter in the folder itself and the others in theirs; over HTTP, where
// a folder cannot be listed, the default adapter alone.
func openAdapters(ctx context.Context, dir folder, c *Checkpoint, o *options) (*Checkpoint, error) {
	subs, err := dir.dirs()
	if err != nil {
		return c, nil
	}
	parts := []*Checkpoint{c}
	for _, name := range subs {
		sub := dir.sub(name)
		if !sub.exists(ctx, "adapter_config.json") || !sub.exists(ctx, fileName(peftBase, "")) {
			continue
		}
		f, err := sub.open(ctx, fileName(peftBase, ""), o)
		if err != nil {
			return nil, closeAll(parts, err)
		}
		p := single(sub, f, "")
		p.part = name
		parts = append(parts, p)
	}
	if len(parts) == 1 {
		return c, nil
	}
	return joinParts(dir, parts, nil, o)
}

// openWeights opens the weights of one model in dir, of the variant ("" for
// none), as the libraries look for them; see Open.
func openWeights(ctx context.Context, dir folder, o *options, variant string) (*Checkpoint, error) {
	if c, err := openDistributed(ctx, dir, o); c != nil || err != nil {
		return c, err
	}
	if c, err := openNamedInConfig(ctx, dir, o); c != nil || err != nil {
		return c, err
	}
	var tried []string
	var missing error // the last answer that a file is not there
	for _, base := range weightBases {
		name := fileName(base, variant)
		f, err := dir.open(ctx, name, o)
		if err == nil {
			return single(dir, f, variant), nil
		}
		if !notExist(err) {
			return nil, err
		}
		missing = err
		indexes := []string{indexName(base, variant)}
		if variant != "" && base == diffusersBase {
			indexes = append(indexes, legacyIndexName(base, variant))
		}
		for _, index := range indexes {
			data, err := dir.read(ctx, index)
			if err == nil {
				return openSharded(ctx, dir, index, data, o)
			}
			if !notExist(err) {
				return nil, err
			}
			missing = err
		}
		tried = append(tried, name)
		tried = append(tried, indexes...)
	}
	return openListed(ctx, dir, o, variant, tried, missing)
}

// diffusersBase is the base name of diffusers' weight files.
const diffusersBase = "diffusion_pytorch_model"

// legacyIndexName returns the name that diffusers before 0.28 gave the
// index of a variant's shards, and still reads (with a deprecation
// warning): diffusion_pytorch_model.safetensors.fp16.index.json, whose
// shards are named diffusion_pytorch_model-00001-of-00002.fp16.safetensors.
func legacyIndexName(base, variant string) string {
	return base + ".safetensors." + variant + ".index.json"
}

// openNamedInConfig opens the weight file that config.json names in its
// "transformers_weights", which transformers' from_pretrained reads before
// any other (whatever the variant): a safetensors file, or an index, in
// the folder. It returns nil and no error where config.json names none.
func openNamedInConfig(ctx context.Context, dir folder, o *options) (*Checkpoint, error) {
	data, err := dir.read(ctx, configFile)
	if err != nil {
		return nil, nil // no config.json: no name in it
	}
	var cfg struct {
		Weights *string `json:"transformers_weights"`
	}
	if json.Unmarshal(data, &cfg) != nil || cfg.Weights == nil {
		return nil, nil
	}
	name := *cfg.Weights
	switch {
	case !localName(name):
		return nil, fmt.Errorf("%w: %s: transformers_weights %q is not a file inside the model's folder", ErrNoModel, dir.path(configFile), name)
	case strings.HasSuffix(name, ".safetensors.index.json"):
		data, err := dir.read(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s: transformers_weights %q: %w", dir.path(configFile), name, err)
		}
		return openSharded(ctx, dir, name, data, o)
	case strings.HasSuffix(name, ".safetensors"):
		f, err := dir.open(ctx, name, o)
		if err != nil {
			return nil, fmt.Errorf("%s: transformers_weights %q: %w", dir.path(configFile), name, err)
		}
		return single(dir, f, ""), nil
	}
	return nil, nil // a pickle (adapter_model.bin): not ours to read
}

// isDistributedShard reports whether name is a shard of a distributed
// checkpoint, as transformers 5's distributed/checkpoint.py names them:
// shard-00001-model-00001-of-00002.safetensors.
func isDistributedShard(name string) bool {
	rest, ok := strings.CutPrefix(name, "shard-")
	if !ok || len(rest) < 6 || rest[5] != '-' || strings.Trim(rest[:5], "0123456789") != "" {
		return false
	}
	rest, ok = strings.CutPrefix(rest[6:], "model-")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".safetensors")
	return ok && isShardSuffix(rest)
}

// openDistributed opens a distributed checkpoint in a folder on disk: as
// transformers does before looking for any other file, where one file is
// named like shard-00001-model-00001-of-00002.safetensors, every
// *.safetensors file of the folder is a shard, with no index. It returns
// nil and no error for any other folder.
func openDistributed(ctx context.Context, dir folder, o *options) (*Checkpoint, error) {
	names, err := dir.list()
	if err != nil || !slices.ContainsFunc(names, isDistributedShard) {
		return nil, nil
	}
	var shards []string
	for _, n := range names {
		if strings.HasSuffix(n, ".safetensors") {
			shards = append(shards, n)
		}
	}
	slices.Sort(shards)
	files, _, err := openFiles(ctx, dir, shards, o)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{dir: dir, files: files, owner: true}
	fail := func(err error) (*Checkpoint, error) {
		closeFiles(c.files)
		return nil, err
	}
	c.where = map[string]loc{}
	for i, f := range c.files {
		for _, t := range f.r.Header().Tensors {
			if l, dup := c.where[t.Name]; dup {
				return fail(fmt.Errorf("%w: %s: the tensor %q is in two shards of a distributed checkpoint, %s and %s", ErrNoModel, dir.path(""), t.Name, c.files[l.file].name, f.name))
			}
			c.where[t.Name] = loc{file: i, name: t.Name}
		}
	}
	c.names = slices.Sorted(maps.Keys(c.where))
	return c, nil
}

// openListed opens, failing the libraries' names, the one index or the
// one safetensors file of the variant that a folder on disk lists. tried
// are the names looked for, and missing the last answer that one is not
// there.
func openListed(ctx context.Context, dir folder, o *options, variant string, tried []string, missing error) (*Checkpoint, error) {
	names, err := dir.list()
	if errors.Is(err, errNoList) {
		return nil, fmt.Errorf("%w: %s%s: none of %s%s", ErrNoModel, dir.path(""), foreignNote(ctx, dir), strings.Join(tried, ", "), missingNote(dir, missing))
	}
	if err != nil {
		return nil, err
	}
	var indexes, files []string
	variants := map[string][]string{} // variant → its files
	all := map[string]bool{}
	for _, n := range names {
		all[n] = true
	}
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".json") && (strings.Contains(n, ".safetensors.index") || indexVariant(n) != ""):
			v := indexVariant(n)
			if v != "" {
				variants[v] = append(variants[v], n)
			}
			if v == variant && (variant != "" || strings.HasSuffix(n, ".safetensors.index.json")) {
				indexes = append(indexes, n)
			}
		case strings.HasSuffix(n, ".safetensors"):
			v := listedVariant(n, all)
			if v != "" {
				variants[v] = append(variants[v], n)
			}
			if v == variant {
				files = append(files, n)
			}
		}
	}
	for v, fs := range variants {
		if v != variant && len(fs) > 0 {
			continue
		}
		delete(variants, v)
	}
	switch {
	case len(indexes) == 1:
		data, err := dir.read(ctx, indexes[0])
		if err != nil {
			return nil, err
		}
		return openSharded(ctx, dir, indexes[0], data, o)
	case len(indexes) > 1:
		return nil, fmt.Errorf("%w: %s: %d index files (%s), and none named as a library names its own: open one of them", ErrNoModel, dir.path(""), len(indexes), strings.Join(indexes, ", "))
	case len(files) == 1:
		f, err := dir.open(ctx, files[0], o)
		if err != nil {
			return nil, err
		}
		return single(dir, f, variant), nil
	case len(files) > 1:
		return nil, fmt.Errorf("%w: %s: %d safetensors files (%s), and none named as a library names its own: open one of them", ErrNoModel, dir.path(""), len(files), strings.Join(files, ", "))
	}
	what := "no weights"
	if variant != "" {
		what = fmt.Sprintf("no files of the variant %q", variant)
	}
	msg := fmt.Sprintf("%s: %s%s: none of %s, nor any *.safetensors file", dir.path(""), what, foreignNote(ctx, dir), strings.Join(tried, ", "))
	if len(variants) > 0 {
		var vs []string
		for _, v := range slices.Sorted(maps.Keys(variants)) {
			vs = append(vs, fmt.Sprintf("%s (%s)", v, strings.Join(variants[v], ", ")))
		}
		msg += "; there are files of the variants " + strings.Join(vs, "; ") + ": choose one with Variant (the command's --variant)"
	}
	return nil, fmt.Errorf("%w: %s", ErrNoModel, msg)
}

// missingNote returns what an error about the names looked for in the
// folder dir over HTTP, which it does not have, says of missing, the last
// answer that one was not there: the server's status and message, and for
// the URL of the web page of a repository's folder (the Hugging Face Hub's
// .../tree/REVISION), the folder's own URL.
func missingNote(dir folder, missing error) string {
	var note string
	var se *remote.StatusError
	if errors.As(missing, &se) {
		note = "; the server answered " + se.Status
		if se.Body != "" {
			note += ", saying: " + se.Body
		}
	}
	if u := filekind.ResolveURL(dir.path("")); u != "" {
		note += "; " + dir.path("") + " is the URL of a web page: use the resolve/ form, " + u
	}
	return note
}

// webPage returns what an error about the file at path, which holds data,
// says of it when it is a web page rather than the file, such as the
// Hugging Face Hub's page of the file; otherwise "".
func webPage(path string, data []byte) string {
	if filekind.Of(data) != filekind.HTML {
		return ""
	}
	const msg = "a web page (HTML), not the file"
	if u := filekind.ResolveURL(path); u != "" {
		return msg + ": use the resolve/ form of its URL, " + u
	}
	if remote.IsURL(path) {
		return msg + ": for the Hugging Face Hub, use the resolve/ form of its URL, https://huggingface.co/REPO/resolve/REVISION/FILE"
	}
	return msg
}

// foreignNote returns what an error says of the weights in other formats
// in dir, if any, for a folder that holds no safetensors weights.
func foreignNote(ctx context.Context, dir folder) string {
	foreign := foreignWeights(ctx, dir, true)
	if len(foreign) == 0 {
		return ""
	}
	return fmt.Sprintf(": its weights are in another format than safetensors (%s), which this package does not read: convert them to safetensors", strings.Join(foreign, ", "))
}

// listedVariant returns the variant of a safetensors file that a folder
// lists beside the others, all: the variant its name gives (see
// variantOf), or for a name of no library's base, "fp16" for
// custom.fp16.safetensors beside custom.safetensors.
func listedVariant(name string, all map[string]bool) string {
	if v := variantOf(name); v != "" {
		return v
	}
	stem := strings.TrimSuffix(name, ".safetensors")
	i := strings.LastIndexByte(stem, '.')
	if i <= 0 || !validVariant(stem[i+1:]) || !all[stem[:i]+".safetensors"] {
		return ""
	}
	return stem[i+1:]
}

// openPipeline opens the diffusers pipeline in dir, whose model_index.json
// holds data: each component whose folder holds a model is a part.
func openPipeline(ctx context.Context, dir folder, data []byte, o *options) (*Checkpoint, error) {
	var components map[string]json.RawMessage
	if err := json.Unmarshal(data, &components); err != nil || components == nil {
		if page := webPage(dir.path(modelIndexFile), data); page != "" {
			return nil, fmt.Errorf("%w: %s: %s", ErrNoModel, dir.path(modelIndexFile), page)
		}
		return nil, fmt.Errorf("%w: %s: not a JSON object of a pipeline's components", ErrNoModel, dir.path(modelIndexFile))
	}
	var names []string
	for name, raw := range components {
		var spec []*string
		if strings.HasPrefix(name, "_") || json.Unmarshal(raw, &spec) != nil || len(spec) != 2 || spec[0] == nil || spec[1] == nil {
			continue // _class_name and the like; a component set to null
		}
		if localName(name) && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var parts []*Checkpoint
	var skipped []string
	for _, name := range names {
		sub := dir.sub(name)
		if _, err := sub.read(ctx, configFile); notExist(err) {
			continue // no model: a scheduler, a tokenizer, ...
		} else if err != nil {
			return nil, closeAll(parts, err)
		}
		p, err := openPart(ctx, sub, name, o)
		if errors.Is(err, ErrNoModel) {
			if foreign := foreignWeights(ctx, sub, true); len(foreign) > 0 {
				skipped = append(skipped, skippedPart(name, foreign))
				continue
			}
		}
		if err != nil {
			return nil, closeAll(parts, fmt.Errorf("%s: component %s: %w", dir.path(modelIndexFile), name, err))
		}
		parts = append(parts, p)
	}
	return joinParts(dir, parts, skipped, o)
}

// openModules opens the sentence-transformers model in dir, whose
// modules.json holds data: each module whose folder holds weights is a
// part.
func openModules(ctx context.Context, dir folder, data []byte, o *options) (*Checkpoint, error) {
	var modules []struct {
		Path *string `json:"path"`
	}
	if err := json.Unmarshal(data, &modules); err != nil {
		if page := webPage(dir.path(modulesFile), data); page != "" {
			return nil, fmt.Errorf("%w: %s: %s", ErrNoModel, dir.path(modulesFile), page)
		}
		return nil, fmt.Errorf("%w: %s: not a JSON list of modules: %v", ErrNoModel, dir.path(modulesFile), err)
	}
	var parts []*Checkpoint
	var skipped []string
	seen := map[string]bool{}
	// add adds the module in the folder p, and the modules a Router there
	// routes to, in folders of its own.
	var add func(p string, depth int) error
	add = func(p string, depth int) error {
		if seen[p] {
			return nil // a module listed twice, as "2_Dense" and "2_Dense/"
		}
		seen[p] = true
		if p != "" && !localName(p) {
			return fmt.Errorf("%w: %s: module path %q leaves the model's folder", ErrNoModel, dir.path(modulesFile), p)
		}
		sub := dir
		if p != "" {
			sub = dir.sub(p)
		}
		c, err := openPart(ctx, sub, p, o)
		if err == nil {
			parts = append(parts, c)
			return nil
		}
		if !errors.Is(err, ErrNoModel) {
			return fmt.Errorf("%s: module %q: %w", dir.path(modulesFile), p, err)
		}
		// A module without weights (Pooling, Normalize), or a Router, whose
		// router_config.json names the folders of the modules it routes
		// to, or weights in another format, which are not read.
		if routed, err := routerModules(ctx, sub); err != nil {
			return err
		} else if len(routed) > 0 && depth < maxRouterDepth {
			for _, r := range routed {
				if err := add(path.Join(p, r), depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		if foreign := foreignWeights(ctx, sub, false); len(foreign) > 0 {
			skipped = append(skipped, skippedPart(p, foreign))
		}
		return nil
	}
	for _, m := range modules {
		if m.Path == nil {
			continue
		}
		if err := add(strings.TrimSuffix(*m.Path, "/"), 0); err != nil {
			return nil, closeAll(parts, err)
		}
	}
	return joinParts(dir, parts, skipped, o)
}

// maxRouterDepth bounds how deep Routers nest.
const maxRouterDepth = 4

// routerModules returns the folders, in the folder dir of a
// sentence-transformers Router, of the modules it routes to, as its
// router_config.json names them in "types"; none for any other module.
func routerModules(ctx context.Context, dir folder) ([]string, error) {
	data, err := dir.read(ctx, "router_config.json")
	if notExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Types map[string]json.RawMessage `json:"types"`
	}
	if json.Unmarshal(data, &cfg) != nil {
		return nil, nil
	}
	var out []string
	for name := range cfg.Types {
		if localName(name) && !strings.Contains(name, "/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// skippedPart describes a part whose weights are in another format.
func skippedPart(part string, files []string) string {
	where := part
	if where == "" {
		where = "the model's folder"
	}
	return fmt.Sprintf("%s: %s (weights in another format than safetensors, not read)", where, strings.Join(files, ", "))
}

// foreignExts are the extensions of weight files in other formats than
// safetensors: PyTorch pickles, TensorFlow, Flax, GGUF, ONNX.
var foreignExts = []string{".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".onnx"}

// foreignNames are the files in which the libraries save weights in other
// formats, looked for over HTTP, where a folder cannot be listed.
var foreignNames = []string{"pytorch_model.bin", "pytorch_model.bin.index.json", "diffusion_pytorch_model.bin", "adapter_model.bin", "open_clip_pytorch_model.bin", "tf_model.h5", "flax_model.msgpack"}

// foreignWeights returns the weight files in other formats than
// safetensors in dir: those a folder on disk lists; over HTTP, where probe
// is true, those of foreignNames that the server has.
func foreignWeights(ctx context.Context, dir folder, probe bool) []string {
	names, err := dir.list()
	if err == nil {
		var out []string
		for _, n := range names {
			if slices.ContainsFunc(foreignExts, func(ext string) bool { return strings.HasSuffix(n, ext) }) || strings.HasSuffix(n, ".bin.index.json") {
				out = append(out, n)
			}
		}
		return out
	}
	if !probe {
		return nil
	}
	found := make([]bool, len(foreignNames))
	parallel.For(ctx, len(foreignNames), len(foreignNames), func(_, i int) error {
		found[i] = dir.exists(ctx, foreignNames[i])
		return nil
	})
	var out []string
	for i, ok := range found {
		if ok {
			out = append(out, foreignNames[i])
		}
	}
	return out
}

// openPart opens the weights of a part in its folder sub: of the variant,
// or of none where the part has none of the variant, as diffusers loads a
// pipeline's components.
func openPart(ctx context.Context, sub folder, name string, o *options) (*Checkpoint, error) {
	c, err := openWeights(ctx, sub, o, o.variant)
	if o.variant != "" && errors.Is(err, ErrNoModel) {
		c, err = openWeights(ctx, sub, o, "")
	}
	if err != nil {
		return nil, err
	}
	c.part = name
	return c, nil
}

// closeAll closes the parts opened so far, and returns err.
func closeAll(parts []*Checkpoint, err error) error {
	for _, p := range parts {
		p.Close()
	}
	return err
}

// joinParts returns the checkpoint of a model of several parts: one set of
// tensors, named behind each part's name, over the parts' files.
func joinParts(dir folder, parts []*Checkpoint, skipped []string, o *options) (*Checkpoint, error) {
	if len(parts) == 0 {
		if len(skipped) > 0 {
			return nil, fmt.Errorf("%w: %s: no part holds weights in safetensors files: %s", ErrNoModel, dir.path(""), strings.Join(skipped, "; "))
		}
		return nil, fmt.Errorf("%w: %s: no part holds weights", ErrNoModel, dir.path(""))
	}
	if o.variant != "" && !slices.ContainsFunc(parts, func(p *Checkpoint) bool { return p.variant == o.variant }) {
		return nil, closeAll(parts, fmt.Errorf("%w: %s: no part has files of the variant %q", ErrNoModel, dir.path(""), o.variant))
	}
	if len(parts) == 1 && parts[0].part == "" {
		parts[0].skipped = skipped
		return parts[0], nil // a sentence-transformers model of one module with weights
	}
	c := &Checkpoint{dir: dir, variant: o.variant, where: map[string]loc{}, parts: parts, skipped: skipped, owner: true}
	type partFile struct {
		f    *file
		part int
		i    int // in the part's files
	}
	var all []partFile
	for pi, p := range parts {
		prefix := ""
		if p.part != "" {
			prefix = p.part + "/"
		}
		for i, f := range p.files {
			all = append(all, partFile{&file{name: prefix + f.name, r: f.r, closer: f.closer}, pi, i})
		}
	}
	slices.SortFunc(all, func(a, b partFile) int { return strings.Compare(a.f.name, b.f.name) })
	index := make([][]int, len(parts)) // part, file in the part → file in c
	for pi, p := range parts {
		index[pi] = make([]int, len(p.files))
	}
	for i, pf := range all {
		c.files = append(c.files, pf.f)
		index[pf.part][pf.i] = i
	}
	for pi, p := range parts {
		prefix := ""
		if p.part != "" {
			prefix = p.part + "/"
		}
		for _, name := range p.Names() {
			l, _ := p.find(name)
			if _, dup := c.where[prefix+name]; dup {
				return nil, closeAll(parts, fmt.Errorf("%w: %s: the tensor %q is in two parts", ErrNoModel, dir.path(""), prefix+name))
			}
			c.where[prefix+name] = loc{file: index[pi][l.file], name: l.name}
		}
		for _, u := range p.unlisted {
			c.unlisted = append(c.unlisted, prefix+u)
		}
	}
	for _, p := range parts {
		p.owner = false // the whole closes the files
	}
	c.names = slices.Sorted(maps.Keys(c.where))
	slices.Sort(c.unlisted)
	return c, nil
}
