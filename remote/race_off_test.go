//go:build !race

package remote

// raceEnabled says whether the race detector is on: it makes sync.Pool
// drop items, and so allocation counts differ.
const raceEnabled = false
