//go:build unix

package safetensors_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/safetensors-go/safetensors"
)

// sumBytes adds up a tensor's bytes, reading Data itself: a fault on a file
// truncated while mapped becomes an error rather than the end of the
// program, as in the package's own functions.
func sumBytes(t safetensors.Tensor) (sum uint64, err error) {
	old := debug.SetPanicOnFault(true) // for this goroutine only
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, isFault := r.(interface{ Addr() uintptr }); !isFault {
				panic(r) // not a memory fault: a bug, let it crash
			}
			err = fmt.Errorf("tensor %q: %w", t.Name, safetensors.ErrFileChanged)
		}
	}()
	for _, b := range t.Data {
		sum += uint64(b)
	}
	return sum, nil
}

func ExampleErrFileChanged() {
	path := filepath.Join(os.TempDir(), "example-truncated.safetensors")
	defer os.Remove(path)
	w := safetensors.Tensor{Name: "w", DType: safetensors.U8, Shape: []uint64{1 << 16}, Data: bytes.Repeat([]byte{1}, 1<<16)}
	if err := safetensors.WriteFile(path, []safetensors.Tensor{w}, nil); err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	t, err := r.Tensor("w")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sumBytes(t))

	// Another program truncates the file.
	if err := os.Truncate(path, int64(r.Header().DataOffset())); err != nil {
		log.Fatal(err)
	}
	_, err = t.Stats() // the package's functions guard themselves
	fmt.Println(errors.Is(err, safetensors.ErrFileChanged))
	_, err = sumBytes(t) // and so does sumBytes
	fmt.Println(errors.Is(err, safetensors.ErrFileChanged))
	var total uint64
	err = safetensors.GuardFaults(func() error { // the same, in one call
		for _, b := range t.Data {
			total += uint64(b)
		}
		return nil
	})
	fmt.Println(errors.Is(err, safetensors.ErrFileChanged))
	// Output:
	// 65536 <nil>
	// true
	// true
	// true
}
