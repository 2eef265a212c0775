package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewMeter: no meter for what is not a terminal (a buffer, as the
// tests' stderr; a file), nor under --json.
func TestNewMeter(t *testing.T) {
	var out bytes.Buffer
	assert.Nil(t, newMeter(&out, "x", false), "not a terminal")
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	assert.Nil(t, newMeter(f, "x", false), "a regular file")
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		assert.NotNil(t, newMeter(tty, "x", false), "a terminal")
		assert.Nil(t, newMeter(tty, "x", true), "a terminal, quiet")
	}
}
