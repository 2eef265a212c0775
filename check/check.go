// Package check checks a model's weights before they are used: the values
// of every tensor (NaN, infinities, all-zero tensors, values of unusual
// magnitude), the dtypes (float tensors of mixed dtypes), the structure of
// the numbered blocks, and the model's configuration files against the
// weights.
//
// The structure check finds the model's stacks from the names and shapes
// alone: every numbered sequence at any depth and under any name
// (model.layers.N, transformer_blocks.N, down_blocks.N.resnets.N,
// stages.N.blocks.N, ResNet's layer1 to layer4). It learns what the model
// is before it judges: blocks of several kinds (MoE and dense MLPs,
// attention and SSM, a stage's first block with its shortcut), tensors of
// the first or last block only, the stages of a hierarchy whose widths
// grow, an nn.Sequential of layers and parameterless modules, and lists
// numbered like blocks that are not blocks are all healthy. A block is
// judged against others of its kind, in its stack and in the stacks of the
// same pattern (the resnets of every down block); a defect is what the rest
// of the model shows to be one: a tensor missing from one block, a tensor
// transposed (against its siblings, its own bias, or its block's width),
// a block missing (a gap between blocks alike, in a list whose kinds recur,
// or between stages that no longer chain). What may be intended is a
// warning; each defect is reported once, by the rule that says most.
//
// The configuration is checked for every library that names sizes:
// transformers' config.json for every architecture (the layer count, hidden
// size, vocabulary and MLP width under each name transformers stores them
// as, and, for the families in [Families], every shape), diffusers' model
// configurations, timm's, peft's adapter_config.json, sentence-transformers'
// module configurations and open_clip's open_clip_config.json;
// [Report.Checked] lists the keys checked.
//
// A tensor all zeros is a warning where the model shows it should hold
// values (a matrix whose like in other blocks holds values, a token table,
// a language model's head); the many that models start at zero by design
// (biases, normalization statistics, adapter matrices, zero-initialized
// layers) are counted in [Report.ZeroByDesign].
//
// [Model] checks a model as the checkpoint package opens it (a file, a
// sharded checkpoint, a folder of any library's layout, a model of several
// parts, part by part; on disk or over HTTP), and [Checkpoint] one already
// open; [Run] checks any [safetensors.TensorSource]. The values are read once, in
// parallel over the tensors and within the large ones; options ([MaxAbs],
// [NoMagnitude], [Config], [Workers]) change the defaults, [Progress]
// reports the bytes read as the check goes, and the context stops a check
// under way.
package check

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/plural"
	"github.com/safetensors-go/safetensors/internal/role"
)

// ErrInvalidConfig is returned by Run and Model for a config.json that is
// not a JSON object.
var ErrInvalidConfig = errors.New("check: config.json is not a JSON object")

// Severity says how bad a finding is.
type Severity int

const (
	// Warning is for what is unusual but may be intended: an all-zero
	// tensor, large values, mixed dtypes.
	Warning Severity = iota
	// Error is for what makes a model unusable: NaN or Inf, a missing or
	// misshapen tensor, a block missing, a shape that contradicts the
	// configuration.
	Error
)

// String returns "warning" or "error".
func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// MarshalText returns the severity's String.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// The kinds of findings.
const (
	KindNaN       = "nan"       // a tensor holds NaN (error)
	KindInf       = "inf"       // a tensor holds ±Inf (error)
	KindZero      = "zero"      // a float tensor is all zeros (warning)
	KindMagnitude = "magnitude" // a tensor holds values beyond MaxAbs (warning)
	KindDTypes    = "dtypes"    // float tensors of several dtypes (warning)
	KindStructure = "structure" // the numbered blocks differ or have gaps (error)
	KindConfig    = "config"    // config.json contradicts a shape (error)
	KindRead      = "read"      // a tensor could not be read (error)
)

