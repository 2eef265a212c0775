// Package linktest makes symbolic links for tests, and says when the
// platform made none: Windows needs a privilege (or developer mode) for
// them, and Wine reports success while creating none. A test checks that
// the link exists before relying on it.
package linktest

import (
	"os"
	"path/filepath"
	"testing"
)

// Symlink makes newname a symbolic link to oldname and reports whether
// it is one (os.Lstat); when it is not, it logs why on t, for the caller
// to skip what needs the link. Any other failure of the test's own
// making fails the test.
func Symlink(t testing.TB, oldname, newname string) bool {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Logf("no symbolic links here: %v", err)
		return false
	}
	info, err := os.Lstat(newname)
	if err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Logf("no symbolic links here: os.Symlink(%q, %q) succeeded, but there is no link (%v)", oldname, newname, err)
		os.Remove(newname)
		return false
	}
	return true
}

// Need makes newname a symbolic link to oldname, as Symlink does, and
// skips the test, saying why, where the platform makes none.
func Need(t testing.TB, oldname, newname string) {
	t.Helper()
	if !Symlink(t, oldname, newname) {
		t.Skip("needs symbolic links, which this platform did not make")
	}
}

// SkipWithout skips the test, saying why, where a symbolic link made in a
// temporary folder is not one: for tests that make many links, or build
// fixtures with them, in one go.
func SkipWithout(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	if !Symlink(t, "target", filepath.Join(dir, "link")) {
		t.Skip("needs symbolic links, which this platform did not make")
	}
}
