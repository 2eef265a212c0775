//go:build peers

package bench

import (
	"testing"
	"time"

	maruel "github.com/maruel/safetensors"
	nlpodyssey "github.com/nlpodyssey/safetensors"
	"github.com/safetensors-go/safetensors"
)

// The peers: the Go safetensors libraries in use. Their parsers of a whole
// file image in memory.
func init() {
	parsers = append(parsers,
		parser{"nlpodyssey", func(b []byte) error {
			_, err := nlpodyssey.Deserialize(b)
			return err
		}},
		parser{"maruel", func(b []byte) error {
			_, err := maruel.Deserialize(b)
			return err
		}},
	)
}

// BenchmarkHeaderRatio parses each file with this package and with each peer
// in turn, alternating which goes first, and reports how many times faster
// this package is than the peer, as "x". Measuring both sides in the same
// loop keeps a noisy machine from favouring either.
func BenchmarkHeaderRatio(b *testing.B) {
	ours := parsers[0]
	for _, f := range headerFiles(b) {
		for _, peer := range parsers[1:] {
			b.Run("file="+f.name+"/peer="+peer.name, func(b *testing.B) {
				var tOurs, tPeer time.Duration
				i := 0
				for b.Loop() {
					sides := [2]parser{ours, peer}
					if i%2 == 1 {
						sides = [2]parser{peer, ours}
					}
					i++
					for _, s := range sides {
						start := time.Now()
						if err := s.parse(f.data); err != nil {
							b.Fatal(err)
						}
						if s.name == ours.name {
							tOurs += time.Since(start)
						} else {
							tPeer += time.Since(start)
						}
					}
				}
				b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "ours-ns/op")
				b.ReportMetric(float64(tPeer.Nanoseconds())/float64(b.N), "peer-ns/op")
				b.ReportMetric(float64(tPeer)/float64(tOurs), "x")
			})
		}
	}
	_ = safetensors.MaxHeaderSize
}