// A Finding is one thing found wrong or unusual.
type Finding struct {
	Severity Severity `json:"severity"`
	Kind     string   `json:"kind"`
	// Tensor, Block and Key name what the finding is about, where they
	// apply: a tensor, a block ("model.layers.3"), a key of config.json.
	Tensor string `json:"tensor,omitempty"`
	Block  string `json:"block,omitempty"`
	Key    string `json:"key,omitempty"`
	// Count and First give, for the value checks, how many elements are
	// concerned and the flat index of the first.
	Count uint64  `json:"count,omitempty"`
	First *uint64 `json:"first_index,omitempty"`
	// Message says it in words, naming the values involved.
	Message string `json:"message"`
}

// String returns the finding as one line: "error: tensor "x": message".
func (f Finding) String() string {
	var where string
	switch {
	case f.Tensor != "":
		where = fmt.Sprintf("tensor %q: ", f.Tensor)
	case f.Block != "":
		where = fmt.Sprintf("block %s: ", f.Block)
	case f.Key != "":
		where = fmt.Sprintf("config %s: ", f.Key)
	}
	return f.Severity.String() + ": " + where + f.Message
}

// Report is the result of a check.
type Report struct {
	Tensors int    `json:"tensors"` // the number of tensors
	Bytes   uint64 `json:"bytes"`   // their total size
	// Family is the model family whose configuration was checked ("" if
	// none was); Notes say what was not checked and why.
	Family string `json:"family,omitempty"`
	// Checked lists the keys of config.json (and of its sub-configurations,
	// as "text_config.hidden_size") that were checked against the weights
	// by the general rule, which holds for every architecture.
	Checked []string `json:"checked,omitempty"`
	// ZeroByDesign counts the tensors all zeros that the model holds by
	// design (biases, normalization statistics, adapter matrices that
	// start at zero, ...), which are not findings; a note names one.
	ZeroByDesign int       `json:"zero_by_design,omitempty"`
	Notes        []string  `json:"notes,omitempty"`
	Findings     []Finding `json:"findings"`
	// Part is the part's name, for the report of a part of a model of
	// several parts; Parts holds those reports, for the report of such a
	// model (see Model).
	Part  string    `json:"part,omitempty"`
	Parts []*Report `json:"parts,omitempty"`
}

// Errors returns the number of findings of severity Error.
func (r *Report) Errors() int { return r.count(Error) }

// Warnings returns the number of findings of severity Warning.
func (r *Report) Warnings() int { return r.count(Warning) }

func (r *Report) count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// An Option changes how a check is made. Pass options to [Run] and [Model];
// without any, the defaults hold: values beyond DefaultMaxAbs are
// reported, config.json is the one beside the weights (Model) or none
// (Run), and GOMAXPROCS goroutines read the values.
type Option func(*settings) error

// settings holds the settings of Options.
type settings struct {
	maxAbs    float64 // +Inf: the magnitude check is off
	config    []byte
	hasConfig bool
	workers   int // 0: GOMAXPROCS
	// files holds the other configuration files of the part, by name
	// (libraryFiles), read by Model and Checkpoint.
	files map[string][]byte
	// progress is the Progress option's function. For a part of a model
	// of several parts, base is the bytes of the parts checked before it
	// and total those of every part (counted); otherwise run counts the
	// total itself.
	progress    func(done, total uint64)
	base, total uint64
	counted     bool
}

