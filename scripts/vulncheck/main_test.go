package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeEntry(t *testing.T, dir, name, id string, modified time.Time, modules ...string) {
	t.Helper()
	var aff []map[string]any
	for _, m := range modules {
		aff = append(aff, map[string]any{"package": map[string]string{"name": m, "ecosystem": "Go"}})
	}
	b, err := json.Marshal(map[string]any{"id": id, "modified": modified, "aliases": []string{"CVE-" + id}, "affected": aff})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestIndex(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "db")
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	writeEntry(t, src, "GO-2026-0002.json", "GO-2026-0002", t2, "example.com/a", "stdlib", "example.com/a")
	writeEntry(t, src, "GO-2026-0001.json", "GO-2026-0001", t1, "example.com/a")
	// A stale database at dst is replaced, not merged.
	if err := os.MkdirAll(filepath.Join(dst, "ID"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "ID", "GO-2000-0001.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := index(src, dst)
	if err != nil || n != 2 {
		t.Fatalf("index = %d, %v; want 2 entries", n, err)
	}
	read := func(p string, v any) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	var db dbMeta
	read("index/db.json", &db)
	if !db.Modified.Equal(t2) {
		t.Errorf("db.json modified %v, want %v", db.Modified, t2)
	}
	var mods []moduleMeta
	read("index/modules.json", &mods)
	if len(mods) != 2 || mods[0].Path != "example.com/a" || mods[1].Path != "stdlib" {
		t.Fatalf("modules.json = %+v; want example.com/a, stdlib", mods)
	}
	if v := mods[0].Vulns; len(v) != 2 || v[0].ID != "GO-2026-0001" || v[1].ID != "GO-2026-0002" || !v[1].Modified.Equal(t2) {
		t.Errorf("example.com/a's vulns = %+v; want GO-2026-0001, GO-2026-0002 once each", v)
	}
	var vulns []vulnMeta
	read("index/vulns.json", &vulns)
	if len(vulns) != 2 || vulns[0].ID != "GO-2026-0001" || len(vulns[0].Aliases) != 1 {
		t.Errorf("vulns.json = %+v", vulns)
	}
	var e entry
	read("ID/GO-2026-0002.json", &e)
	if e.ID != "GO-2026-0002" {
		t.Errorf("ID/GO-2026-0002.json holds %q", e.ID)
	}
	if _, err := os.Stat(filepath.Join(dst, "ID", "GO-2000-0001.json")); !os.IsNotExist(err) {
		t.Errorf("the stale entry survived: %v", err)
	}
	left, _ := filepath.Glob(dst + ".tmp*")
	if len(left) != 0 {
		t.Errorf("temporary folders left: %v", left)
	}
}

func TestIndexRefuses(t *testing.T) {
	src := t.TempDir()
	if _, err := index(src, filepath.Join(t.TempDir(), "db")); err == nil {
		t.Error("an empty source was indexed")
	}
	writeEntry(t, src, "GO-2026-0003.json", "GO-2026-0004", time.Time{}, "example.com/a")
	if _, err := index(src, filepath.Join(t.TempDir(), "db")); err == nil || !strings.Contains(err.Error(), "GO-2026-0004") {
		t.Errorf("an entry under another id's name: err = %v", err)
	}
	if err := os.WriteFile(filepath.Join(src, "GO-2026-0003.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := index(src, filepath.Join(t.TempDir(), "db")); err == nil {
		t.Error("a malformed entry was indexed")
	}
}

const config = `{"config":{"protocol_version":"v1.0.0","scanner_version":"v1.9.0","db":"file:///db","go_version":"go1.26.8"}}
`

func findingLine(osv, module, pkg, fn string) string {
	b, _ := json.Marshal(map[string]any{"finding": map[string]any{"osv": osv, "fixed_version": "v9.9.9",
		"trace": []map[string]string{{"module": module, "version": "v1.0.0", "package": pkg, "function": fn}}}})
	return string(b) + "\n"
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		fail   bool
		want   []string
	}{
		{"clean", config, false, []string{"0 called in modules"}},
		{"module called", config + `{"osv":{"id":"GO-1","summary":"bad thing"}}` + "\n" +
			findingLine("GO-1", "example.com/m", "example.com/m/p", "") +
			findingLine("GO-1", "example.com/m", "example.com/m/p", "F"), true,
			[]string{"FAIL GO-1: bad thing [called; fixed in v9.9.9]: example.com/m@v1.0.0 example.com/m/p.F", "1 called in modules (fail)"}},
		{"stdlib called", config + findingLine("GO-2", "stdlib", "net/http", "Serve"), false,
			[]string{"reported (standard library: the toolchain is fixed) GO-2", "1 called in the standard library"}},
		{"module imported only", config + findingLine("GO-3", "example.com/m", "example.com/m/p", "") +
			findingLine("GO-4", "example.com/n", "", ""), false,
			[]string{"reported GO-3", "[imported;", "reported GO-4", "[module;", "2 imported or required only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			failed, err := check(strings.NewReader(tc.stream), &out)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.fail {
				t.Errorf("failed = %v, want %v; report:\n%s", failed, tc.fail, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, out.String())
				}
			}
			if n := strings.Count(out.String(), "GO-1:"); n > 1 {
				t.Errorf("GO-1 reported %d times, want once (its called finding)", n)
			}
		})
	}
	if _, err := check(strings.NewReader(""), &strings.Builder{}); err == nil {
		t.Error("an empty stream (govulncheck did not run) passed")
	}
	if _, err := check(strings.NewReader(config+"{"), &strings.Builder{}); err == nil {
		t.Error("a truncated stream passed")
	}
}
