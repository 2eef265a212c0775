package verify

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/load"
)

// ErrManifestMismatch is what the error of ManifestReport.Err wraps: the
// model's tensors are not those of the manifest.
var ErrManifestMismatch = errors.New("verify: the tensors differ from the manifest")

// ErrInvalidManifest is what the errors of ReadManifest wrap.
var ErrInvalidManifest = errors.New("verify: invalid manifest")

// MaxManifestSize bounds the manifest that ReadManifest reads: 256 MiB,
// the digests of over a million tensors.
const MaxManifestSize = 256 << 20

// A Manifest lists tensors by their safetensors.TensorDigest, which does
// not depend on the files that hold them: a model checked against it
// passes in one file or in shards, in any order, at any offsets, with any
// metadata. `safetensors inspect --digests MODEL` prints one, as text and
// with --json as JSON, both of which ReadManifest reads.
//
// Its text form is a line a tensor, as sha256sum's: the digest (64
// lowercase hexadecimal digits), two spaces and the name, written as it is
// unless it is empty, starts with a quote or holds a character that Go's
// strconv.Quote escapes, when it is written quoted (strconv.Quote). Blank
// lines and lines starting with # are comments. Its JSON form is an object
// whose "tensors" list holds objects with the tensor's "name" and
// "digest", and, informative, its "dtype", "shape", "bytes" and "file";
// other fields are ignored.
type Manifest struct {
	// Tensors are the tensors listed, each name once.
	Tensors []ManifestTensor `json:"tensors"`
}

// A ManifestTensor is a tensor that a manifest lists: its name and
// digest, and, where the manifest gives them, its dtype, shape, size and
// file, which tell what changed when the digest differs.
type ManifestTensor struct {
	// File is the file that held the tensor, as the model names it ("" if
	// unknown): informative, since the digest does not depend on it.
	File   string                   `json:"file,omitempty"`
	Name   string                   `json:"name"`
	DType  string                   `json:"dtype,omitempty"` // "" if unknown
	Shape  []uint64                 `json:"shape"`           // nil if unknown
	Bytes  uint64                   `json:"bytes"`
	Digest safetensors.TensorDigest `json:"digest"`
}

// A ManifestOption configures ManifestOf and Manifest.Check.
type ManifestOption func(*manifestConfig)

type manifestConfig struct {
	loader   *load.Loader
	progress func(done, total uint64)
	files    *load.Digests // for the files' SHA-256 too (verify's one read)
}

// ManifestLoader returns an option that reads the model with l in place
// of a load.Loader of its defaults (memory, concurrency, NoCache).
func ManifestLoader(l *load.Loader) ManifestOption {
	return func(c *manifestConfig) { c.loader = l }
}

// ManifestProgress returns an option that calls f as the tensors are
// read and hashed, with the bytes done and in all.
func ManifestProgress(f func(done, total uint64)) ManifestOption {
	return func(c *manifestConfig) { c.progress = f }
}

// ManifestOf reads every tensor of src once, with a load.Loader whose read
// pass computes their digests (load.DigestTensors) in parallel, and
// returns them as a manifest, sorted by name: the same manifest for the
// same tensors however they are stored. Each tensor's File is the name of
// its DataSection. A name that two files of src hold is an error.
// Cancelling ctx stops the reads.
func ManifestOf(ctx context.Context, src load.Source, opts ...ManifestOption) (*Manifest, error) {
	var cfg manifestConfig
	for _, o := range opts {
		o(&cfg)
	}
	sections, err := src.DataSections()
	if err != nil {
		return nil, err
	}
	return sectionsManifest(ctx, sections, &cfg)
}

// sectionsManifest is ManifestOf of the data sections; with cfg.files, its read
// pass also computes the SHA-256 of each file (load.HashFiles) into it.
func sectionsManifest(ctx context.Context, sections []safetensors.DataSection, cfg *manifestConfig) (*Manifest, error) {
	l := cfg.loader
	if l == nil {
		l = &load.Loader{}
	}
	files := map[string]string{}
	var total uint64
	for _, s := range sections {
		for _, t := range s.Tensors {
			if f, dup := files[t.Name]; dup {
				return nil, fmt.Errorf("verify: tensor %q is in %s and in %s: a manifest names each tensor once", t.Name, f, s.Name)
			}
			files[t.Name] = s.Name
			total += t.DataOffsets[1] - t.DataOffsets[0]
		}
	}
	var d load.Digests
	m := &Manifest{Tensors: make([]ManifestTensor, 0, len(files))}
	var done uint64
	opts := []load.Option{load.DigestTensors(&d)}
	if cfg.files != nil {
		opts = append(opts, load.HashFiles(cfg.files))
	}
	for t, err := range l.Load(ctx, sectionsSource(sections), opts...) {
		if err != nil {
			return nil, err
		}
		dg, _ := d.Tensor(t.Name) // there: the Loader computes it before handing t over
		m.Tensors = append(m.Tensors, ManifestTensor{File: files[t.Name], Name: t.Name, DType: t.DType.String(), Shape: slices.Clone(t.Shape), Bytes: uint64(len(t.Data)), Digest: dg})
		if cfg.progress != nil {
			done += uint64(len(t.Data))
			cfg.progress(done, total)
		}
	}
	for i := range m.Tensors {
		if m.Tensors[i].Shape == nil {
			m.Tensors[i].Shape = []uint64{}
		}
	}
	slices.SortFunc(m.Tensors, func(a, b ManifestTensor) int { return cmp.Compare(a.Name, b.Name) })
	return m, nil
}

