// Package bench compares this safetensors package with ceilings and peers.
// It is a separate module so that the library's own dependencies stay clean.
// See README.md for how to run it.
package bench
