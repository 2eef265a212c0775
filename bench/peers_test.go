//go:build peers

package bench

import (
	"runtime"
	"testing"
	"time"

	maruel "github.com/maruel/safetensors"
	nlpodyssey "github.com/nlpodyssey/safetensors"
)

// The peers: the Go safetensors libraries in use, each parsing a whole file
// image held in memory.
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

// block is how long each side runs before the other takes its turn.
const block = 20 * time.Millisecond

// BenchmarkHeaderRatio parses each file with this package and with each peer
// in alternating blocks of about 20 ms, the order swapped each round, and
// reports each side's time per parse in its fastest block, and how many times
// faster this package is, as "x". Alternating blocks keeps a noisy machine
// from favouring either side, and the fastest block is the one least
// disturbed. Between blocks, untimed, the garbage is collected, so that
// neither side pays for the other's, and the next side warms up for 5 ms.
func BenchmarkHeaderRatio(b *testing.B) {
	ours := parsers[0]
	for _, f := range headerFiles(b) {
		for _, peer := range parsers[1:] {
			b.Run("file="+f.name+"/peer="+peer.name, func(b *testing.B) {
				sides := []parser{ours, peer}
				reps := make([]int, len(sides))
				for i, s := range sides {
					// Size each side's block from one timed parse.
					start := time.Now()
					if err := s.parse(f.data); err != nil {
						b.Fatal(err)
					}
					reps[i] = max(1, int(block/max(time.Since(start), time.Microsecond)))
				}
				best := make([]float64, len(sides)) // the fastest block's ns per parse
				round := 0
				for b.Loop() {
					for k := range sides {
						i := (k + round) % len(sides)
						b.StopTimer()
						runtime.GC()
						warm := time.Now()
						for time.Since(warm) < block/4 { // warm up, untimed
							sides[i].parse(f.data)
						}
						b.StartTimer()
						start := time.Now()
						for range reps[i] {
							if err := sides[i].parse(f.data); err != nil {
								b.Fatal(err)
							}
						}
						ns := float64(time.Since(start).Nanoseconds()) / float64(reps[i])
						if best[i] == 0 || ns < best[i] {
							best[i] = ns
						}
					}
					round++
				}
				b.ReportMetric(best[0], "ours-ns/parse")
				b.ReportMetric(best[1], "peer-ns/parse")
				b.ReportMetric(best[1]/best[0], "x")
			})
		}
	}
}