// sectionsSource is a load.Source of data sections already described.
type sectionsSource []safetensors.DataSection

func (s sectionsSource) DataSections() ([]safetensors.DataSection, error) { return s, nil }

// WriteText writes the manifest in its text form, a line a tensor.
func (m *Manifest) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, t := range m.Tensors {
		bw.WriteString(t.Digest.String())
		bw.WriteString("  ")
		bw.WriteString(manifestName(t.Name))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// manifestName is a tensor's name as the text form writes it.
func manifestName(name string) string {
	q := strconv.Quote(name)
	if name == "" || name[0] == '"' || q[1:len(q)-1] != name {
		return q
	}
	return name
}

// ReadManifest reads a manifest in its text or its JSON form (one whose
// first character but white space is '{'), of at most MaxManifestSize
// bytes. A malformed line or field, a digest that is not 64 hexadecimal
// digits, a tensor listed twice, and a manifest that lists none are errors
// wrapping ErrInvalidManifest, naming the line or the tensor.
func ReadManifest(r io.Reader) (*Manifest, error) {
	br := bufio.NewReader(io.LimitReader(r, MaxManifestSize+1))
	var m *Manifest
	var err error
	for {
		c, _, rerr := br.ReadRune()
		if rerr != nil {
			if rerr == io.EOF {
				return nil, fmt.Errorf("%w: it is empty", ErrInvalidManifest)
			}
			return nil, rerr
		}
		if strings.ContainsRune(" \t\r\n", c) {
			continue
		}
		br.UnreadRune()
		if c == '{' {
			m, err = readManifestJSON(br)
		} else {
			m, err = readManifestText(br)
		}
		break
	}
	if err != nil {
		return nil, err
	}
	if _, err := br.Peek(1); err == nil {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidManifest, MaxManifestSize)
	}
	if len(m.Tensors) == 0 {
		return nil, fmt.Errorf("%w: it lists no tensors", ErrInvalidManifest)
	}
	seen := make(map[string]bool, len(m.Tensors))
	for _, t := range m.Tensors {
		if seen[t.Name] {
			return nil, fmt.Errorf("%w: tensor %q is listed twice", ErrInvalidManifest, t.Name)
		}
		seen[t.Name] = true
	}
	return m, nil
}

func readManifestText(r *bufio.Reader) (*Manifest, error) {
	m := &Manifest{Tensors: []ManifestTensor{}}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), MaxManifestSize+1)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSuffix(s.Text(), "\r")
		if strings.TrimSpace(line) == "" || line[0] == '#' {
			continue
		}
		hexDigest, name, ok := strings.Cut(line, "  ")
		if !ok {
			return nil, fmt.Errorf("%w: line %d: not a digest, two spaces and a tensor's name: %.80q", ErrInvalidManifest, n, line)
		}
		d, err := safetensors.ParseTensorDigest(hexDigest)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrInvalidManifest, n, err)
		}
		if strings.HasPrefix(name, `"`) {
			if name, err = strconv.Unquote(name); err != nil {
				return nil, fmt.Errorf("%w: line %d: a quoted name that is not a Go string: %.80s", ErrInvalidManifest, n, line[len(hexDigest)+2:])
			}
		}
		m.Tensors = append(m.Tensors, ManifestTensor{Name: name, Digest: d})
	}
	if err := s.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidManifest, MaxManifestSize)
		}
		return nil, err
	}
	return m, nil
}

