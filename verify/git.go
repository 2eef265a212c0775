package verify

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors/internal/filekind"
)

// RefGitHEAD is the reference of a file that a git clone commits as a
// plain blob: its git blob SHA-1 at HEAD.
const RefGitHEAD = "git-head"

// gitRef is what the commit at HEAD of a git clone says of a file: the
// Git LFS pointer it commits (oid and size), or the blob's SHA-1.
type gitRef struct {
	lfsOID  string // 64 hex digits, for a file in LFS
	lfsSize int64
	blob    string // the blob's SHA-1, for a file kept in git
}

// maxGitListing bounds what git ls-tree may print: 64 MiB is a million
// files.
const maxGitListing = 64 << 20

// gitRefs returns what HEAD commits for the files of dir, when dir is the
// top of a git clone (it holds .git) and the git command is installed;
// nil otherwise. A parent folder's repository is not looked for: it would
// be a repository the model happens to sit in, not the model's. git runs
// with its file-system monitor off, reading only (ls-tree, cat-file).
func gitRefs(ctx context.Context, dir string) map[string]gitRef {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		return nil
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil
	}
	git := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, gitPath, append([]string{"-c", "core.fsmonitor=false", "-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
		return cmd
	}
	ls := git("ls-tree", "-r", "-z", "-l", "--full-tree", "HEAD")
	out, err := ls.StdoutPipe()
	if err != nil || ls.Start() != nil {
		return nil
	}
	listing, _ := io.ReadAll(io.LimitReader(out, maxGitListing))
	if ls.Wait() != nil {
		return nil
	}
	refs := map[string]gitRef{}
	var small []string // the blobs that may be LFS pointers
	oidOf := map[string][]string{}
	for _, entry := range bytes.Split(listing, []byte{0}) {
		meta, name, ok := strings.Cut(string(entry), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 || f[1] != "blob" || len(f[2]) != 40 {
			continue // a submodule, a link, a SHA-256 repository
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || !localName(name) {
			continue
		}
		refs[name] = gitRef{blob: f[2]}
		if size <= filekind.Len {
			if oidOf[f[2]] == nil {
				small = append(small, f[2])
			}
			oidOf[f[2]] = append(oidOf[f[2]], name)
		}
	}
	if len(small) == 0 {
		return refs
	}
	cat := git("cat-file", "--batch")
	cat.Stdin = strings.NewReader(strings.Join(small, "\n") + "\n")
	catOut, err := cat.StdoutPipe()
	if err != nil || cat.Start() != nil {
		return refs
	}
	defer cat.Wait()
	br := bufio.NewReader(io.LimitReader(catOut, int64(len(small))*(filekind.Len+128)))
	for range small {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		var oid, typ string
		var size int64
		if n, _ := fmt.Sscanf(line, "%s %s %d", &oid, &typ, &size); n != 3 || size < 0 || size > filekind.Len {
			break
		}
		content := make([]byte, size+1) // and the newline after it
		if _, err := io.ReadFull(br, content); err != nil {
			break
		}
		content = content[:size]
		if filekind.Of(content) != filekind.LFSPointer {
			continue
		}
		lfsOID, lfsSize := filekind.LFS(content)
		if lfsOID == "" || lfsSize < 0 {
			continue
		}
		for _, name := range oidOf[oid] {
			refs[name] = gitRef{lfsOID: strings.TrimPrefix(lfsOID, "sha256:"), lfsSize: lfsSize}
		}
	}
	return refs
}

// localName reports whether name, from git, is a path inside the folder.
func localName(name string) bool {
	return name != "" && filepath.IsLocal(filepath.FromSlash(name)) && !strings.Contains(name, "\\")
}

// gitChecks adds to f the checks of what HEAD commits for it.
func gitChecks(f *File, ref gitRef, gitSHA1 string) {
	source := "git HEAD:" + f.Name
	if ref.lfsOID != "" {
		f.Checks = append(f.Checks, Check{Reference: RefLFSPointer, Algorithm: SHA256, Source: source, Expected: ref.lfsOID, Actual: f.SHA256, Holds: ref.lfsOID == f.SHA256})
		want, got := strconv.FormatInt(ref.lfsSize, 10), strconv.FormatInt(f.Size, 10)
		f.Checks = append(f.Checks, Check{Reference: RefLFSPointer, Algorithm: Size, Source: source, Expected: want, Actual: got, Holds: want == got})
		return
	}
	f.Checks = append(f.Checks, Check{Reference: RefGitHEAD, Algorithm: GitSHA1, Source: source, Expected: ref.blob, Actual: gitSHA1, Holds: ref.blob == gitSHA1})
}
