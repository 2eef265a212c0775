package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/dataset"
	"github.com/safetensors-go/safetensors/internal/linktest"
)

const llamaDir = "../../testdata/models/llama"

func TestConvertRefusesItsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	data, err := os.ReadFile(tinyModel)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(in, data, 0o644))
	require.NoError(t, os.Link(in, filepath.Join(dir, "hard.safetensors")))
	outs := []string{in, filepath.Join(dir, ".", "in.safetensors"), filepath.Join(dir, "hard.safetensors")}
	if linktest.Symlink(t, in, filepath.Join(dir, "sym.safetensors")) {
		outs = append(outs, filepath.Join(dir, "sym.safetensors"))
	}
	for _, out := range outs {
		status, _, stderr := runCmd("convert", "--dtype", "bf16", in, out)
		assert.Equal(t, exitTrouble, status, out)
		assert.Contains(t, stderr, "are the same file", out)
		got, err := os.ReadFile(in)
		require.NoError(t, err)
		assert.Equal(t, data, got, "the input is untouched")
	}
	// Any case of the dtype's name.
	for _, d := range []string{"bf16", "Bf16", "f16", "F32"} {
		status, _, stderr := runCmd("convert", "--dtype", d, in, filepath.Join(dir, d+".safetensors"))
		assert.Equal(t, exitOK, status, stderr)
	}
}

func TestErrorPrefixOnce(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk")
	require.NoError(t, os.WriteFile(junk, []byte("PK\x03\x04 not a safetensors file at all"), 0o644))
	for _, args := range [][]string{
		{"inspect", junk}, {"stats", junk}, {"check", junk}, {"diff", junk, junk},
		{"stats", "no-such-file"}, {"convert", "--dtype", "F16", junk, junk + ".out"}, {"quantize", junk, junk + ".q"},
	} {
		status, _, stderr := runCmd(args...)
		want := exitFail // junk is an invalid file
		if args[1] == "no-such-file" {
			want = exitTrouble
		}
		assert.Equal(t, want, status, args)
		// One prefix: "safetensors CMD: " or "safetensors: " once in all.
		assert.Len(t, regexp.MustCompile(`\bsafetensors( (inspect|validate|stats|check|diff|convert|quantize|version))?: `).FindAllString(stderr, -1), 1, "%v: %s", args, stderr)
		assert.True(t, strings.HasPrefix(stderr, "safetensors "+args[0]+": "), stderr)
		if args[1] == "no-such-file" {
			assert.Equal(t, 1, strings.Count(stderr, "no-such-file"), stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	status, stdout, _ := runCmd("version")
	assert.Equal(t, exitOK, status)
	assert.Regexp(t, `^safetensors \S+ \(github.com/safetensors-go/safetensors.*\) go1\.\d+\S* \w+/\w+\n$`, stdout)
	status, _, _ = runCmd("version", "x")
	assert.Equal(t, exitTrouble, status)
}

func TestCheckCommand(t *testing.T) {
	status, stdout, stderr := runCmd("check", llamaDir)
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "llama configuration checked: 0 errors, 0 warnings")

	// Warnings only: status 0; errors: 1, in text and JSON.
	r, err := safetensors.Open(filepath.Join(llamaDir, "model.safetensors"))
	require.NoError(t, err)
	ts, err := r.Tensors()
	require.NoError(t, err)
	for i := range ts {
		ts[i].Data = append([]byte(nil), ts[i].Data...)
	}
	r.Close()
	dir := t.TempDir()
	for i := range ts {
		if ts[i].Name == "model.layers.1.mlp.up_proj.weight" {
			clear(ts[i].Data)
		}
	}
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil))
	status, stdout, _ = runCmd("check", "--config", filepath.Join(llamaDir, "config.json"), dir)
	assert.Equal(t, exitOK, status)
	assert.Contains(t, stdout, `warning: tensor "model.layers.1.mlp.up_proj.weight": all 384 values are zero`)

	for i := range ts {
		if ts[i].Name == "model.layers.1.mlp.up_proj.weight" {
			ts[i].Data[6], ts[i].Data[7] = 0x00, 0x7e // NaN at index 3
		}
	}
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil))
	status, stdout, _ = runCmd("check", "--json", "--config", filepath.Join(llamaDir, "config.json"), dir)
	assert.Equal(t, exitFail, status)
	var rep struct {
		Family   string
		Findings []struct {
			Severity, Kind, Tensor string
			Count                  int
			First                  *int `json:"first_index"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	assert.Equal(t, "llama", rep.Family)
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, "error", rep.Findings[0].Severity)
	assert.Equal(t, "nan", rep.Findings[0].Kind)
	assert.Equal(t, 3, *rep.Findings[0].First)

	status, stdout, _ = runCmd("check", dir) // no config.json beside it
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "note: no config.json")
}

func TestCheckURL(t *testing.T) {
	srv := httptest.NewServer(http.FileServer(http.Dir(llamaDir)))
	defer srv.Close()
	status, stdout, stderr := runCmd("check", "--config", filepath.Join(llamaDir, "config.json"), srv.URL+"/model.safetensors")
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "30 tensors, 13792 bytes (13.5 KiB), llama configuration checked: 0 errors, 0 warnings")
}

func TestQuantizeAndDiff(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "q")
	status, stdout, stderr := runCmd("quantize", llamaDir, dst)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "21 weights quantized to int8 per channel")
	status, _, stderr = runCmd("check", dst)
	assert.Equal(t, exitOK, status, "a quantized model checks clean: %s", stderr)

	status, stdout, _ = runCmd("diff", llamaDir, dst)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "only in "+dst+": model.layers.0.mlp.down_proj.weight_scale")
	assert.Contains(t, stdout, "model.layers.0.mlp.down_proj.weight: different (dtype F16, I8): 384 of 384 values differ")
	assert.Contains(t, stdout, "9 tensors identical, 21 different, 0 only in A, 21 only in B")

	status, stdout, _ = runCmd("diff", "--json", llamaDir, llamaDir)
	assert.Equal(t, exitOK, status)
	assert.Contains(t, stdout, `"identical_count": 30`)

	status, _, stderr = runCmd("quantize", "--per", "row", llamaDir, dst+"2")
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "--per must be channel or tensor")
}

func TestValidateDataset(t *testing.T) {
	for _, sep := range []string{"__", "/"} {
		dir := filepath.Join(t.TempDir(), "ds")
		w, err := dataset.Create(dir, dataset.KeyValue, []dataset.Column{
			{Name: "x", DType: safetensors.F32, Shape: []uint64{3}},
		}, dataset.Separator(sep))
		require.NoError(t, err)
		for _, k := range []string{"a", "b"} {
			require.NoError(t, w.WriteKV(k, make([]byte, 12)))
		}
		require.NoError(t, w.Close())
		status, stdout, _ := runCmd("validate", "--separator", sep, dir)
		assert.Equal(t, exitOK, status, stdout)
		assert.Equal(t, dir+": ok, dataset, key-value mode, 2 samples in 1 shard\n", stdout)
		status, _, stderr := runCmd("inspect", "--separator", sep, dir)
		assert.Equal(t, exitOK, status, stderr)
		if sep != "__" {
			status, stdout, _ = runCmd("validate", dir)
			assert.Equal(t, exitFail, status)
			assert.Contains(t, stdout, "--separator")
			status, _, stderr = runCmd("inspect", dir)
			assert.Equal(t, exitFail, status)
			assert.Contains(t, stderr, "--separator")
		}
	}
}
