package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr, `Version prints the module version the command was built from, as the Go
toolchain records it: a release's version for go install ...@VERSION, a
pseudo-version such as v0.0.0-20261127090000-4354e75a1b2c (or "(devel)")
in a build from a clone; the VCS revision when it was recorded; and the Go
version, OS and architecture. --version is the same.`, "", "0.")
	asJSON := addJSONFlag(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 0 {
		return usageError(fs, "takes no arguments")
	}
	v := buildVersion()
	var err error
	if *asJSON {
		err = writeJSON(stdout, v)
	} else {
		_, err = fmt.Fprintln(stdout, v.line())
	}
	if err != nil {
		return fail(stderr, "version", "", err)
	}
	return exitOK
}

// versionOutput is what version --json prints.
type versionOutput struct {
	Version  string `json:"version"`
	Module   string `json:"module"`
	Revision string `json:"revision"` // "" when not recorded
	Modified bool   `json:"modified"` // the build's tree had changes not committed
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// buildVersion returns what the build recorded of its version.
func buildVersion() versionOutput {
	v := versionOutput{Version: "unknown", Module: "github.com/safetensors-go/safetensors", Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version, v.Module = bi.Main.Version, bi.Main.Path
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// line returns "safetensors VERSION (MODULE, revision REV) GOVERSION
// OS/ARCH", without the revision when the build recorded none.
func (v versionOutput) line() string {
	rev := ""
	if len(v.Revision) >= 12 {
		rev = ", revision " + v.Revision[:12]
		if v.Modified {
			rev += " (modified)"
		}
	}
	return fmt.Sprintf("safetensors %s (%s%s) %s %s/%s", v.Version, v.Module, rev, v.Go, v.OS, v.Arch)
}
