//go:build linux

package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/verify"
)

// BenchmarkVerify times verify.Model on a sharded model in the page cache
// (every file hashed with SHA-256, files in parallel, and the structure
// checked) against its peer, openssl dgst -sha256 run on the same files
// with one process per core, each given its share of the files, in the
// same run: "x" is verify's speed over openssl's. Skipped, with the
// reason, where openssl is not installed.
func BenchmarkVerify(b *testing.B) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		b.Skip("openssl is not installed: the peer of BenchmarkVerify")
	}
	for _, shards := range []int{1, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			dir := b.TempDir()
			const total = 512 << 20
			var tensors []safetensors.Tensor
			for i := range 16 {
				data := make([]byte, total/16)
				_, _ = rand.Read(data)
				tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("t%02d", i), DType: safetensors.U8, Shape: []uint64{total / 16}, Data: data})
			}
			if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(int64(total/shards))); err != nil {
				b.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				b.Fatal(err)
			}
			var files []string
			var size int64
			for _, e := range entries {
				info, _ := e.Info()
				size += info.Size()
				files = append(files, filepath.Join(dir, e.Name()))
			}
			procs := min(runtime.GOMAXPROCS(0), len(files))
			peer := func() error {
				cmds := make([]*exec.Cmd, procs)
				for p := range cmds {
					var mine []string
					for i := p; i < len(files); i += procs {
						mine = append(mine, files[i])
					}
					cmds[p] = exec.Command(openssl, append([]string{"dgst", "-sha256"}, mine...)...)
					if err := cmds[p].Start(); err != nil {
						return err
					}
				}
				for _, c := range cmds {
					if err := c.Wait(); err != nil {
						return err
					}
				}
				return nil
			}
			run := func() error {
				r, err := verify.Model(context.Background(), dir)
				if err != nil {
					return err
				}
				if r.Structure != nil || len(r.Unchecked()) != len(files) {
					return fmt.Errorf("unexpected report: %v", r.Err())
				}
				return nil
			}
			if err := peer(); err != nil { // and into the page cache
				b.Fatal(err)
			}
			raceSides(b, size, side{name: "verify", run: run}, side{name: "openssl", run: peer})
		})
	}
}
