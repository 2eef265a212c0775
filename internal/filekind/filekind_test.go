package filekind

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Kind
	}{
		{"version https://git-lfs.github.com/spec/v1\noid sha256:00\n", LFSPointer},
		{"<!DOCTYPE html><html>", HTML},
		{"<!doctype HTML>\n", HTML},
		{"\xef\xbb\xbf\r\n  <html lang=en>", HTML},
		{"<html>\x00\x00", Unknown}, // a NUL within the first 8 bytes: not text
		{`<?xml version="1.0"?><!DOCTYPE html><html>`, HTML},
		{`<?xml version="1.0"?><Error/>`, XML},
		{`{"metadata": {}, "weight_map": {}}`, Index},
		{`{"_class_name": "P", "_diffusers_version": "0.30.0"}`, Pipeline},
		{`[{"type": "sentence_transformers.models.Transformer"}]`, Modules},
		{`{"error": "Entry not found"}`, JSONError},
		{"{\n  \"metadata\": {", JSON},
		{"{\x00\x00\x00\x01\x00\x00\x00", Unknown}, // a damaged length, not JSON
		{"PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl", PyTorchZip},
		{"PK\x03\x04\x14\x00\x00\x00\x08\x00readme.txt", Zip},
		{"PK\x05\x06", EmptyZip},
		{"\x80\x02\x8a\x0a", Pickle},
		{"\x80\x05\x95", Pickle},
		{"GGUF", GGUF},
		{"\x89HDF\r\n\x1a\n", HDF5},
		{"\x93NUMPY\x01\x00", NumPy},
		{"\x1f\x8b\x08", Gzip},
		{"\x28\xb5\x2f\xfd", Zstd},
		{"Entry not found", Text},
		{"Entry", Unknown}, // too short to tell text
		{"caf\xc3\xa9 au lait", Text},
		{"caf\xc3 au lait", Unknown}, // invalid UTF-8
		{"", Unknown},
		{"\x08\x00\x00\x00\x00\x00\x00\x00{}      ", Unknown}, // a safetensors file
	} {
		assert.Equal(t, tt.want, Of([]byte(tt.in)), "%q", tt.in)
	}
}

// TestOfShort: every prefix of every kind, from 0 bytes, without a panic.
func TestOfShort(t *testing.T) {
	for _, s := range []string{
		"version https://git-lfs.github.com/spec/v1\n", "\xef\xbb\xbf<!doctype html>", "PK\x03\x04\x14\x00data.pkl",
		"\x80\x02\x8a\x0al\xfc\x9cF", "GGUF\x03\x00\x00\x00", "caf\xc3\xa9 caf\xc3\xa9", `{"weight_map": {}}`,
	} {
		for n := range len(s) + 1 {
			Of([]byte(s[:n]))
			Excerpt([]byte(s[:n]))
			LFS([]byte(s[:n]))
		}
	}
}

func TestLFS(t *testing.T) {
	const hex = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
	for _, tt := range []struct {
		in   string
		oid  string
		size int64
	}{
		{"version https://git-lfs.github.com/spec/v1\noid sha256:" + hex + "\nsize 548105171\n", "sha256:" + hex, 548105171},
		{"version https://git-lfs.github.com/spec/v1\r\noid sha256:" + hex + "\r\nsize 0\r\n", "sha256:" + hex, 0},
		{"version https://git-lfs.github.com/spec/v1\noid sha256:" + hex[:10] + "\nsize +5\n", "", -1},
		{"version https://git-lfs.github.com/spec/v1\noid sha256:" + hex[:63] + "G\nsize 99999999999999999999\n", "", -1},
		{"version https://git-lfs.github.com/spec/v1\n", "", -1},
	} {
		oid, size := LFS([]byte(tt.in))
		assert.Equal(t, tt.oid, oid, "%q", tt.in)
		assert.Equal(t, tt.size, size, "%q", tt.in)
	}
}

func TestExcerpt(t *testing.T) {
	assert.Equal(t, `"Entry not found"`, Excerpt([]byte("\xef\xbb\xbf  Entry not found\nmore")))
	assert.Equal(t, `"`+strings.Repeat("a", 64)+`"`, Excerpt([]byte(strings.Repeat("a", 100))))
	assert.Equal(t, `"`+strings.Repeat("a", 63)+`"`, Excerpt([]byte(strings.Repeat("a", 63)+"é")), "a character cut at 64 bytes is left out")
	assert.Equal(t, `"\x00\x01"`, Excerpt([]byte("\x00\x01")))
}

func TestResolveURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://huggingface.co/org/model/blob/main/model.safetensors", "https://huggingface.co/org/model/resolve/main/model.safetensors"},
		{"https://huggingface.co/org/model/blob/main/unet/diffusion_pytorch_model.safetensors?download=true#x", "https://huggingface.co/org/model/resolve/main/unet/diffusion_pytorch_model.safetensors"},
		{"https://huggingface.co/org/model/tree/main", "https://huggingface.co/org/model/resolve/main"},
		{"https://huggingface.co/datasets/org/data/blob/v1.0/x.safetensors", "https://huggingface.co/datasets/org/data/resolve/v1.0/x.safetensors"},
		{"https://hf-mirror.com/org/model/blob/main/model.safetensors", "https://hf-mirror.com/org/model/resolve/main/model.safetensors"},
		{"HTTPS://HuggingFace.co/org/model/blob/main/model.safetensors", "https://HuggingFace.co/org/model/resolve/main/model.safetensors"},
		{"https://huggingface.co/org/model/resolve/main/model.safetensors", ""},
		{"https://github.com/org/repo/blob/main/model.safetensors", ""},
		{"https://example.com/blob/x", ""}, // no repository before it
		{"s3://bucket/org/blob/x", ""},
		{"::", ""},
	} {
		assert.Equal(t, tt.want, ResolveURL(tt.in), tt.in)
	}
}
