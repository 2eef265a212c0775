package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Commands that write files catch SIGINT and SIGTERM while they write, so
// that an interrupt removes the temporary file rather than leaving it:
//
//	ctx, stop := catchInterrupts()
//	defer stop()
//	fw, err := safetensors.CreateFile(out, specs, metadata)
//	...
//	defer fw.Abort() // removes the temporary file unless Close succeeded
//	for ... {
//		if err := ctx.Err(); err != nil {
//			return context.Cause(ctx) // an *interruptError
//		}
//		... write a chunk ...
//	}
//	return fw.Close()
//
// and the command's run function returns interruptStatus(err) when it is
// not zero: 130 for SIGINT and 143 for SIGTERM, as shells report them. A
// second signal is caught too, so that the cleanup is not cut short.
// SIGKILL cannot be caught: it leaves the temporary file, which is in OUT's
// directory and named like .OUT.tmpXXXX (safetensors.TempPattern).
//
// check and diff, which read every value of a model, catch them too and
// pass the context to check.Model and diff.Paths, which stop with an error
// wrapping the *interruptError: they exit as promptly, with the same
// status.

// interruptError is the cause of the context of catchInterrupts when a
// signal came.
type interruptError struct{ sig os.Signal }

func (e *interruptError) Error() string { return fmt.Sprintf("interrupted (%v)", e.sig) }

// catchInterrupts returns a context that SIGINT and SIGTERM cancel, with an
// *interruptError as cause, instead of killing the process, and a function
// that restores their default action.
func catchInterrupts() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(&interruptError{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interruptStatus returns the exit status for an error caused by a signal,
// 128 plus the signal's number, or 0 if err is not one.
func interruptStatus(err error) int {
	var ie *interruptError
	if !errors.As(err, &ie) {
		return 0
	}
	if s, ok := ie.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFail
}
