package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDataset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	var out bytes.Buffer
	require.NoError(t, run(&out, dir))
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 7)
	assert.Regexp(t, `^wrote 5 samples in 1 shard\(s\), \d+ bytes$`, string(lines[0]))
	// sqrt(2) = 1.41421..., whose BF16 truncation is 1.4140625.
	assert.Equal(t, "user2: embedding [2 1.41 -1 0.5] label 0", string(lines[3]))
	// 3 = 0x4040, sqrt(3) = 1.732 → 0x3fdd truncated, -1 = 0xbf80, 0.5 = 0x3f00.
	assert.Equal(t, "user3__embedding: BF16 [4], 40 40 dd 3f 80 bf 00 3f", string(lines[6]))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 3, "a shard, the manifest and the index")
}
