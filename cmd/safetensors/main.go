// Command safetensors inspects, validates, summarizes, checks, quantizes,
// compares and converts safetensors files.
//
// Usage:
//
//	safetensors inspect [--json] [--variant NAME] MODEL|DATASET
//	safetensors validate [--values] [--variant NAME] MODEL|DATASET...
//	safetensors stats [--variant NAME] MODEL [TENSOR...]
//	safetensors check [--json] [--config FILE] [--max-abs X] [--variant NAME] MODEL
//	safetensors quantize [--per channel|tensor] [--variant NAME] MODEL DST
//	safetensors diff [--json] [--variant NAME] A B
//	safetensors version
//	safetensors convert --dtype F16|BF16|F32 [--rounding nearest|truncate] [--variant NAME] MODEL OUT
//
// A MODEL is any input the checkpoint package's Open takes: a safetensors
// file, a sharded checkpoint's index, a model's folder as transformers,
// diffusers, timm, peft, sentence-transformers or open_clip save it, a
// diffusers pipeline or a sentence-transformers model of several parts
// (handled part by part), a Hugging Face cache snapshot, or an http(s) URL
// of any of these.
//
// Inspect lists a model's tensors, metadata and totals; validate checks
// files as the reference implementation does; stats summarizes the values
// of tensors; check checks a model's weights and its config.json; quantize
// writes a model's Linear weights as int8 for vLLM (compressed-tensors);
// diff compares two models; version prints the module and Go versions;
// convert casts the float tensors of a model.
//
// 'safetensors help COMMAND' and 'safetensors COMMAND -h' print a command's
// help. As with grep and diff, the exit status is 0 when all is well, 1
// when the command ran and found a problem (an invalid file, a failed
// check, NaN or Inf values, models that differ), and 2 when it could not
// run (a usage error, an input that does not exist or cannot be read, a
// folder that holds no model).
//
// Install it with
//
//	go install github.com/safetensors-go/safetensors/cmd/safetensors@latest
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
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

// exitHelp is what every command's help and the usage say of the exit
// status.
const exitHelp = `Exit status: 0 all is well; 1 the command ran and found a problem (an invalid
file, a failed check, NaN or Inf values, models that differ); 2 it could not
run (a usage error, an input that does not exist or cannot be read, a folder
that holds no model).`

// A command is one subcommand. run gets the arguments after the
// subcommand's name and returns the exit status.
type command struct {
	name, args, summary string
	run                 func(args []string, stdout, stderr io.Writer) int
}

var commands []command

func init() {
	commands = []command{
		{"inspect", "[--json] [--variant NAME] MODEL|DATASET", "list the tensors, metadata and totals of a model (part by part) or a dataset", runInspect},
		{"validate", "[--values] [--variant NAME] MODEL|DATASET...", "check files as the reference implementation does", runValidate},
		{"stats", "[--variant NAME] MODEL [TENSOR...]", "min, max, mean, standard deviation, NaNs and Infs of tensors", runStats},
		{"check", "[--json] [--config FILE] [--max-abs X] [--variant NAME] MODEL", "check weights: NaN/Inf, zeros, layer structure, config.json against shapes", runCheck},
		{"quantize", "[--per channel|tensor] [--variant NAME] MODEL DST", "quantize a model's Linear weights to int8 for vLLM (compressed-tensors)", runQuantize},
		{"diff", "[--json] [--variant NAME] A B", "compare the tensors and metadata of two models", runDiff},
		{"version", "", "print the command's module version and Go version", runVersion},
		{"convert", "--dtype F16|BF16|F32 [--rounding nearest|truncate] [--variant NAME] MODEL OUT", "cast the float tensors of a model", runConvert},
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
		switch len(args) {
		case 1:
			usage(stdout)
			return exitOK
		case 2: // help COMMAND: the command's own help, as COMMAND -h prints it
			if c, ok := lookup(args[1]); ok {
				return c.run([]string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "safetensors help: unknown command %q\n\n", args[1])
		default:
			fmt.Fprintf(stderr, "safetensors help: want one COMMAND, got %d\n\n", len(args)-1)
		}
		usage(stderr)
		return exitTrouble
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "safetensors: unknown command %q\n\n", args[0])
	usage(stderr)
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
	fmt.Fprintln(w, "cache snapshot, or a URL of one: see 'safetensors help inspect'.")
	fmt.Fprintln(w, "Run 'safetensors help COMMAND' or 'safetensors COMMAND -h' for a command's help and flags.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, exitHelp)
}

// newFlags returns the flag set of the named command, whose usage message
// lists its arguments, describes it and says what its exit status means.
func newFlags(name string, stdout, stderr io.Writer, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if c, ok := lookup(name); ok {
			fmt.Fprintf(fs.Output(), "usage: %s\n\n", strings.TrimSpace("safetensors "+c.name+" "+c.args))
		}
		fmt.Fprintln(fs.Output(), description)
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), exitHelp)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses args with fs, flags and operands in any order (a "--" ends
// the flags), and returns the operands. Help goes to stdout; the returned
// status is what the command must exit with when ok is false.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (operands []string, status int, ok bool) {
	// The flag package prints its complaints and the usage to the set's
	// output: keep them until it is known whether they are help, for
	// stdout, or an error, for stderr.
	stderr := fs.Output()
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	defer fs.SetOutput(stderr)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			stdout.Write(msg.Bytes())
			return nil, exitOK, false
		}
		if err != nil {
			stderr.Write(msg.Bytes())
			return nil, exitTrouble, false
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

// usageError prints msg and the command's usage, and returns exitTrouble.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "safetensors %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitTrouble
}

// fail prints err as the error of the named command on w and returns the
// exit status for it (see statusOf).
func fail(w io.Writer, cmd string, err error) int {
	fmt.Fprintf(w, "safetensors %s: %s\n", cmd, errorText(err))
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
	for _, p := range []string{"safetensors: ", "checkpoint: ", "quant: ", "check: ", "diff: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	// "open f: safetensors: header too large" → "open f: header too large"
	msg = strings.ReplaceAll(msg, ": safetensors: ", ": ")
	return strings.ReplaceAll(msg, ": checkpoint: ", ": ")
}

// errorNaming returns errorText(err), preceded by the file's name unless
// the message already names it.
func errorNaming(file string, err error) string {
	msg := errorText(err)
	if strings.Contains(msg, file) {
		return msg
	}
	return file + ": " + msg
}
