package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
)

// metadataHeader returns a file whose header is n distinct metadata keys
// with one-byte values and no tensors, as a hostile file may hold, and the
// same keys and values as strings.
func metadataHeader(n int) (file []byte, keys, values []string) {
	var hdr strings.Builder
	hdr.WriteString(`{"__metadata__":{`)
	keys, values = make([]string, n), make([]string, n)
	for i := range n {
		if i > 0 {
			hdr.WriteByte(',')
		}
		keys[i], values[i] = fmt.Sprintf("%06x", i), string(rune('a'+i%26))
		fmt.Fprintf(&hdr, "%q:%q", keys[i], values[i])
	}
	hdr.WriteString("}}")
	file = binary.LittleEndian.AppendUint64(nil, uint64(hdr.Len()))
	return append(file, hdr.String()...), keys, values
}

// BenchmarkHeaderMetadataKeys parses a header of many distinct metadata keys
// (13 header bytes each: "00a3f1":"b",) beside its floor: a Go map of the same entries,
// made with the right size from strings already in memory. Each iteration
// times both, one after the other, and the metrics give the time ratio and
// the bytes allocated per header byte by each and their difference.
func BenchmarkHeaderMetadataKeys(b *testing.B) {
	sizes := []int{100_000, 7_600_000} // the second is a 99 MB header
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		data, keys, values := metadataHeader(n)
		hdrLen := float64(len(data) - 8)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data) - 8))
			var ours, floor time.Duration
			var oursAlloc, floorAlloc uint64
			var ms runtime.MemStats
			measure := func(f func()) (time.Duration, uint64) {
				runtime.ReadMemStats(&ms)
				before := ms.TotalAlloc
				start := time.Now()
				f()
				d := time.Since(start)
				runtime.ReadMemStats(&ms)
				return d, ms.TotalAlloc - before
			}
			for b.Loop() {
				d, a := measure(func() {
					r, err := safetensors.NewReader(data)
					if err != nil || len(r.Header().Metadata) != n {
						b.Fatal(err)
					}
				})
				ours, oursAlloc = ours+d, oursAlloc+a
				d, a = measure(func() {
					m := make(map[string]string, len(keys))
					for i, k := range keys {
						m[k] = values[i]
					}
					if len(m) != n {
						b.Fatal(len(m))
					}
				})
				floor, floorAlloc = floor+d, floorAlloc+a
			}
			iters := float64(b.N)
			b.ReportMetric(float64(ours)/float64(floor), "time/floor")
			b.ReportMetric(float64(oursAlloc)/iters/hdrLen, "B/hdrB")
			b.ReportMetric(float64(floorAlloc)/iters/hdrLen, "floor-B/hdrB")
			b.ReportMetric((float64(oursAlloc)-float64(floorAlloc))/iters/hdrLen, "extra-B/hdrB")
		})
	}
}

// withoutMetadata returns a copy of the file data whose header lacks its
// "__metadata__" member, an object of strings without braces inside: the
// member and its comma become spaces at the header's end, so that the
// header keeps its length and the tensors their offsets.
func withoutMetadata(tb testing.TB, data []byte) []byte {
	tb.Helper()
	const key = `"__metadata__":{`
	n := binary.LittleEndian.Uint64(data)
	hdr := data[8 : 8+n]
	start := bytes.Index(hdr, []byte(key))
	if start < 0 {
		tb.Fatal("no metadata")
	}
	end := start + len(key) + bytes.IndexByte(hdr[start+len(key):], '}') + 1
	if hdr[end] == ',' {
		end++
	}
	out := bytes.Clone(data)
	stripped := append(append(bytes.Clone(hdr[:start]), hdr[end:]...), bytes.Repeat([]byte{' '}, end-start)...)
	copy(out[8:], stripped)
	return out
}

// BenchmarkHeaderSmallMetadata parses each file of BenchmarkHeader as it is,
// with the metadata {"format":"pt"} that most files carry, and without its
// "__metadata__" member, in alternating rounds of about 2 ms (race), and
// reports how many times as long the parse with the metadata takes ("x"):
// what the defence against headers of millions of metadata keys costs an
// ordinary header, which should be nothing. Estimating the distinct keys
// from all 4,096 registers of the sketch for every header made x 1.6 for
// typical_291 and 1.05 for many_5000.
func BenchmarkHeaderSmallMetadata(b *testing.B) {
	for _, f := range headerFiles(b) {
		plain := withoutMetadata(b, f.data)
		if r, err := safetensors.NewReader(plain); err != nil || len(r.Header().Metadata) != 0 || len(r.Header().Tensors) != len(f.hdr.Tensors) {
			b.Fatalf("%s without metadata: %v", f.name, err)
		}
		b.Run("file="+f.name, func(b *testing.B) {
			reps := max(1, int(2e6/f.hdr.Len)) // at about a byte a nanosecond
			side := func(data []byte) func() {
				return func() {
					for range reps {
						if _, err := safetensors.NewReader(data); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			race(b, int(f.hdr.Len)*reps, []string{"without", "with"}, side(plain), side(f.data))
		})
	}
}
