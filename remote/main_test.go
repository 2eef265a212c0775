package remote

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests and, with -v, says how many range requests went
// over the package's own connections (direct.go) rather than the client.
func TestMain(m *testing.M) {
	code := m.Run()
	if testing.Verbose() {
		fmt.Printf("remote: %d range requests over the package's own connections\n", directRequests.Load())
	}
	os.Exit(code)
}
