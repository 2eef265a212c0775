package safetensors_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeTasks are the examples whose bodies the README's programs under
// "## Tasks" are, in order.
var readmeTasks = []string{"Example_readModel", "Example_writeModel", "Example_loadModel", "Example_checkModel", "Example_convertModel"}

// readmeMaxWords bounds a newcomer's path through the README: from the top
// to the end of the tasks.
const readmeMaxWords = 1200

// mdBlock is a fenced code block of a Markdown file: its info string
// ("go", "sh", or empty), its text, and the section it is in.
type mdBlock struct {
	lang, text, section string
}

// mdBlocks returns the fenced code blocks of a Markdown text, with the
// "## " section each is in.
func mdBlocks(text string) []mdBlock {
	var blocks []mdBlock
	var cur *mdBlock
	section := ""
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.HasPrefix(line, "```"):
			cur = &mdBlock{lang: strings.TrimPrefix(line, "```"), section: section}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	return blocks
}

// TestREADME checks what the README shows against what the code does:
// the two commands CI runs, the first one's output against the command's
// golden file, each task's program against the example the tests run, and
// the length of a newcomer's path.
func TestREADME(t *testing.T) {
	data, err := os.ReadFile("README.md")
	require.NoError(t, err)
	readme := string(data)
	blocks := mdBlocks(readme)

	// The first block: the commands .ci/run runs as "the README's first
	// command" and "the README's test command".
	require.NotEmpty(t, blocks)
	assert.Equal(t, "sh", blocks[0].lang)
	assert.Equal(t, "go run ./cmd/safetensors inspect testdata/tiny-llama.safetensors\ngo test ./...\n", blocks[0].text)

	// The second: the first command's output, lines left out where it says
	// "...", each run of lines as cmd/safetensors' TestInspect finds it in
	// its golden file, in order, from the first line to the last.
	require.Greater(t, len(blocks), 1)
	golden, err := os.ReadFile("cmd/safetensors/testdata/inspect.golden")
	require.NoError(t, err)
	want := strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(golden), "../../testdata/", "testdata/"), "\n"), "\n")
	shown := strings.Split(strings.TrimSuffix(blocks[1].text, "\n"), "\n")
	assert.Equal(t, "", blocks[1].lang)
	var runs [][]string
	for part := range strings.SplitSeq(strings.Join(shown, "\n"), "\n...\n") {
		runs = append(runs, strings.Split(part, "\n"))
	}
	pos, left := 0, 0
	for i, run := range runs {
		at := -1
		for j := pos; j+len(run) <= len(want); j++ {
			if slices.Equal(want[j:j+len(run)], run) {
				at = j
				break
			}
		}
		require.GreaterOrEqual(t, at, 0, "README output lines not in the golden file, in order:\n%s", strings.Join(run, "\n"))
		if i == 0 {
			assert.Equal(t, 0, at, "the output shown from its first line")
		}
		left += at - pos
		pos = at + len(run)
	}
	assert.Equal(t, len(want), pos, "the output shown to its last line")
	// The count of lines left out, as the text says it.
	m := regexp.MustCompile(`with (\d+)\s+of its (\d+) tensor lines left out`).FindStringSubmatch(readme)
	require.NotNil(t, m, "the README says how many lines it leaves out")
	assert.Equal(t, strconv.Itoa(left), m[1], "tensor lines left out")
	assert.Contains(t, want[0], " "+m[2]+" tensors,")

	// The tasks: each a program whose main is an example's body, with the
	// imports that body uses.
	examples := exampleBodies(t, "readme_example_test.go")
	var tasks []mdBlock
	for _, b := range blocks {
		if b.section == "Tasks" {
			tasks = append(tasks, b)
		}
	}
	require.Len(t, tasks, len(readmeTasks), "a program for each task")
	for i, b := range tasks {
		name := readmeTasks[i]
		assert.Equal(t, "go", b.lang, name)
		ex, ok := examples[name]
		require.True(t, ok, "readme_example_test.go has no %s", name)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name+".go", b.text, parser.ParseComments)
		require.NoError(t, err, "the README's program for %s:\n%s", name, b.text)
		assert.Equal(t, "main", f.Name.Name, name)
		var main *ast.FuncDecl
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "main" {
				main = fd
			}
		}
		require.NotNil(t, main, "%s: no func main", name)
		body := b.text[fset.Position(main.Body.Lbrace).Offset+1 : fset.Position(main.Body.Rbrace).Offset]
		assert.Equal(t, ex.body, body, "the README's main for %s is not the example's body; the example is:\n%s", name, ex.body)
		var imports []string
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			require.NoError(t, err)
			imports = append(imports, p)
		}
		slices.Sort(imports)
		assert.Equal(t, ex.imports, imports, "the imports of the README's program for %s", name)
	}

	// A newcomer's path: from the top to the end of the tasks.
	path, _, ok := strings.Cut(readme, "\n## More")
	require.True(t, ok, "the README has a section after the tasks: ## More")
	words := len(strings.Fields(path))
	t.Logf("a newcomer's path through the README: %d words; the README: %d", words, len(strings.Fields(readme)))
	assert.Less(t, words, readmeMaxWords, "a newcomer's path through the README")
}

