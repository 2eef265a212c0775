//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package pagecache

import "os"

// StartWriteback would ask the system to start writing f's dirty pages to
// disk; here the standard library offers no sync_file_range, and it does
// nothing: the final sync writes them all.
func StartWriteback(f *os.File) {}
