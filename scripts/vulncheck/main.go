// Command vulncheck is the test command's dependency audit (scripts/test.sh,
// stage vuln; docs/DESIGN.md section 6.2). It has two subcommands:
//
//	vulncheck index SRC DST   indexes the OSV entries under SRC (a
//	                          golang.org/x/vulndb module's data/osv, fetched
//	                          through the Go module proxy) into DST, a
//	                          database in the v1 layout that govulncheck's
//	                          -db file://DST reads: index/db.json,
//	                          index/modules.json, index/vulns.json, ID/*.json.
//	vulncheck check           reads govulncheck -format json on stdin,
//	                          prints every finding and exits 1 when a
//	                          vulnerable symbol of a module (not of the
//	                          standard library) is called.
//
// The public database (vuln.go.dev) is not reachable from the machines the
// test command runs on; the module proxy is, so the database is built from
// a pinned golang.org/x/vulndb version.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "index":
		var n int
		n, err = index(os.Args[2], os.Args[3])
		if err == nil {
			fmt.Printf("vulncheck: indexed %d OSV entries into %s\n", n, os.Args[3])
		}
	case len(os.Args) == 2 && os.Args[1] == "check":
		var failed bool
		failed, err = check(os.Stdin, os.Stdout)
		if err == nil && failed {
			os.Exit(1)
		}
	default:
		err = errors.New("usage: vulncheck index SRC DST | vulncheck check < govulncheck.json")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
}

// entry is the part of an OSV entry the index needs.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

// The v1 index records (https://go.dev/security/vuln/database#api).
type (
	dbMeta struct {
		Modified time.Time `json:"modified"`
	}
	moduleVuln struct {
		ID       string    `json:"id"`
		Modified time.Time `json:"modified"`
		// Fixed is left out: it only lets govulncheck skip reading an
		// entry whose fix predates the version in use; without it every
		// entry of a module is read and its ranges are evaluated by
		// govulncheck itself, so no finding can be lost to a version
		// comparison of ours.
	}
	moduleMeta struct {
		Path  string       `json:"path"`
		Vulns []moduleVuln `json:"vulns"`
	}
	vulnMeta struct {
		ID       string    `json:"id"`
		Modified time.Time `json:"modified"`
		Aliases  []string  `json:"aliases,omitempty"`
	}
)

// index writes the v1 database of the OSV entries in src into dst, through
// a temporary folder renamed into place, so that an interrupted run never
// leaves a half-written database at dst. It returns the number of entries.
func index(src, dst string) (int, error) {
	names, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("index: no OSV entries (*.json) in %s", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	for _, d := range []string{"index", "ID"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return 0, err
		}
	}
	var db dbMeta
	modules := map[string]*moduleMeta{}
	vulns := make([]vulnMeta, 0, len(names))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return 0, err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return 0, fmt.Errorf("index: %s: %w", name, err)
		}
		if e.ID == "" || filepath.Base(name) != e.ID+".json" {
			return 0, fmt.Errorf("index: %s: holds entry %q; want a file named <id>.json", name, e.ID)
		}
		if e.Modified.After(db.Modified) {
			db.Modified = e.Modified
		}
		vulns = append(vulns, vulnMeta{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		seen := map[string]bool{}
		for _, a := range e.Affected {
			p := a.Package.Name
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			m := modules[p]
			if m == nil {
				m = &moduleMeta{Path: p}
				modules[p] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
		}
		if err := os.WriteFile(filepath.Join(tmp, "ID", e.ID+".json"), b, 0o644); err != nil {
			return 0, err
		}
	}
	mods := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		sort.Slice(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })
	for name, v := range map[string]any{"db.json": db, "modules.json": mods, "vulns.json": vulns} {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(tmp, "index", name), b, 0o644); err != nil {
			return 0, err
		}
	}
	if err := os.RemoveAll(dst); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, err
	}
	return len(names), nil
}

// The parts of govulncheck's JSON stream (golang.org/x/vuln/internal/govulncheck)
// that check reads.
type (
	message struct {
		Config *struct {
			GoVersion      string `json:"go_version"`
			ScannerVersion string `json:"scanner_version"`
			DB             string `json:"db"`
		} `json:"config"`
		OSV *struct {
			ID      string `json:"id"`
			Summary string `json:"summary"`
		} `json:"osv"`
		Finding *finding `json:"finding"`
	}
	finding struct {
		OSV          string  `json:"osv"`
		FixedVersion string  `json:"fixed_version"`
		Trace        []frame `json:"trace"`
	}
	frame struct {
		Module   string `json:"module"`
		Version  string `json:"version"`
		Package  string `json:"package"`
		Function string `json:"function"`
		Receiver string `json:"receiver"`
	}
)

// check reads govulncheck's JSON stream from r and writes a report to w.
// failed is true when a vulnerable symbol of a module other than the
// standard library is reachable from the code. Findings in the standard
// library are reported and do not fail: the toolchain is fixed by the
// machine (go.mod's go line), not by a dependency this module can bump.
// Findings in imported packages or required modules whose vulnerable
// symbols are not called are reported as such, as govulncheck does.
func check(r io.Reader, w io.Writer) (failed bool, err error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	summaries := map[string]string{}
	type key struct{ osv, module, level string }
	found := map[key]*finding{}
	var order []key
	gotConfig := false
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return false, fmt.Errorf("check: reading govulncheck's JSON output: %w", err)
		}
		switch {
		case m.Config != nil:
			gotConfig = true
			fmt.Fprintf(w, "vulncheck: govulncheck %s, %s, database %s\n", m.Config.ScannerVersion, m.Config.GoVersion, m.Config.DB)
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			top := f.Trace[0]
			level := "module"
			switch {
			case top.Function != "":
				level = "called"
			case top.Package != "":
				level = "imported"
			}
			k := key{f.OSV, top.Module, level}
			if found[k] == nil {
				order = append(order, k)
				found[k] = f
			}
		}
	}
	if !gotConfig {
		return false, errors.New("check: no govulncheck config message on stdin (did govulncheck run?)")
	}
	// A symbol-level finding supersedes the package and module ones of the
	// same entry and module.
	rank := map[string]int{"called": 0, "imported": 1, "module": 2}
	sort.SliceStable(order, func(i, j int) bool { return rank[order[i].level] < rank[order[j].level] })
	shown := map[[2]string]bool{}
	var nStd, nMod int
	for _, k := range order {
		if shown[[2]string{k.osv, k.module}] {
			continue
		}
		shown[[2]string{k.osv, k.module}] = true
		f := found[k]
		top := f.Trace[0]
		where := top.Module + "@" + top.Version
		if top.Package != "" {
			where += " " + top.Package
		}
		if top.Function != "" {
			fn := top.Function
			if top.Receiver != "" {
				fn = strings.TrimPrefix(top.Receiver, "*") + "." + fn
			}
			where += "." + fn
		}
		fixed := f.FixedVersion
		if fixed == "" {
			fixed = "none"
		}
		verdict := "reported"
		switch {
		case k.level == "called" && k.module == "stdlib":
			nStd++
			verdict = "reported (standard library: the toolchain is fixed)"
		case k.level == "called":
			nMod++
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%s %s: %s [%s; fixed in %s]: %s\n", verdict, k.osv, summaries[k.osv], k.level, fixed, where)
	}
	fmt.Fprintf(w, "vulncheck: %d called in modules (fail), %d called in the standard library (reported), %d imported or required only\n",
		nMod, nStd, len(shown)-nMod-nStd)
	return nMod > 0, nil
}