func newSettings(opts []Option) (*settings, error) {
	c := &settings{maxAbs: DefaultMaxAbs}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// DefaultMaxAbs is the magnitude beyond which values are reported unless
// MaxAbs or NoMagnitude says otherwise: trained weights are far smaller,
// and F16 overflows at 65504.
const DefaultMaxAbs = 1e4

// MaxAbs returns an option that sets the magnitude beyond which values are
// reported, as warnings of kind KindMagnitude: x must be positive and
// finite (DefaultMaxAbs by default); otherwise Run and Model return an
// error wrapping safetensors.ErrInvalidOption.
func MaxAbs(x float64) Option {
	return func(c *settings) error {
		if !(x > 0) || math.IsInf(x, 1) {
			return fmt.Errorf("%w: MaxAbs(%g): the magnitude must be positive and finite", safetensors.ErrInvalidOption, x)
		}
		c.maxAbs = x
		return nil
	}
}

// NoMagnitude returns an option that turns the magnitude check off: no
// value is reported for its size, while NaN and infinities still are.
func NoMagnitude() Option {
	return func(c *settings) error {
		c.maxAbs = math.Inf(1)
		return nil
	}
}

// Config returns an option that gives the content of the model's
// config.json, checked against the weights. For Model it replaces the
// config.json of the model's directory; Run checks no configuration
// without it. Data that is not a JSON object makes Run and Model return
// an error wrapping ErrInvalidConfig. The data is not copied and must not
// be modified during the check.
func Config(data []byte) Option {
	return func(c *settings) error {
		c.config, c.hasConfig = data, true
		return nil
	}
}

// Workers returns an option that sets how many goroutines read the
// values: n must be 1 or more (GOMAXPROCS by default); otherwise Run and
// Model return an error wrapping safetensors.ErrInvalidOption.
func Workers(n int) Option {
	return func(c *settings) error {
		if n < 1 {
			return fmt.Errorf("%w: Workers(%d): want 1 or more", safetensors.ErrInvalidOption, n)
		}
		c.workers = n
		return nil
	}
}

// Progress returns an option that makes Run, Model and Checkpoint call f
// as they go, with the bytes of tensor data read so far and in all: those
// of the tensors whose values are checked, the float types that can hold
// NaN (see safetensors.DType.HasNaN), over every part of a model of
// several parts. f is called from the goroutine that called Run, Model or
// Checkpoint, never from two goroutines at once, with done only growing;
// it reaches the total when every value has been read (a tensor that
// cannot be read counts as read). A nil f is not called.
func Progress(f func(done, total uint64)) Option {
	return func(c *settings) error {
		c.progress = f
		return nil
	}
}

// scanSize returns the bytes of the tensors of src whose values run
// checks (those Progress counts).
func scanSize(src safetensors.TensorSource) uint64 {
	es := safetensors.AsElementSource(src)
	var n uint64
	for _, name := range src.Names() {
		if t, err := es.Info(name); err == nil && t.DType.HasNaN() {
			n += t.DataOffsets[1] - t.DataOffsets[0]
		}
	}
	return n
}

// Run checks the tensors of src, reading their values in parallel (src
// must be safe for concurrent use), and, with the Config option, the
// configuration against them. Tensors that cannot be read are findings,
// not errors. It returns an error for an invalid option or a config.json
// that is not a JSON object (ErrInvalidConfig), for a file truncated while
// mapped (an error wrapping safetensors.ErrFileChanged), and when ctx is
// done before the check is: an error wrapping ctx.Err() and
// context.Cause(ctx), returned as soon as the reads under way end.
func Run(ctx context.Context, src safetensors.TensorSource, opts ...Option) (*Report, error) {
	c, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	return run(ctx, src, c)
}

func run(ctx context.Context, src safetensors.TensorSource, c *settings) (*Report, error) {
	var cfg map[string]any
	if c.hasConfig {
		if err := json.Unmarshal(c.config, &cfg); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		} else if cfg == nil {
			return nil, ErrInvalidConfig
		}
	}
	es := safetensors.AsElementSource(src)
	names := src.Names()
	infos := make([]info, 0, len(names))
	r := &Report{Tensors: len(names)}
	for _, n := range names {
		if err := parallel.Stopped(ctx); err != nil {
			return nil, fmt.Errorf("check: stopped: %w", err)
		}
		t, err := es.Info(n)
		if err != nil {
			r.Findings = append(r.Findings, Finding{Severity: Error, Kind: KindRead, Tensor: n, Message: err.Error()})
			continue
		}
		size := t.DataOffsets[1] - t.DataOffsets[0]
		infos = append(infos, info{Name: n, DType: t.DType, Shape: t.Shape, size: size})
		r.Bytes += size
	}
	var report func(done uint64)
	if f := c.progress; f != nil {
		base, total := c.base, c.total
		if !c.counted {
			for _, t := range infos {
				if t.DType.HasNaN() {
					total += t.size
				}
			}
		}
		report = func(done uint64) { f(base+done, total) }
	}
	values, bounds, err := scanValues(ctx, es, infos, c.maxAbs, c.workers, report)
	if err != nil {
		return nil, err
	}
	st := structure(infos)
	values, design := byDesign(values, infos, st)
	r.ZeroByDesign = len(design)
	r.Findings = append(r.Findings, values...)
	if len(design) > 0 {
		r.Notes = append(r.Notes, designNote(design))
	}
	if len(bounds) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s named as bounds hold only infinities, as clipping bounds initialized to no clipping do (e.g. %q): not reported", plural.Of(len(bounds), "tensor"), bounds[0]))
	}
	q, qf, stored, err := quantization(ctx, es, cfg, infos)
	if err != nil {
		if stopped := parallel.Stopped(ctx); stopped != nil {
			return nil, fmt.Errorf("check: stopped: %w", stopped)
		}
		return nil, err
	}
	if q != nil {
		r.Notes = append(r.Notes, quantNote(q))
	}
	r.Findings = append(r.Findings, qf...)
	r.Findings = append(r.Findings, dtypes(infos, stored)...)
	r.Findings = append(r.Findings, st.findings...)
	files := map[string]map[string]any{}
	for name, data := range c.files {
		var m map[string]any
		if json.Unmarshal(data, &m) == nil && m != nil {
			files[name] = m
		} else {
			r.Notes = append(r.Notes, name+" is not a JSON object: it was not checked")
		}
	}
	var notes []string
	if cfg != nil {
		family, n, findings := checkConfig(cfg, infos, st)
		r.Family, notes = family, n
		r.Findings = append(r.Findings, findings...)
		r.Checked, findings = checkSizes(cfg, infos, st)
		r.Findings = append(r.Findings, findings...)
		files["config.json"] = cfg
	}
	checked, findings := checkLibraries(files, infos, st)
	r.Checked = append(r.Checked, checked...)
	r.Findings = append(r.Findings, findings...)
	switch {
	case cfg == nil && len(r.Checked) == 0:
		r.Notes = append(r.Notes, "no config.json: the configuration was not checked")
	case len(r.Checked) == 0 || r.Family != "":
		r.Notes = append(r.Notes, notes...)
	}
	r.Findings = dedupeConfig(r.Findings)
	sortFindings(r.Findings)
	return r, nil
}

