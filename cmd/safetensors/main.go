// Command safetensors inspects, validates, checks, summarizes, compares,
// converts and quantizes safetensors files.
//
// Usage:
//
//	safetensors inspect [--json] [--digests] [--variant NAME] MODEL|DATASET
//	safetensors validate [--json] [--values] [--variant NAME] MODEL|DATASET...
//	safetensors check [--json] [--config FILE] [--max-abs X] [--variant NAME] MODEL
//	safetensors stats [--json] [--variant NAME] MODEL [TENSOR...]
//	safetensors diff [--json] [--atol X] [--rtol Y] [--equal-nan] [--variant NAME] A B
//	safetensors convert [--json] --dtype F16|BF16|F32 [--rounding nearest|truncate] [--variant NAME] MODEL OUT
//	safetensors quantize [--json] [--per channel|tensor] [--variant NAME] MODEL DST
//	safetensors verify [--json] [--signature FILE --key PUB.pem|--cert PEM] [--digests FILE] [--structure-only] [--variant NAME] MODEL
//	safetensors sign [--json] --key PRIV.pem [--signature model.sig] [--cert PEM] [--shard-size N] [--ignore PATH] MODEL
//	safetensors version [--json]
//	safetensors help [COMMAND|models]
//
// A MODEL is any input the checkpoint package's Open takes: a safetensors
// file, a sharded checkpoint's index, a model's folder as transformers,
// diffusers, timm, peft, sentence-transformers or open_clip save it, a
// diffusers pipeline or a sentence-transformers model of several parts
// (handled part by part), a Hugging Face cache snapshot, or an http(s) URL
// of any of these ('safetensors help models').
//
// Inspect lists a model's tensors, metadata and totals; validate checks
// files as the reference implementation does; check checks a model's
// weights and its config.json; stats summarizes the values of tensors;
// diff compares two models, within a tolerance; convert casts the float
// tensors of a model; quantize writes a model's Linear weights as int8 for
// vLLM (compressed-tensors); verify checks every file of a model against
// its cache blobs, the server's digests and an OpenSSF Model Signing
// signature, which sign writes; version prints the module and Go versions.
//
// Every command takes --json and then writes one JSON document to stdout,
// whose schema docs/cli.md gives. Errors go to stderr as
// "safetensors COMMAND: INPUT: why". As with grep and diff, the exit status
// is 0 when all is well, 1 when the command ran and found a problem (an
// invalid file, a failed check, NaN or Inf values, models that differ),
// and 2 when it could not run (a usage error, an input that does not exist
// or cannot be read, a folder that holds no model). Commands that read
// every value show their progress on stderr when it is a terminal.
//
// Install it with
//
//	go install github.com/safetensors-go/safetensors/cmd/safetensors@latest
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	english "github.com/safetensors-go/safetensors/internal/plural"
)

// The exit statuses, as grep and diff give them.
const (
	exitOK = 0
	// exitFail is for a command that ran and found a problem: an invalid
	// file, a failed check, NaN or Inf values, models that differ.
	exitFail = 1
	// exitTrouble is for a command that could not run: a usage error, an
	// input that does not exist or cannot be read, a folder that holds no
	// model.
	exitTrouble = 2
)

// exitHelp is what the usage says of the exit status; each command's help
// says what its own statuses mean.
const exitHelp = `Exit status: 0 all is well; 1 the command ran and found a problem; 2 it could
not run (a usage error, an input that does not exist or cannot be read); 130
or 143 after SIGINT or SIGTERM.`

// A command is one subcommand. run gets the arguments after the
// subcommand's name and returns the exit status.
type command struct {
	name, args, summary string
	run                 func(args []string, stdout, stderr io.Writer) int
}

var commands []command

