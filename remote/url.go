package remote

import "strings"

// IsURL reports whether name is a URL this package reads: http:// or
// https://, the scheme in any case, as URLs' schemes are. The checkpoint
// package and the command take such a name as a remote model, anything
// else as a path.
func IsURL(name string) bool {
	scheme, _, ok := strings.Cut(name, "://")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}