func readManifestJSON(r *bufio.Reader) (*Manifest, error) {
	var doc struct {
		Tensors []struct {
			Name   *string   `json:"name"`
			Digest *string   `json:"digest"`
			DType  string    `json:"dtype"`
			Shape  *[]uint64 `json:"shape"`
			Bytes  uint64    `json:"bytes"`
			File   string    `json:"file"`
		} `json:"tensors"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: more than one JSON document", ErrInvalidManifest)
	}
	m := &Manifest{Tensors: make([]ManifestTensor, 0, len(doc.Tensors))}
	for i, t := range doc.Tensors {
		if t.Name == nil || t.Digest == nil {
			return nil, fmt.Errorf("%w: tensors[%d] has no name or no digest", ErrInvalidManifest, i)
		}
		d, err := safetensors.ParseTensorDigest(*t.Digest)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %w", ErrInvalidManifest, *t.Name, err)
		}
		mt := ManifestTensor{File: t.File, Name: *t.Name, DType: t.DType, Bytes: t.Bytes, Digest: d}
		if t.Shape != nil {
			mt.Shape = *t.Shape
		}
		m.Tensors = append(m.Tensors, mt)
	}
	return m, nil
}

// A ManifestReport says how a model's tensors compare with a manifest's.
type ManifestReport struct {
	// Matched counts the tensors whose digests are the manifest's.
	Matched int
	// Changed are the tensors of both whose digests differ, by name.
	Changed []ManifestChange
	// Missing are the tensors of the manifest that the model lacks, and
	// Extra those of the model that the manifest does not list, by name.
	Missing, Extra []string
}

// A ManifestChange is a tensor whose digest differs from the manifest's:
// Want is the manifest's entry, Got the model's.
type ManifestChange struct {
	Name      string
	Want, Got ManifestTensor
}

// OK reports whether the model's tensors are the manifest's, all of them
// and no other.
func (r *ManifestReport) OK() bool {
	return len(r.Changed) == 0 && len(r.Missing) == 0 && len(r.Extra) == 0
}

// Err returns nil when OK, else an error wrapping ErrManifestMismatch that
// names each tensor that changed, is missing or is extra (up to 20 of
// each, then how many more).
func (r *ManifestReport) Err() error {
	if r.OK() {
		return nil
	}
	var b strings.Builder
	list := func(what string, names []string) {
		if len(names) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d %s: ", len(names), what)
		for i, n := range names {
			if i == 20 {
				fmt.Fprintf(&b, ", and %d more", len(names)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(n)
		}
	}
	changed := make([]string, len(r.Changed))
	for i, c := range r.Changed {
		changed[i] = c.String()
	}
	list("changed", changed)
	list("missing", quoteAll(r.Missing))
	list("extra", quoteAll(r.Extra))
	return fmt.Errorf("%w: %s", ErrManifestMismatch, b.String())
}

// String names the tensor and says what changed: its digest, and its
// dtype and shape where the manifest gives them and they differ.
func (c ManifestChange) String() string {
	s := fmt.Sprintf("%q (digest %s, manifest %s", c.Name, c.Got.Digest, c.Want.Digest)
	if c.Want.DType != "" && c.Want.DType != c.Got.DType {
		s += fmt.Sprintf("; dtype %s, manifest %s", c.Got.DType, c.Want.DType)
	}
	if c.Want.Shape != nil && !slices.Equal(c.Want.Shape, c.Got.Shape) {
		s += fmt.Sprintf("; shape %v, manifest %v", c.Got.Shape, c.Want.Shape)
	}
	return s + ")"
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// Compare compares the tensors got, a model's (as ManifestOf gives
// them), with the manifest's, by name and digest. Its lists are sorted
// by name.
func (m *Manifest) Compare(got []ManifestTensor) *ManifestReport {
	r := &ManifestReport{Changed: []ManifestChange{}, Missing: []string{}, Extra: []string{}}
	want := make(map[string]ManifestTensor, len(m.Tensors))
	for _, t := range m.Tensors {
		want[t.Name] = t
	}
	seen := make(map[string]bool, len(got))
	for _, g := range got {
		seen[g.Name] = true
		w, ok := want[g.Name]
		switch {
		case !ok:
			r.Extra = append(r.Extra, g.Name)
		case w.Digest == g.Digest:
			r.Matched++
		default:
			r.Changed = append(r.Changed, ManifestChange{Name: g.Name, Want: w, Got: g})
		}
	}
	for _, t := range m.Tensors {
		if !seen[t.Name] {
			r.Missing = append(r.Missing, t.Name)
		}
	}
	slices.SortFunc(r.Changed, func(a, b ManifestChange) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(r.Extra)
	slices.Sort(r.Missing)
	return r
}

// Check reads every tensor of src once, as ManifestOf does, and compares
// them with the manifest. Its error is that of reading src; that the
// tensors differ is said by the report (ManifestReport.Err).
func (m *Manifest) Check(ctx context.Context, src load.Source, opts ...ManifestOption) (*ManifestReport, error) {
	got, err := ManifestOf(ctx, src, opts...)
	if err != nil {
		return nil, err
	}
	return m.Compare(got.Tensors), nil
}
