package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/int8bert/int8bert"

// rule is one row of the table of docs/DESIGN.md section 1.1: which
// int8bert packages pkg may import directly. Paths are relative to the
// module. A pattern "x/..." matches x and every package below it, as the go
// command's patterns do; a package takes the row that names it exactly,
// else the row with the longest matching pattern.
type rule struct {
	pkg string
	may []string
}

// encoderMay is what models/encoder may import, and so the base of every
// row above it: the engine takes tokens in, so never tokenizer.
var encoderMay = []string{"cpu", "kernels/...", "selector", "smoothquant", "checkpoint", "internal/atomicfile"}

// frontMay is what models (the front door) may import: the engine, the
// family packages, and the tokenizer the engine leaves to it.
var frontMay = append([]string{"models/...", "tokenizer", "internal/cgroup"}, encoderMay...)

// belowCmd is every package bench may import: models, the front door,
// and never models/encoder, the engine behind it.
var belowCmd = []string{"cpu", "internal/cgroup", "internal/threadcpu", "tokenizer", "checkpoint", "dnnl/...", "kernels/...", "selector/...", "smoothquant",
	"models", "models/bert", "models/distilbert", "models/xlmr", "models/electra", "models/mpnet"}

// rules mirrors docs/DESIGN.md section 1.1, bottom up. Change both
// together.
var rules = []rule{
	{pkg: "cpu"},
	// The container's limits: read from files, imports nothing.
	{pkg: "internal/cgroup"},
	// The crash tests' process killer: a test-support package.
	{pkg: "internal/crashtest"},
	// The sweep of killed writers' temporary files: imports nothing.
	{pkg: "internal/atomicfile"},
	// A thread's CPU time: imports nothing.
	{pkg: "internal/threadcpu"},
	{pkg: "tokenizer"},
	{pkg: "checkpoint", may: []string{"internal/atomicfile"}},
	{pkg: "dnnl/cgo"},
	{pkg: "dnnl", may: []string{"dnnl/cgo"}},
	// kernels and its sub-packages (the peak loops): cpu and each other.
	{pkg: "kernels/...", may: []string{"cpu", "kernels/..."}},
	{pkg: "kernels/kernelstest", may: []string{"cpu", "kernels"}},
	// The one package that knows both kernels and dnnl.
	{pkg: "selector/...", may: []string{"cpu", "kernels/...", "dnnl", "selector/...", "internal/atomicfile", "internal/threadcpu"}},
	{pkg: "smoothquant", may: []string{"cpu", "kernels/...", "selector", "checkpoint"}},
	{pkg: "models/encoder/...", may: append([]string{"models/encoder/..."}, encoderMay...)},
	// The family packages: the encoder and the front door, never each other.
	{pkg: "models/bert", may: append([]string{"models/encoder/..."}, encoderMay...)},
	{pkg: "models/distilbert", may: append([]string{"models/encoder/..."}, encoderMay...)},
	{pkg: "models/xlmr", may: append([]string{"models/encoder/..."}, encoderMay...)},
	{pkg: "models/electra", may: append([]string{"models/encoder/..."}, encoderMay...)},
	{pkg: "models/mpnet", may: append([]string{"models/encoder/..."}, encoderMay...)},
	{pkg: "models/deberta", may: append([]string{"models/encoder/..."}, encoderMay...)},
	// The front door (models.Load, the text pipelines) and anything else
	// under models/.
	{pkg: "models/...", may: frontMay},
	{pkg: "models/encoder/encodertest", may: frontMay},
	// bench/chart draws the report's charts and knows nothing else.
	{pkg: "bench/chart"},
	{pkg: "bench", may: append([]string{"bench/chart"}, belowCmd...)},
	// The generated gRPC code of TEI's API knows nothing of the module.
	{pkg: "serve/teipb"},
	{pkg: "serve", may: append([]string{"serve/teipb"}, belowCmd...)},
	{pkg: "cmd/...", may: append([]string{"bench", "serve"}, belowCmd...)},
	{pkg: "internal/layout"},
	// The test command's dependency-audit tool: standard library only.
	{pkg: "scripts/vulncheck"},
}

// hotPath are the packages that must not use gonum: the hot path stays on
// the project's kernels.
var hotPath = []string{"cpu", "kernels/...", "dnnl/...", "selector/..."}

