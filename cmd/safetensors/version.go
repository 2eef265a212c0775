package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stdout, stderr, `Version prints the module version the command was built from (as go install
records it; "(devel)" in a build from a clone) and the Go version.`)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 0 {
		return usageError(fs, "takes no arguments")
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}

// versionLine returns "safetensors VERSION (MODULE) GOVERSION OS/ARCH",
// with the VCS revision when the build recorded one.
func versionLine() string {
	version, module, rev := "unknown", "github.com/safetensors-go/safetensors", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, module = bi.Main.Version, bi.Main.Path
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = ", revision " + s.Value[:12]
			}
			if s.Key == "vcs.modified" && s.Value == "true" && rev != "" {
				rev += " (modified)"
			}
		}
	}
	return fmt.Sprintf("safetensors %s (%s%s) %s %s/%s", version, module, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