func init() {
	// In the order a user reaches for them.
	commands = []command{
		{"inspect", "[--json] [--digests] [--variant NAME] MODEL|DATASET", "list the tensors, metadata and totals of a model or a dataset, or each tensor's digest", runInspect},
		{"validate", "[--json] [--values] [--variant NAME] MODEL|DATASET...", "check files as the reference implementation does", runValidate},
		{"check", "[--json] [--config FILE] [--max-abs X] [--variant NAME] MODEL", "check weights: NaN/Inf, zeros, layer structure, config.json against shapes", runCheck},
		{"stats", "[--json] [--variant NAME] MODEL [TENSOR...]", "min, max, mean, standard deviation, NaNs and Infs of tensors", runStats},
		{"diff", "[--json] [--atol X] [--rtol Y] [--equal-nan] [--variant NAME] A B", "compare the tensors and metadata of two models", runDiff},
		{"convert", "[--json] --dtype F16|BF16|F32 [--rounding nearest|truncate] [--variant NAME] MODEL OUT", "cast the float tensors of a model", runConvert},
		{"quantize", "[--json] [--per channel|tensor] [--variant NAME] MODEL DST", "quantize a model's Linear weights to int8 for vLLM (compressed-tensors)", runQuantize},
		{"verify", "[--json] [--signature FILE --key PUB.pem|--cert PEM] [--digests FILE] [--structure-only] [--variant NAME] MODEL", "check every file of a model against its cache blobs, the server's digests, an OMS signature", runVerify},
		{"sign", "[--json] --key PRIV.pem [--signature model.sig] [--cert PEM] [--shard-size N] [--ignore PATH] MODEL", "write an OpenSSF Model Signing signature of a model's folder", runSign},
		{"version", "[--json]", "print the command's module version and Go version", runVersion},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitTrouble
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return runHelp(args[1:], stdout, stderr)
	case "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "safetensors: unknown command %q\nrun 'safetensors help' for the list of commands\n", args[0])
	return exitTrouble
}

// helpUsage is the help of the help command.
const helpUsage = `usage: safetensors help [COMMAND|models]

Help prints the list of commands, a command's help (as 'safetensors COMMAND
-h' does), or with "models" what a MODEL may be and how it is read.
`

// runHelp prints the help that args ask for.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(stderr, "safetensors help: want one COMMAND, got %d\nrun 'safetensors help' for the list of commands\n", len(args))
		return exitTrouble
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, helpUsage)
		return exitOK
	case "models":
		fmt.Fprint(stdout, modelsHelp)
		return exitOK
	}
	if c, ok := lookup(args[0]); ok {
		return c.run([]string{"-h"}, stdout, stderr)
	}
	fmt.Fprintf(stderr, "safetensors help: unknown command %q\nrun 'safetensors help' for the list of commands\n", args[0])
	return exitTrouble
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "safetensors reads, checks and converts safetensors files.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace("safetensors "+c.name+" "+c.args), c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A MODEL is a file, an index, a folder of any library's layout, a pipeline, a")
	fmt.Fprintln(w, "cache snapshot, or a URL of one: see 'safetensors help models'.")
	fmt.Fprintln(w, "Run 'safetensors help COMMAND' for a command's help and flags; --json gives")
	fmt.Fprintln(w, "any command's output as one JSON document.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, exitHelp)
}

// newFlags returns the flag set of the named command, whose help lists its
// arguments, says what it does (description), what its inputs are
// (inputs, "" for none), its flags, and what its exit statuses mean
// (exit).
func newFlags(name string, stderr io.Writer, description, inputs, exit string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		if c, ok := lookup(name); ok {
			fmt.Fprintf(w, "usage: %s\n\n", strings.TrimSpace("safetensors "+c.name+" "+c.args))
		}
		fmt.Fprintln(w, description)
		if inputs != "" {
			fmt.Fprintln(w)
			fmt.Fprintln(w, inputs)
		}
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Exit status: "+exit)
	}
	return fs
}

// modelInputs is what the help of a command that reads models says of a
// MODEL.
const modelInputs = `A MODEL is a safetensors file, a sharded checkpoint's index, a model's folder
as any library saves it, a diffusers pipeline, a cache snapshot, or an
http(s) URL of one: 'safetensors help models' says how each is read.`

// parse parses args with fs, flags and operands in any order (a "--" ends
// the flags), and returns the operands. Help goes to stdout; a flag that is
// not right is a usage error, of one line and where to look. The returned
// status is what the command must exit with when ok is false.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (operands []string, status int, ok bool) {
	stderr := fs.Output()
	// The flag package prints its complaint and the whole help on an
	// error: keep the help for -h only.
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(stderr)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, exitOK, false
		}
		if err != nil {
			fs.SetOutput(stderr)
			return nil, usageError(fs, "%v", err), false
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(operands, rest...), 0, true
		}
		if len(rest) == 0 {
			return operands, 0, true
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// usageError prints msg and where to find the command's usage, and returns
// exitTrouble.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "safetensors %s: %s\nrun 'safetensors help %s' for usage\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return exitTrouble
}

