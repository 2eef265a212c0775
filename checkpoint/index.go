package checkpoint

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// localName reports whether name, slash-separated, names a file inside a
// folder: not empty, not absolute, no ".." (filepath.IsLocal on every
// platform's terms).
func localName(name string) bool {
	return name != "" && filepath.IsLocal(filepath.FromSlash(name)) && !strings.Contains(name, `\`) && !strings.HasPrefix(name, "/")
}

// quoteNames quotes the first max names, and says how many more there are.
func quoteNames(names []string, max int) string {
	quoted := make([]string, min(len(names), max))
	for i := range quoted {
		quoted[i] = strconv.Quote(names[i])
	}
	if len(names) > max {
		quoted = append(quoted, fmt.Sprintf("and %d more", len(names)-max))
	}
	return strings.Join(quoted, ", ")
}
