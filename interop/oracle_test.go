package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// The Rust reference as an oracle: interop/oracle is a small program on the
// safetensors crate that prints the crate's verdict on each file it is
// given. interop/run builds it and passes its path in INTEROP_ORACLE.

// need returns the value of the environment variable that names a tool of
// the suite, or skips the test when it is not set; under INTEROP_REQUIRE=1,
// as in CI, it fails instead, so that a missing tool cannot pass for a
// passing suite.
func need(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	msg := fmt.Sprintf("%s is not set: %s is missing (interop/run sets it up)", env, what)
	if os.Getenv("INTEROP_REQUIRE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// oracle returns the path of the oracle program.
func oracle(t testing.TB) string {
	return need(t, "INTEROP_ORACLE", "the Rust reference oracle (interop/oracle)")
}

// refTensor is one tensor entry as the oracle prints it.
type refTensor struct {
	Name        string    `json:"name"`
	DType       string    `json:"dtype"`
	Shape       []uint64  `json:"shape"`
	DataOffsets [2]uint64 `json:"data_offsets"`
}

// refVerdict is the oracle's answer for one file.
type refVerdict struct {
	Path  string `json:"path"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	// ErrorAnyOf lists every variant the reference may give, when its
	// verdict depends on hash-map order (tensors with equal offsets).
	ErrorAnyOf []string           `json:"error_any_of"`
	Message    string             `json:"message"`
	HeaderLen  uint64             `json:"header_len"`
	Metadata   *map[string]string `json:"metadata"`
	Tensors    []refTensor        `json:"tensors"`
}

// errors returns the variants the verdict allows.
func (v *refVerdict) errors() []string {
	if len(v.ErrorAnyOf) > 0 {
		return v.ErrorAnyOf
	}
	return []string{v.Error}
}

// runOracle runs the oracle in the given mode with one operand per line of
// input, and returns its answers in order.
func runOracle(t testing.TB, mode string, lines []string) []refVerdict {
	t.Helper()
	cmd := exec.Command(oracle(t), mode)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "oracle %s: %s", mode, stderr.String())
	var verdicts []refVerdict
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		var v refVerdict
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "oracle output %q", sc.Text())
		verdicts = append(verdicts, v)
	}
	require.NoError(t, sc.Err())
	require.Len(t, verdicts, len(lines), "oracle %s answered %d of %d", mode, len(verdicts), len(lines))
	return verdicts
}

// checkFiles returns the oracle's verdict on each of the files.
func checkFiles(t testing.TB, paths []string) []refVerdict {
	t.Helper()
	vs := runOracle(t, "check", paths)
	for i, v := range vs {
		require.Equal(t, paths[i], v.Path)
		require.NotEqual(t, "Inconsistent", v.Error, "%s: the reference's own entry points disagree", v.Path)
	}
	return vs
}

// variants maps the reference's error variants to the sentinels, as the
// table of docs/format.md does.
var variants = map[string]error{
	"HeaderTooSmall":               safetensors.ErrHeaderTooSmall,
	"HeaderTooLarge":               safetensors.ErrHeaderTooLarge,
	"InvalidHeaderLength":          safetensors.ErrInvalidHeaderLength,
	"InvalidHeader":                safetensors.ErrHeaderNotUTF8,
	"InvalidHeaderDeserialization": safetensors.ErrInvalidHeader,
	"InvalidOffset":                safetensors.ErrInvalidOffset,
	"ValidationOverflow":           safetensors.ErrShapeOverflow,
	"MisalignedSlice":              safetensors.ErrMisalignedSlice,
	"TensorInvalidInfo":            safetensors.ErrSizeMismatch,
	"MetadataIncompleteBuffer":     safetensors.ErrIncompleteBuffer,
	"TensorNotFound":               safetensors.ErrTensorNotFound,
}

// variantOf returns the name of the one variant whose sentinel err matches,
// or a description of what is wrong with err.
func variantOf(err error) string {
	var names []string
	for name, s := range variants {
		if errors.Is(err, s) {
			names = append(names, name)
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return fmt.Sprintf("error matching %d sentinels %v: %v", len(names), names, err)
}

// writeFiles writes each file into dir as NNNNN.safetensors and returns
// the paths.
func writeFiles(t testing.TB, dir string, files [][]byte) []string {
	t.Helper()
	paths := make([]string, len(files))
	for i, data := range files {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%05d.safetensors", i))
		require.NoError(t, os.WriteFile(paths[i], data, 0o644))
	}
	return paths
}
