package bench

import (
	"fmt"
	"testing"

	"github.com/safetensors-go/safetensors"
)

// A parser parses and validates a whole file image held in memory, as
// safetensors.NewReader does.
type parser struct {
	name  string
	parse func([]byte) error
}

// parsers lists this package; peers_test.go adds the peers when built with
// the "peers" tag.
var parsers = []parser{
	{"safetensors-go", func(b []byte) error {
		_, err := safetensors.NewReader(b)
		return err
	}},
}

// BenchmarkHeader parses each file with each parser. The bytes per second are
// header bytes, since parsing does not touch the data.
func BenchmarkHeader(b *testing.B) {
	for _, f := range headerFiles(b) {
		for _, p := range parsers {
			if err := p.parse(f.data); err != nil {
				b.Fatalf("%s rejects %s: %v", p.name, f.name, err)
			}
			b.Run(fmt.Sprintf("file=%s/parser=%s", f.name, p.name), func(b *testing.B) {
				b.SetBytes(int64(f.hdr.Len))
				b.ReportAllocs()
				for b.Loop() {
					if err := p.parse(f.data); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(f.hdr.Tensors)), "ns/tensor")
			})
		}
	}
}
