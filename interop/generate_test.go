package interop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// The generated files: headers built from a grammar of what the reference
// accepts and rejects, and mutations of the corpus files. INTEROP_SEED
// reproduces a run; INTEROP_COUNT sets the number of files.

// seed returns the seed of this run: INTEROP_SEED, or one from the clock.
func seed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv("INTEROP_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "INTEROP_SEED")
		return v
	}
	return uint64(time.Now().UnixNano())
}

// count returns INTEROP_COUNT, or def (an eighth of it under -short).
func count(t testing.TB, def int) int {
	t.Helper()
	if s := os.Getenv("INTEROP_COUNT"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "INTEROP_COUNT")
		return v
	}
	if testing.Short() {
		return def / 8
	}
	return def
}

// gen generates files from a seeded source.
type gen struct {
	r      *rand.Rand
	corpus [][]byte
	wild   float64 // scales the chance of each choice that breaks a file
}

func (g *gen) n(k int) int              { return g.r.IntN(k) }
func (g *gen) p(pr float64) bool        { return g.r.Float64() < pr }
func (g *gen) bad(pr float64) bool      { return g.p(pr * g.wild) }
func pick[T any](g *gen, xs []T) T      { return xs[g.r.IntN(len(xs))] }
func (g *gen) u64(lo, hi uint64) uint64 { return lo + g.r.Uint64N(hi-lo+1) }

var dtypeNames = []string{
	"BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
	"F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64",
}

// badDtypes are dtype names the reference does not know.
var badDtypes = []string{"f32", "F33", "F8", "FLOAT32", "", "F32 ", "bf16", "Bool", "F8_E4M3FN", "U128", "F4_E2M1"}

// specialNumbers are number forms, valid and not, for any place a number
// may appear: the reference rejects some by its own overflow rule, which
// is not correctly rounded, even where it ignores the value.
var specialNumbers = append(jsonNumbers, "00", "01", "-01", "+1", "1.", ".5", "1e", "1e+", "-", "0x10", "1_000",
	"Infinity", "NaN", "-Infinity", "-0.", "1.e5", "--1", "0.e1")

// jsonNumbers are the valid JSON numbers of specialNumbers: which of them
// the reference accepts in an ignored field depends on its overflow rule.
var jsonNumbers = []string{
	"0", "-0", "1", "-1", "1.0", "1.5", "-1.5", "1e2", "1E2", "1e+2", "1e-2", "1E-0", "0e0", "0.0",
	"18446744073709551615", "18446744073709551616", "18446744073709551614", "-18446744073709551616",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"99999999999999999999999999999999999999", "1" + strings.Repeat("0", 400),
	"1.7976931348623157e308", "1.7976931348623158e308", "1.79769313486231581e308", "1.797693134862315807e308",
	"1.7976931348623159e308", "1.797693134862315708145274237317043567981e308", "1.8e308", "-1.8e308",
	"-1.7976931348623158e308", "-1.79769313486231581e308", "1.7976931348623157e308", "179.76931348623158e306",
	"17976931348623157" + strings.Repeat("0", 292), "17976931348623158" + strings.Repeat("0", 292),
	"179769313486231581" + strings.Repeat("0", 291), "1.7976931348623157e+308", "0.17976931348623158e309",
	"0.0000017976931348623158e314", "1797693134862315.8e293", "1797693134862315.7e293",
	"1e308", "1e309", "1e400", "-1e400", "1e-400", "1e-324", "5e-324", "2.4703282292062327e-324",
	"2.4703282292062328e-324", "4.9406564584124654e-324", "2.2250738585072011e-308",
	"0." + strings.Repeat("0", 400) + "1", "1" + strings.Repeat("0", 310) + ".0", "1e99999999999999999999",
	"1e-99999999999999999999", "123456789012345678901234567890e-30", "9007199254740993", "1.0000000000000002",
	"1" + strings.Repeat("0", 308), "1" + strings.Repeat("0", 309), "0e99999999999999", "0.0e-99999999999",
}