// match reports whether the module-relative path p matches pattern.
func match(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// ruleFor returns the row for the module-relative package p, or nil.
func ruleFor(p string) *rule {
	var best *rule
	for i := range rules {
		r := &rules[i]
		if r.pkg == p {
			return r
		}
		if match(r.pkg, p) && (best == nil || len(r.pkg) > len(best.pkg)) {
			best = r
		}
	}
	return best
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// testSupport reports whether the module-relative package p is a
// test-support package (kernels/kernelstest, models/encoder/encodertest:
// by Go's convention, a name ending in "test"), which only _test.go files
// may import.
func testSupport(p string) bool {
	return strings.HasSuffix(filepath.Base(p), "test")
}

// pkg is what the checks need of one `go list -json` entry.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// rel returns the module-relative path of an int8bert import path.
func rel(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(importPath, module+"/")
	return r, ok
}

// check returns one line per forbidden import among the module's packages
// in pkgs (an import path -> entry map holding their dependencies too).
func check(pkgs map[string]*pkg) []string {
	var bad []string
	report := func(from, imp, why string) {
		bad = append(bad, fmt.Sprintf("%s imports %s: %s", from, imp, why))
	}
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok || p.Standard {
			continue
		}
		r := ruleFor(from)
		if r == nil {
			bad = append(bad, fmt.Sprintf("%s: no import rule: give it a row in internal/layout's rules and in docs/DESIGN.md section 1.1", from))
			continue
		}
		for _, imp := range p.Imports {
			if imp == "C" {
				if from != "dnnl/cgo" {
					report(from, `"C"`, "only dnnl/cgo may use cgo (docs/DESIGN.md section 5)")
				}
				continue
			}
			if to, ok := rel(imp); ok {
				switch {
				case match("cmd/...", to):
					report(from, to, "nothing imports the command")
				case to == "internal/layout":
					report(from, to, "nothing imports internal/layout")
				case testSupport(to):
					report(from, to, "a test-support package, for _test.go files only")
				case !matchAny(r.may, to):
					may := strings.Join(r.may, ", ")
					if may == "" {
						may = "no int8bert package"
					}
					report(from, to, fmt.Sprintf("forbidden (%s may import: %s)", r.pkg, may))
				}
				continue
			}
			if d := pkgs[imp]; d != nil && d.Standard {
				continue
			}
			switch {
			case strings.HasPrefix(imp, "github.com/klauspost/cpuid/"):
				if from != "cpu" {
					report(from, imp, "only cpu probes the CPU")
				}
			case strings.HasPrefix(imp, "gonum.org/v1/gonum/"):
				if matchAny(hotPath, from) && !testSupport(from) {
					report(from, imp, "gonum stays off the hot path (cpu, kernels, dnnl, selector)")
				}
			case strings.HasPrefix(imp, "github.com/stretchr/testify/"):
				if !testSupport(from) {
					report(from, imp, "testify is for tests and test-support packages")
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// config is one build configuration the imports are listed in: imports
// differ by build tags, cgo and the target.
type config struct {
	name string
	env  []string
	tags string
}

var configs = []config{
	{name: "host"},
	{name: "CGO_ENABLED=0 -tags noasm,nodnnl", env: []string{"CGO_ENABLED=0"}, tags: "noasm,nodnnl"},
	{name: "GOOS=darwin GOARCH=arm64", env: []string{"GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0"}},
}

// moduleRoot returns the folder of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD (the go command must be on PATH, as go test puts it)")
	gomod := strings.TrimSpace(string(out))
	require.NotEmpty(t, gomod, "not inside a module")
	require.NotEqual(t, os.DevNull, gomod, "not inside a module")
	return filepath.Dir(gomod)
}

// list runs `go list -deps -json` over the module in c.
func list(t *testing.T, root string, c config) map[string]*pkg {
	t.Helper()
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Imports,Standard,Module,Error"}
	if c.tags != "" {
		args = append(args, "-tags", c.tags)
	}
	args = append(args, "./...")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), c.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s (%s): %s", strings.Join(args, " "), c.name, stderr.String())
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		err := dec.Decode(p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "decoding go list's output (%s)", c.name)
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// TestImports checks the module's imports against docs/DESIGN.md section
// 1.1 in every configuration.
func TestImports(t *testing.T) {
	root := moduleRoot(t)
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			pkgs := list(t, root, c)
			n := 0
			for _, p := range pkgs {
				if _, ok := rel(p.ImportPath); !ok {
					continue
				}
				n++
				// A package that does not build (or has no files in this
				// configuration) still lists its imports; say so, since a
				// broken package is checked only as far as go list could read
				// it.
				if p.Error != nil && !strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
					t.Logf("note: %s: %s", p.ImportPath, p.Error.Err)
				}
			}
			require.NotZero(t, n, "go list found no package of %s", module)
			bad := check(pkgs)
			assert.Empty(t, bad, "imports that docs/DESIGN.md section 1.1 forbids (%s):\n%s", c.name, strings.Join(bad, "\n"))
		})
	}
}

// TestCheckCatchesViolations feeds check a made-up graph with one
// violation of each kind.
func TestCheckCatchesViolations(t *testing.T) {
	g := map[string]*pkg{}
	add := func(p string, imports ...string) {
		g[module+"/"+p] = &pkg{ImportPath: module + "/" + p, Imports: imports}
	}
	std := func(p string) { g[p] = &pkg{ImportPath: p, Standard: true} }
	std("fmt")
	add("cpu", "fmt", "github.com/klauspost/cpuid/v2")
	add("kernels", "fmt", module+"/cpu", module+"/dnnl")
	add("kernels/peak", module+"/cpu", "gonum.org/v1/gonum/mat")
	add("selector", module+"/kernels", module+"/kernels/kernelstest", module+"/dnnl")
	add("tokenizer", "C")
	add("models/encoder", module+"/models/bert", module+"/tokenizer")
	add("models/bert", module+"/models/distilbert")
	add("smoothquant", "github.com/stretchr/testify/require", "github.com/klauspost/cpuid/v2")
	add("bench", module+"/cmd/int8bert")
	add("server")
	add("serve", module+"/models", module+"/models/encoder")
	bad := check(g)
	want := []string{
		"bench imports cmd/int8bert: nothing imports the command",
		"kernels imports dnnl: forbidden (kernels/... may import: cpu, kernels/...)",
		"kernels/peak imports gonum.org/v1/gonum/mat: gonum stays off the hot path (cpu, kernels, dnnl, selector)",
		"models/bert imports models/distilbert: forbidden (models/bert may import: models/encoder/..., cpu, kernels/..., selector, smoothquant, checkpoint, internal/atomicfile)",
		"models/encoder imports models/bert: forbidden (models/encoder/... may import: models/encoder/..., cpu, kernels/..., selector, smoothquant, checkpoint, internal/atomicfile)",
		"models/encoder imports tokenizer: forbidden (models/encoder/... may import: models/encoder/..., cpu, kernels/..., selector, smoothquant, checkpoint, internal/atomicfile)",
		"selector imports kernels/kernelstest: a test-support package, for _test.go files only",
		"serve imports models/encoder: forbidden (serve may import: serve/teipb, cpu, internal/cgroup, internal/threadcpu, tokenizer, checkpoint, dnnl/..., kernels/..., selector/..., smoothquant, models, models/bert, models/distilbert, models/xlmr, models/electra, models/mpnet)",
		"server: no import rule: give it a row in internal/layout's rules and in docs/DESIGN.md section 1.1",
		"smoothquant imports github.com/klauspost/cpuid/v2: only cpu probes the CPU",
		"smoothquant imports github.com/stretchr/testify/require: testify is for tests and test-support packages",
		`tokenizer imports "C": only dnnl/cgo may use cgo (docs/DESIGN.md section 5)`,
	}
	assert.Equal(t, want, bad)
}

// TestRulesFollowTheDesign: every row of rules names a package that
// docs/DESIGN.md section 1.1 names, so the two tables stay one.
func TestRulesFollowTheDesign(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "DESIGN.md"))
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "### 1.1 ")
	require.GreaterOrEqual(t, start, 0, "docs/DESIGN.md has no section 1.1")
	sec := doc[start:]
	if end := strings.Index(sec[1:], "\n## "); end >= 0 {
		sec = sec[:end+1]
	}
	for _, r := range rules {
		name := strings.TrimSuffix(r.pkg, "/...")
		assert.True(t, strings.Contains(sec, "`"+name+"`") || strings.Contains(sec, "`"+r.pkg+"`"),
			"rule %q: docs/DESIGN.md section 1.1 does not name `%s`", r.pkg, name)
	}
}
