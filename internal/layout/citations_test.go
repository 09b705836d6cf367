package layout

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	// citation is "DESIGN.md section 2.4", "DESIGN.md, section 6" or
	// "DESIGN.md sections 3.9 and 3.10" in code, scripts and docs.
	citation = regexp.MustCompile(`DESIGN\.md,? sections? (\d+(?:\.\d+)*(?:(?:,| and| or|, and) \d+(?:\.\d+)*)*)`)
	number   = regexp.MustCompile(`\d+(?:\.\d+)*`)
	// heading is a numbered heading of docs/DESIGN.md: "## 2." or "### 2.4 The pool".
	heading = regexp.MustCompile(`^#+ (\d+(?:\.\d+)*)\.?(?: |$)`)
)

// designSections returns the numbers of docs/DESIGN.md's headings, in order,
// duplicates kept.
func designSections(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "DESIGN.md"))
	require.NoError(t, err)
	defer f.Close()
	var nums []string
	sc := bufio.NewScanner(f)
	inFence := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inFence {
			nums = append(nums, m[1])
		}
	}
	require.NoError(t, sc.Err())
	return nums
}

// TestDesignCitations: every "DESIGN.md section X" that the code, the
// scripts and the docs cite names a numbered heading of docs/DESIGN.md,
// and no number heads two sections (a citation must mean one place).
func TestDesignCitations(t *testing.T) {
	root := moduleRoot(t)
	nums := designSections(t, root)
	require.NotEmpty(t, nums, "docs/DESIGN.md has no numbered headings")
	have := map[string]bool{}
	for _, n := range nums {
		if have[n] {
			t.Errorf("docs/DESIGN.md numbers two headings %s", n)
		}
		have[n] = true
	}
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains([]string{".go", ".sh", ".md", ".py", ".js", ".s", ".yml", ".yaml"}, filepath.Ext(name)) &&
			name != "Dockerfile" && name != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == filepath.Join("internal", "layout", "citations_test.go") {
			return nil // its examples are not citations
		}
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			// A citation may be folded over two lines ("DESIGN.md
			// section" at the end of one, the number on the next):
			// read each line with the start of the next one, comment
			// markers dropped, and keep the matches that start on it.
			joined := line
			if i+1 < len(lines) {
				joined += " " + strings.TrimLeft(strings.TrimSpace(lines[i+1]), "/#* ")
			}
			for _, m := range citation.FindAllStringSubmatchIndex(joined, -1) {
				if m[0] >= len(line) {
					continue
				}
				for _, n := range number.FindAllString(joined[m[2]:m[3]], -1) {
					cited++
					if !have[n] {
						t.Errorf("%s:%d cites docs/DESIGN.md section %s, which has no such heading", rel, i+1, n)
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, cited, "no citation of docs/DESIGN.md found: the pattern no longer matches how the code cites it")
	t.Logf("%d citations of %d numbered sections checked", cited, len(nums))
}

// TestDesignCitationPattern: the patterns read the forms the code uses,
// so that TestDesignCitations cannot pass by matching nothing.
func TestDesignCitationPattern(t *testing.T) {
	for text, want := range map[string][]string{
		"see docs/DESIGN.md section 2.4.":          {"2.4"},
		"(docs/DESIGN.md, section 6)":              {"6"},
		"DESIGN.md sections 3.9 and 3.10 say":      {"3.9", "3.10"},
		"DESIGN.md sections 4.1, 4.2 and 4.3":      {"4.1", "4.2", "4.3"},
		"README.md section 2":                      nil,
		"docs/DESIGN.md section 12.3.1 (the pool)": {"12.3.1"},
	} {
		var got []string
		for _, m := range citation.FindAllStringSubmatch(text, -1) {
			got = append(got, number.FindAllString(m[1], -1)...)
		}
		require.Equal(t, want, got, text)
	}
	for line, want := range map[string]string{"## 2. The data flow": "2", "### 2.4 The pool": "2.4", "#### 3.10.1": "3.10.1", "## Notes": ""} {
		m := heading.FindStringSubmatch(line)
		got := ""
		if m != nil {
			got = m[1]
		}
		require.Equal(t, want, got, line)
	}
}
