package atomicfile

import (
	"errors"
	"syscall"
)

// The errors that syscall does not name.
const (
	errorSharingViolation syscall.Errno = 32   // ERROR_SHARING_VIOLATION
	errorUserMappedFile   syscall.Errno = 1224 // ERROR_USER_MAPPED_FILE
)

// inUse reports whether err is how Windows refuses to replace a file that
// a process has open without sharing it for deletion, or mapped: access
// denied (which is also the error of a folder one may not write to: the
// caller checks that the file exists), a sharing violation, or a
// user-mapped section.
func inUse(err error) bool {
	return errors.Is(err, syscall.ERROR_ACCESS_DENIED) ||
		errors.Is(err, errorSharingViolation) ||
		errors.Is(err, errorUserMappedFile)
}
