package main

import (
	"errors"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpCommand checks that 'safetensors help COMMAND' and every form of
// 'COMMAND -h' print the command's help, the same text, once: its usage line
// once, no paragraph twice, and the paragraph about URLs at most once.
func TestHelpCommand(t *testing.T) {
	for _, c := range commands {
		status, help, stderr := runCmd("help", c.name)
		assert.Equal(t, exitOK, status, c.name)
		assert.Empty(t, stderr, c.name)
		usageLine := "usage: " + strings.TrimSpace("safetensors "+c.name+" "+c.args) + "\n"
		assert.True(t, strings.HasPrefix(help, usageLine), "help %s starts with %q:\n%s", c.name, usageLine, help)
		assert.Equal(t, 1, strings.Count(help, "usage: "), "help %s:\n%s", c.name, help)
		assert.LessOrEqual(t, strings.Count(help, "http://"), 1, "help %s mentions URLs more than once:\n%s", c.name, help)
		seen := map[string]bool{}
		for _, para := range strings.Split(help, "\n\n") {
			assert.False(t, seen[para], "help %s says this twice:\n%s", c.name, para)
			seen[para] = true
		}
		for _, flag := range []string{"-h", "-help", "--help"} {
			status, stdout, stderr := runCmd(c.name, flag)
			assert.Equal(t, exitOK, status, "%s %s", c.name, flag)
			assert.Empty(t, stderr, "%s %s", c.name, flag)
			assert.Equal(t, help, stdout, "%s %s prints what help %s prints", c.name, flag, c.name)
		}
	}

	status, stdout, _ := runCmd("help")
	assert.Equal(t, exitOK, status)
	assert.Contains(t, stdout, "usage:\n  safetensors inspect", "help alone: the usage of all commands")

	for _, args := range [][]string{{"help", "frobnicate"}, {"help", "inspect", "validate"}} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitTrouble, status, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.True(t, strings.HasPrefix(stderr, "safetensors help: "), "%q: %s", args, stderr)
		assert.Contains(t, stderr, "run 'safetensors help'", "%q", args)
		assert.Equal(t, 2, strings.Count(stderr, "\n"), "%q: one line and where to look:\n%s", args, stderr)
	}
}

// TestPackageDoc checks that the package comment's usage block lists every
// command, as the command's own usage does, and nothing else.
func TestPackageDoc(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	require.NotNil(t, f.Doc)
	var listed []string
	for line := range strings.SplitSeq(f.Doc.Text(), "\n") {
		if strings.HasPrefix(line, "\tsafetensors ") && !strings.HasPrefix(line, "\tsafetensors help") {
			listed = append(listed, strings.TrimSpace(line))
		}
	}
	var want []string
	for _, c := range commands {
		want = append(want, strings.TrimSpace("safetensors "+c.name+" "+c.args))
	}
	assert.Equal(t, want, listed, "the package comment's usage lines, in the order of the commands table")
}

// TestErrorNaming: the input's name goes first, once, and a name found
// only inside another ("." in "model.safetensors") does not count.
func TestErrorNaming(t *testing.T) {
	for _, tc := range []struct{ name, msg, want string }{
		{"m.safetensors", "open m.safetensors: no such file or directory", "m.safetensors: no such file or directory"},
		{".", "open model.safetensors: safetensors: a Git LFS pointer", ".: open model.safetensors: a Git LFS pointer"},
		{"dir", "checkpoint: no model found: dir: no weights", "dir: no model found: no weights"},
		{"http://h/m", `GET http://h/m bytes 0-1: 404 Not Found`, `GET http://h/m bytes 0-1: 404 Not Found`},
		{"m", "tensor \"x\": not found in m", "tensor \"x\": not found in m"},
		{"m", "tensor \"m2\": not found", "m: tensor \"m2\": not found"},
	} {
		assert.Equal(t, tc.want, errorNaming(tc.name, errors.New(tc.msg)), "%q %q", tc.name, tc.msg)
	}
}