// example is an example function's body, between its braces, and the
// import paths of the packages it uses, sorted.
type example struct {
	body    string
	imports []string
}

// exampleBodies returns the examples of a test file by name.
func exampleBodies(t *testing.T, file string) map[string]example {
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	require.NoError(t, err)
	byName := make(map[string]string) // package name to import path
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		require.NoError(t, err)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		byName[name] = p
	}
	out := make(map[string]example)
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fd.Name.Name, "Example") {
			continue
		}
		var used []string
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			// A package's name is an identifier the parser leaves
			// unresolved, before a dot.
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil {
					if p, ok := byName[id.Name]; ok && !slices.Contains(used, p) {
						used = append(used, p)
					}
				}
			}
			return true
		})
		slices.Sort(used)
		body := string(src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset])
		out[fd.Name.Name] = example{body: body, imports: used}
	}
	return out
}

// TestDocLinks checks the relative links of the README and the pages under
// docs/: each names a file of the repository and, after '#', a heading of
// that file, as GitHub makes anchors of headings.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	pages = append(pages, "README.md", "testdata/README.md", "bench/README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		data, err := os.ReadFile(page)
		require.NoError(t, err)
		text := stripCode(string(data))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			info, err := os.Stat(path)
			if !assert.NoError(t, err, "%s links to %s", page, target) || anchor == "" {
				continue
			}
			require.False(t, info.IsDir(), "%s: an anchor into a directory: %s", page, target)
			linked, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Contains(t, anchors(string(linked)), anchor, "%s links to %s: no such heading in %s", page, target, path)
		}
	}
}

// stripCode removes a Markdown text's code, fenced blocks and spans,
// whose brackets are not links.
func stripCode(text string) string {
	return codeSpan.ReplaceAllString(stripFences(text), "code")
}

// stripFences removes a Markdown text's fenced code blocks.
func stripFences(text string) string {
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// codeSpan matches a code span of one line.
var codeSpan = regexp.MustCompile("`[^`]*`")

// anchors returns the anchors GitHub gives a Markdown text's headings:
// lower case, spaces as '-', punctuation ('`' included) but '-' and '_'
// dropped, and a number after a heading that came before.
func anchors(text string) []string {
	var out []string
	seen := make(map[string]int)
	for line := range strings.SplitSeq(stripFences(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

func TestAnchors(t *testing.T) {
	text := "# The `safetensors` command\n```\n# not a heading\n```\n## Load a model, fast!\n## Load a model, fast\n### F16/BF16 (and F32)\n"
	assert.Equal(t, []string{"the-safetensors-command", "load-a-model-fast", "load-a-model-fast-1", "f16bf16-and-f32"}, anchors(text))
}