// specialStrings are JSON string bodies (between the quotes): escapes,
// surrogates lone, paired and invalid, control characters, non-ASCII.
var specialStrings = []string{
	"w", "weight", "model.layers.0.mlp.up_proj.weight", "a b", "é", "名前", "😀", "\u2028", "\x7f",
	`\u00e9`, `\ud83d\ude00`, `\uD83D\uDE00`, `\ud800`, `\udc00`, `\ud800\ud800`, `\udc00\ud800`, `\ud800x`,
	`\ud800\u0041`, `\udbff\udfff`, `\ud800\`, `\u0000`, `\u001f`, `\"`, `\\`, `\/`, `\b\f\n\r\t`, `\u12`,
	`\uZZZZ`, `\x41`, `\a`, `\'`, "\x01", "\t", "\n", "__metadata__", `__metadata\u005f_`, "", " ",
	`\u0077`, `w\u0000`, "\xed\xa0\x80", "\xff", "\xc3", "\xf4\x90\x80\x80", "\xc0\xaf",
}

// ws are whitespace runs, those of JSON and others.
var ws = []string{"", "", "", "", " ", "  ", "\t", "\n", "\r", "\r\n", " \t\n\r "}
var badWS = []string{"\f", "\v", "\u00a0", "\x00", "\u2028", "\ufeff"}

func (g *gen) space() string {
	if g.bad(0.002) {
		return pick(g, badWS)
	}
	if g.p(0.7) {
		return ""
	}
	return pick(g, ws)
}

// number writes v, usually as the reference writer does, sometimes in
// another form of the same value or another number.
func (g *gen) number(v uint64) string {
	s := strconv.FormatUint(v, 10)
	if !g.bad(0.015) {
		return s
	}
	switch g.n(9) {
	case 0:
		return "0" + s
	case 1:
		return "-" + s
	case 2:
		return s + ".0"
	case 3:
		return s + "e0"
	case 4:
		return s + "E+0"
	case 5:
		if v%10 == 0 && v > 0 {
			return strconv.FormatUint(v/10, 10) + "e1"
		}
		return s + "0e-1"
	case 6:
		return "+" + s
	default:
		return pick(g, specialNumbers)
	}
}

// str returns a JSON string: usually the given plain one.
func (g *gen) str(plain string) string {
	if g.bad(0.02) {
		return `"` + pick(g, specialStrings) + `"`
	}
	if g.bad(0.01) {
		return `"` + pick(g, specialStrings) + plain + pick(g, specialStrings) + `"`
	}
	return `"` + plain + `"`
}