// sortFindings orders findings by severity, errors first, then by kind,
// keeping the order of the others.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(-cmp.Compare(a.Severity, b.Severity), cmp.Compare(a.Kind, b.Kind))
	})
}

// Model checks the model at target, any input the checkpoint package's
// Open takes: a safetensors file, a sharded checkpoint's index, a folder
// of any library's layout, a snapshot of the Hugging Face cache, or a URL
// of any of these. The config.json of the model's folder (over HTTP, the
// one beside the weights) is checked too, unless the Config option gives
// another.
//
// A model of several parts (a diffusers pipeline, a sentence-transformers
// model) is checked part by part, each against its own config.json: the
// Report's Parts holds each part's report, and its Findings all of them,
// with the tensors and blocks named as the checkpoint names them
// ("unet/conv_in.weight"). The Config option, which gives one config.json,
// applies to a model of one part only. A part whose weights are in another
// format than safetensors (see checkpoint.Checkpoint.Skipped) is not
// checked, and a note of the Report says so. It returns the errors of Open, of
// reading config.json, and those of Run.
func Model(ctx context.Context, target string, opts ...Option) (*Report, error) {
	if _, err := newSettings(opts); err != nil {
		return nil, err
	}
	ck, err := checkpoint.Open(ctx, target)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	return Checkpoint(ctx, ck, opts...)
}

