package parallel

import (
	"context"
	"fmt"
)

// Stopped returns the error of work that ctx stopped, nil while ctx is not
// done: ctx.Err() (context.Canceled or context.DeadlineExceeded), wrapped
// together with context.Cause(ctx) where the cause is another error, so
// that errors.Is finds both the context's error and the cause (such as the
// command's interrupt), as in
//
//	context canceled: interrupted (interrupt)
func Stopped(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}