// value returns an arbitrary JSON value (or not quite), for ignored fields,
// nested at most depth levels.
func (g *gen) value(depth int) string {
	switch g.n(8) {
	case 0, 1:
		if g.bad(0.1) {
			return pick(g, specialNumbers)
		}
		return pick(g, jsonNumbers)
	case 2:
		return `"` + pick(g, specialStrings) + `"`
	case 3:
		if g.bad(0.2) {
			return pick(g, []string{"nul", "True", "[,]", "[1,]", `{"a":1,}`, `{1:2}`, `{"a"}`})
		}
		return pick(g, []string{"null", "true", "false", "[]", "{}", `""`})
	case 4, 5:
		if depth <= 1 {
			return "[]"
		}
		var parts []string
		for range g.n(4) {
			parts = append(parts, g.space()+g.value(depth-1)+g.space())
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		if depth <= 1 {
			return "{}"
		}
		var parts []string
		for range g.n(3) {
			parts = append(parts, g.space()+g.str("k")+g.space()+":"+g.space()+g.value(depth-1)+g.space())
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

// nested returns a value nested exactly d levels deep.
func (g *gen) nested(d int) string {
	if d <= 0 {
		return pick(g, []string{"1", "null", `"x"`, "1.8e308"})
	}
	if g.p(0.5) {
		return strings.Repeat("[", d) + strings.Repeat("]", d)
	}
	var b strings.Builder
	for i := range d {
		if i%2 == 0 {
			b.WriteString(`{"a":`)
		} else {
			b.WriteString("[")
		}
	}
	b.WriteString("0")
	for i := d - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString("}")
		} else {
			b.WriteString("]")
		}
	}
	return b.String()
}

// dim returns a random dimension.
func (g *gen) dim() uint64 {
	switch {
	case g.p(0.8):
		return g.u64(0, 5)
	case g.p(0.5):
		return g.u64(6, 300)
	default:
		return pick(g, []uint64{math.MaxUint64, math.MaxUint64 / 2, 1 << 32, 1 << 61, 1 << 62, 1 << 63, 3 << 62, math.MaxUint32})
	}
}

var bitsOf = map[string]uint64{
	"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
	"F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
	"F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

// byteSize is the tensor's size in bytes, or false when the reference
// rejects its shape.
func byteSize(dtype string, shape []uint64) (uint64, bool) {
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	hi, nb := bits.Mul64(n, bitsOf[dtype])
	if hi != 0 || nb%8 != 0 {
		return 0, false
	}
	return nb / 8, true
}

type genTensor struct {
	name    string
	dtype   string
	shape   []uint64
	offsets [2]uint64
}

// header generates a header from the grammar, and the length of the data
// section its tensors cover.
func (g *gen) header() (string, uint64) {
	nt := pick(g, []int{0, 1, 1, 1, 2, 2, 3, 4, 6})
	tensors := make([]genTensor, nt)
	var off uint64
	for i := range tensors {
		t := &tensors[i]
		t.name = fmt.Sprintf("t%d", i)
		if g.p(0.3) {
			t.name = pick(g, []string{"weight", "bias", "a", "model.embed", "x.y.z"}) + strconv.Itoa(i)
		}
		if g.p(0.04) && i > 0 {
			t.name = tensors[g.n(i)].name // a name given twice
		}
		t.dtype = pick(g, dtypeNames)
		for range pick(g, []int{0, 1, 1, 2, 2, 3, 4}) {
			t.shape = append(t.shape, g.dim())
		}
		size, ok := byteSize(t.dtype, t.shape)
		if !ok {
			size = g.u64(0, 8)
		}
		if size > 1<<16 {
			size = g.u64(0, 64) // the offsets will not match
		}
		t.offsets = [2]uint64{off, off + size}
		if g.bad(0.05) {
			switch g.n(6) {
			case 0:
				t.offsets[0]++
			case 1:
				t.offsets[1]--
			case 2:
				t.offsets[0], t.offsets[1] = t.offsets[1], t.offsets[0]
			case 3:
				t.offsets = [2]uint64{0, size} // overlaps
			case 4:
				t.offsets[1] = math.MaxUint64
			default:
				t.offsets[0] = math.MaxUint64 - g.u64(0, 3)
			}
		}
		off = max(off, t.offsets[1])
	}
	dataLen := off
	g.r.Shuffle(len(tensors), func(i, j int) { tensors[i], tensors[j] = tensors[j], tensors[i] })

	var members []string
	for _, t := range tensors {
		members = append(members, g.str(t.name)+g.space()+":"+g.space()+g.entry(t))
	}
	if m, ok := g.metadata(); ok {
		at := g.n(len(members) + 1)
		if g.p(0.7) {
			at = 0
		}
		members = slices.Insert(members, at, `"__metadata__"`+g.space()+":"+g.space()+m)
		if g.bad(0.02) {
			members = append(members, `"__metadata__":{}`)
		}
	}
	var b strings.Builder
	if g.p(0.05) {
		b.WriteString(pick(g, ws[4:]))
	}
	b.WriteString("{" + g.space())
	for i, m := range members {
		if i > 0 {
			b.WriteString(g.space() + "," + g.space())
		}
		b.WriteString(m)
	}
	b.WriteString(g.space())
	if g.bad(0.01) {
		b.WriteString(",")
	}
	b.WriteString("}")
	// Padding: spaces to a multiple of 8, as the reference writer pads, or
	// other whitespace, or other bytes.
	switch {
	case g.p(0.85):
		for (b.Len() % 8) != 0 {
			b.WriteByte(' ')
		}
	case g.p(0.7):
		for range g.n(9) {
			b.WriteString(pick(g, ws[4:]))
		}
	default:
		b.WriteString(pick(g, []string{"\x00", "\x00\x00\x00", "}", "x", " {}", "\f", "\u00a0", "//", " 1"}))
	}
	return b.String(), dataLen
}

// entry writes a tensor's entry.
func (g *gen) entry(t genTensor) string {
	dtype := g.str(t.dtype)
	switch {
	case g.bad(0.02):
		dtype = g.str(pick(g, badDtypes))
	case g.bad(0.03):
		dtype = pick(g, []string{
			`{"` + t.dtype + `":null}`, `{"` + t.dtype + `": null }`, `{"` + t.dtype + `":{}}`,
			`{"` + t.dtype + `":1}`, `{"` + t.dtype + `":null,"F32":null}`, `{}`, `["` + t.dtype + `"]`, `null`, `32`,
		})
	}
	var dims []string
	for _, d := range t.shape {
		dims = append(dims, g.space()+g.number(d)+g.space())
	}
	shape := "[" + strings.Join(dims, ",") + "]"
	if g.bad(0.01) {
		shape = pick(g, []string{"null", "{}", "[[1]]", `["1"]`, "[1,]", "2", "[-1]", "[1.5]"})
	}
	offsets := "[" + g.space() + g.number(t.offsets[0]) + g.space() + "," + g.space() + g.number(t.offsets[1]) + g.space() + "]"
	if g.bad(0.01) {
		offsets = pick(g, []string{"[0]", "[0,0,0]", "[]", "null", "{}", `["0","0"]`, "[0,-0]"})
	}
	if g.p(0.03) {
		return "[" + g.space() + dtype + g.space() + "," + g.space() + shape + g.space() + "," + g.space() + offsets + g.space() + "]"
	}
	fields := [][2]string{{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}}
	if g.p(0.1) {
		g.r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	}
	if g.bad(0.02) {
		fields = fields[:2] // a field missing
	}
	if g.bad(0.02) {
		fields = append(fields, fields[g.n(len(fields))]) // a field twice
	}
	if g.p(0.2) {
		var v string
		if g.p(0.25) {
			// Nesting at the limit: the header object is level 1, the
			// entry level 2.
			v = g.nested(125 + g.n(4) - 1)
		} else {
			v = g.value(4)
		}
		fields = slices.Insert(fields, g.n(len(fields)+1), [2]string{pick(g, []string{"extra", "__metadata__", "dtypes", "DTYPE", "offsets", ""}), v})
	}
	var parts []string
	for _, f := range fields {
		parts = append(parts, g.space()+g.str(f[0])+g.space()+":"+g.space()+f[1]+g.space())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// metadata writes a "__metadata__" value, or reports that there is none.
func (g *gen) metadata() (string, bool) {
	switch g.n(10) {
	case 0, 1, 2:
		return "", false
	case 3:
		return "null", true
	case 4:
		return "{" + g.space() + "}", true
	case 5:
		if g.bad(0.5) {
			return pick(g, []string{`[]`, `"x"`, `1`, `{"a":1}`, `{"a":null}`, `{"a":["b"]}`, `{"a":"b",}`, `{"a"}`, `{"a":"b" "c":"d"}`}), true
		}
	}
	var pairs []string
	keys := []string{"format", "pt", "a", "b", "total_size"}
	for range 1 + g.n(3) {
		k := pick(g, keys)
		v := g.str(pick(g, []string{"pt", "np", "", "1", "x y"}))
		if g.bad(0.02) {
			v = g.value(3) // not a string: rejected, whatever the number
		}
		pairs = append(pairs, g.space()+g.str(k)+g.space()+":"+g.space()+v+g.space())
	}
	if g.p(0.1) {
		pairs = append(pairs, pairs[0]) // a key given twice
	}
	return "{" + strings.Join(pairs, ",") + "}", true
}

// file assembles a file: the length prefix, the header, the data.
func (g *gen) file(hdr string, dataLen uint64) []byte {
	n := uint64(len(hdr))
	if g.bad(0.04) {
		n = pick(g, []uint64{n + 1, n - 1, 0, n + 8, safetensors.MaxHeaderSize, safetensors.MaxHeaderSize + 1,
			math.MaxUint64, 1 << 63, math.MaxUint64 - 7, n + dataLen})
	}
	if g.bad(0.03) {
		dataLen += pick(g, []uint64{1, 8, ^uint64(0)}) // one more, or one less
	}
	if dataLen > 1<<20 {
		dataLen = 0
	}
	out := binary.LittleEndian.AppendUint64(nil, n)
	out = append(out, hdr...)
	for i := range dataLen {
		out = append(out, byte(i*7+1))
	}
	if g.bad(0.01) {
		out = out[:g.n(8)] // shorter than the prefix
	}
	return out
}

var numberRun = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?`)

// mutate changes a corpus file a little.
func (g *gen) mutate(src []byte) []byte {
	if len(src) < 8 {
		return append([]byte(nil), src...)
	}
	n := binary.LittleEndian.Uint64(src)
	if n > uint64(len(src)-8) {
		return append([]byte(nil), src...)
	}
	hdr := append([]byte(nil), src[8:8+n]...)
	data := append([]byte(nil), src[8+n:]...)
	for range 1 + g.n(3) {
		if len(hdr) == 0 {
			break
		}
		i := g.n(len(hdr))
		switch g.n(9) {
		case 0: // a byte changed
			hdr[i] = pick(g, []byte(`{}[],:"\ 0159-+eE.tnf`+"\t\n\x00\xff\x80"))
		case 1: // a token inserted
			tok := pick(g, []string{",", ":", "[", "]", "{", "}", `""`, `"a":1,`, "null", " ", "\n", pick(g, specialNumbers), `"` + pick(g, specialStrings) + `"`})
			hdr = append(hdr[:i], append([]byte(tok), hdr[i:]...)...)
		case 2: // a span deleted
			j := min(len(hdr), i+1+g.n(8))
			hdr = append(hdr[:i], hdr[j:]...)
		case 3: // a span doubled
			j := min(len(hdr), i+1+g.n(40))
			hdr = append(hdr[:j], append(append([]byte(nil), hdr[i:j]...), hdr[j:]...)...)
		case 4, 5, 6: // a number replaced
			locs := numberRun.FindAllIndex(hdr, -1)
			if len(locs) == 0 {
				continue
			}
			l := pick(g, locs)
			repl := pick(g, specialNumbers)
			if g.p(0.5) {
				v, _ := strconv.ParseUint(string(hdr[l[0]:l[1]]), 10, 64)
				repl = strconv.FormatUint(v+pick(g, []uint64{1, ^uint64(0), 8, 1 << 32}), 10)
			}
			hdr = append(hdr[:l[0]], append([]byte(repl), hdr[l[1]:]...)...)
		case 7: // a string replaced
			q := bytes.IndexByte(hdr[i:], '"')
			if q < 0 {
				continue
			}
			s := i + q + 1
			e := bytes.IndexByte(hdr[s:], '"')
			if e < 0 {
				continue
			}
			hdr = append(hdr[:s], append([]byte(pick(g, specialStrings)), hdr[s+e:]...)...)
		default: // whitespace
			hdr = append(hdr[:i], append([]byte(pick(g, append(ws[4:], badWS...))), hdr[i:]...)...)
		}
	}
	if g.p(0.1) && len(data) > 0 {
		data = data[:g.n(len(data))]
	} else if g.p(0.05) {
		data = append(data, 0)
	}
	// Usually the prefix follows the header; otherwise it stays, which
	// makes the header end elsewhere.
	if !g.p(0.15) {
		n = uint64(len(hdr))
		if g.p(0.05) {
			n += pick(g, []uint64{1, ^uint64(0), 1 << 40})
		}
	}
	out := binary.LittleEndian.AppendUint64(nil, n)
	return append(append(out, hdr...), data...)
}

// generate returns count files and where each came from.
func (g *gen) generate(count int) (names []string, files [][]byte) {
	for i := range count {
		if g.p(0.3) && len(g.corpus) > 0 {
			k := g.n(len(g.corpus))
			files = append(files, g.mutate(g.corpus[k]))
			names = append(names, fmt.Sprintf("mutation %d of corpus file %d", i, k))
			continue
		}
		// Half the files break rarely, so that many reach the reference's
		// later checks or are accepted.
		g.wild = pick(g, []float64{0.1, 1})
		hdr, dataLen := g.header()
		files = append(files, g.file(hdr, dataLen))
		names = append(names, fmt.Sprintf("generated %d", i))
	}
	return names, files
}

// TestReferenceGenerated compares every entry point with the reference on
// files generated afresh: INTEROP_COUNT of them (4000 by default), from
// INTEROP_SEED (the clock by default; the log and a failure print it).
func TestReferenceGenerated(t *testing.T) {
	oracle(t)
	s := seed(t)
	n := count(t, 4000)
	t.Logf("INTEROP_SEED=%d INTEROP_COUNT=%d", s, n)
	_, corpusFiles := corpus(t)
	g := &gen{r: rand.New(rand.NewPCG(s, 0x5afe)), corpus: corpusFiles}
	names, files := g.generate(n)
	compareWithOracle(t, names, files)
	if t.Failed() {
		t.Logf("reproduce with INTEROP_SEED=%d INTEROP_COUNT=%d", s, n)
	}
}
