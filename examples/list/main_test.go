package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const corpus = "../../testdata/conformance"

func TestList(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(corpus, "valid", "metadata_present.safetensors")
	require.NoError(t, list(&out, path))
	assert.Equal(t, path+`: 2 tensors, 24 bytes of data after a 176-byte header
metadata "author": "someone"
metadata "empty": ""
metadata "format": "pt"
NAME  DTYPE  SHAPE   BYTES  OFFSETS
b     F32    [2]     8      [0, 8)
w     F32    [2, 2]  16     [8, 24)
F32: 24 bytes
`, out.String())
}

func TestListInvalid(t *testing.T) {
	var out bytes.Buffer
	err := list(&out, filepath.Join(corpus, "invalid", "layout_hole_4.safetensors"))
	assert.True(t, errors.Is(err, safetensors.ErrInvalidOffset), "%v", err)

	err = list(&out, filepath.Join(corpus, "invalid", "extra_1_byte.safetensors"))
	assert.True(t, errors.Is(err, safetensors.ErrIncompleteBuffer), "%v", err)
}
