package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSharded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out") // created by the example, as by save_pretrained
	var out bytes.Buffer
	require.NoError(t, run(&out, "../../testdata/tiny-llama.safetensors", dir, 300_000))
	assert.Equal(t, "wrote 4 shards: [model-00001-of-00004.safetensors model-00002-of-00004.safetensors model-00003-of-00004.safetensors model-00004-of-00004.safetensors]\n"+
		"39 tensors; lm_head.weight F32 [512 64] is in model-00001-of-00004.safetensors\n", out.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 5, "4 shards and the index, no temporary file")
	_, err = os.Stat(filepath.Join(dir, "model.safetensors.index.json"))
	assert.NoError(t, err)
}