// fail prints err, met on the input name ("" for none), as the error of
// the command cmd on w, in the form every command uses,
// "safetensors CMD: NAME: why", and returns the exit status for it (see
// statusOf).
func fail(w io.Writer, cmd, name string, err error) int {
	fmt.Fprintf(w, "safetensors %s: %s\n", cmd, errorNaming(name, err))
	if hint := remoteHint(err); hint != "" {
		fmt.Fprintf(w, "safetensors %s: %s\n", cmd, hint)
	}
	return statusOf(err)
}

// statusOf returns the exit status for a command that stopped with err:
// 128 plus the signal's number for an interrupt, exitFail for an error
// that says that the input breaks the format (see invalid), and
// exitTrouble for any other, an input that does not exist or could not be
// read, a folder that holds no model (checkpoint.ErrNoModel), an invalid
// option.
func statusOf(err error) int {
	if status := interruptStatus(err); status != 0 {
		return status
	}
	if invalid(err) {
		return exitFail
	}
	return exitTrouble
}

// errorText returns err's message without a leading "safetensors: ",
// "checkpoint: ", "quant: ", "check: " or "diff: ", which the command's own
// prefix replaces.
func errorText(err error) string {
	msg := err.Error()
	for _, p := range []string{"safetensors: ", "checkpoint: ", "quant: ", "check: ", "diff: ", "remote: ", "dataset: ", "verify: ", "load: ", "signing: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	// "open f: safetensors: header too large" → "open f: header too large"
	for _, p := range []string{"safetensors", "checkpoint", "remote", "dataset", "verify", "signing"} {
		msg = strings.ReplaceAll(msg, ": "+p+": ", ": ")
	}
	return msg
}

// errorNaming returns errorText(err) in the form "NAME: why": the input's
// name first, once, without the "open NAME: " or "stat NAME: " that the
// operating system's errors put in front of it.
func errorNaming(name string, err error) string {
	msg := errorText(err)
	if name == "" {
		return msg
	}
	for _, op := range []string{"open ", "stat ", "read ", "lstat "} {
		if rest, ok := strings.CutPrefix(msg, op+name+": "); ok {
			return name + ": " + rest
		}
	}
	if strings.HasPrefix(msg, name+": ") {
		return msg
	}
	// "no model found: NAME: no weights" → "NAME: no model found: no weights"
	if before, after, ok := strings.Cut(msg, ": "+name+": "); ok {
		return name + ": " + before + ": " + after
	}
	if mentions(msg, name) {
		return msg
	}
	return name + ": " + msg
}

// mentions reports whether msg names name as a word of its own: not
// within another name ("." within "model.safetensors"), but followed by
// ":", " ", a quote or the end, and preceded by the start, a space or a
// quote.
func mentions(msg, name string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], name)
		if j < 0 {
			return false
		}
		begin, end := i+j, i+j+len(name)
		before := begin == 0 || strings.ContainsRune(" \"'", rune(msg[begin-1]))
		after := end == len(msg) || strings.ContainsRune(": \"'", rune(msg[end]))
		if before && after {
			return true
		}
		i = begin + 1
	}
}

// plural returns n and the noun, in the plural unless n is 1.
func plural[N int | uint64](n N, noun string) string { return english.Of(n, noun) }

// writeJSON writes v to w as every command's --json does: one document,
// indented by two spaces, ending with a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// list returns s, or an empty list for nil, so that JSON has [] rather
// than null.
func list[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// addJSONFlag adds --json to fs, which every command takes.
func addJSONFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "write the output as one JSON document (its schema: docs/cli.md)")
}

// reason returns why err happened to the input name: errorNaming(name,
// err) without the name in front, for the lines that name it first.
func reason(name string, err error) string {
	return strings.TrimPrefix(errorNaming(name, err), name+": ")
}
