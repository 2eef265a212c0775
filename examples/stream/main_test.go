package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStream(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.safetensors")
	var out bytes.Buffer
	require.NoError(t, run(&out, path, 8))
	assert.Equal(t, "wrote and read 8 MiB of tensors in 1024 KiB chunks; checksums match\n", out.String())
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Greater(t, info.Size(), int64(8<<20))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}