// Checkpoint checks an open checkpoint as Model checks the one it opens:
// with the config.json of its folder, read under ctx, and part by part
// for a model of several parts. It is for a checkpoint opened with
// options of its own, such as the headers of a remote one.
func Checkpoint(ctx context.Context, ck *checkpoint.Checkpoint, opts ...Option) (*Report, error) {
	c, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	parts := ck.Parts()
	if parts == nil {
		r, err := checkPart(ctx, ck, c)
		if err == nil {
			r.Notes = append(r.Notes, skippedNotes(ck)...)
		}
		return r, err
	}
	if c.hasConfig {
		return nil, fmt.Errorf("%w: Config gives one config.json, and %s is a model of %d parts, each with its own", safetensors.ErrInvalidOption, ck, len(parts))
	}
	// Progress counts the bytes of every part: each part's, first.
	sizes := make([]uint64, len(parts))
	var total, base uint64
	if c.progress != nil {
		for i, p := range parts {
			sizes[i] = scanSize(p)
			total += sizes[i]
		}
	}
	top := &Report{Findings: []Finding{}}
	for i, p := range parts {
		pc := *c
		pc.base, pc.total, pc.counted = base, total, true
		base += sizes[i]
		r, err := checkPart(ctx, p, &pc)
		if err != nil {
			return nil, err
		}
		r.Part = p.Part()
		top.Tensors += r.Tensors
		top.Bytes += r.Bytes
		prefix := ""
		if r.Part != "" {
			prefix = r.Part + "/"
		}
		for _, f := range r.Findings {
			if f.Tensor != "" {
				f.Tensor = prefix + f.Tensor
			}
			if f.Block != "" {
				f.Block = prefix + f.Block
			}
			top.Findings = append(top.Findings, f)
		}
		top.Parts = append(top.Parts, r)
	}
	sortFindings(top.Findings)
	top.Notes = append(top.Notes, skippedNotes(ck)...)
	return top, nil
}

// skippedNotes says which parts of ck were not checked, their weights
// being in another format than safetensors.
func skippedNotes(ck *checkpoint.Checkpoint) []string {
	var notes []string
	for _, s := range ck.Skipped() {
		notes = append(notes, "part "+s+": not checked")
	}
	return notes
}

// checkPart checks a checkpoint of one part, with the config.json of its
// folder unless c gives one.
func checkPart(ctx context.Context, ck *checkpoint.Checkpoint, c *settings) (*Report, error) {
	if !c.hasConfig {
		data, err := ck.ReadFile(ctx, "config.json")
		switch {
		case err == nil:
			c.config, c.hasConfig = data, true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	c.files = map[string][]byte{}
	for _, name := range libraryFiles {
		data, err := ck.ReadFile(ctx, name)
		switch {
		case err == nil:
			c.files[name] = data
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	return run(ctx, ck, c)
}

// info is a tensor's name, dtype and shape, and its size in bytes.
type info struct {
	Name  string
	DType safetensors.DType
	Shape []uint64
	size  uint64
}

// dtypes reports float tensors of more than one dtype, buffers left out
// (role.IsBuffer), whose dtype may differ from the weights', and the
// tensors that store a quantized model's weights (stored).
func dtypes(infos []info, stored map[string]bool) []Finding {
	count := map[safetensors.DType]int{}
	example := map[safetensors.DType]string{}
	for _, t := range infos {
		if t.DType.IsFloat() && !role.IsBuffer(t.Name, t.Shape) && !stored[t.Name] {
			if count[t.DType] == 0 {
				example[t.DType] = t.Name
			}
			count[t.DType]++
		}
	}
	if len(count) < 2 {
		return nil
	}
	ds := make([]safetensors.DType, 0, len(count))
	for d := range count {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b safetensors.DType) int { return cmp.Compare(count[b], count[a]) })
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%v: %d (e.g. %q)", d, count[d], example[d])
	}
	return []Finding{{Severity: Warning, Kind: KindDTypes, Message: "float tensors of mixed dtypes: " + strings.Join(parts, ", ")}}
}
