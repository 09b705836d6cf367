package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sparse makes a file of n bytes at dir/name without writing them.
func sparse(t *testing.T, dir, name string, n int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSizeLimits: every file LoadFile reads is refused by size, before it
// is parsed, with an error naming it and wrapping ErrTooLarge.
func TestSizeLimits(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "vocab.txt", "vocab.json"} {
		p := sparse(t, dir, name, MaxFileSize+1)
		_, err := LoadFile(p)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s over the limit: %v", name, err)
		}
		os.Remove(p)
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`{"a":0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse(t, dir, "merges.txt", MaxFileSize+1)
	if _, err := LoadFile(filepath.Join(dir, "vocab.json")); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "merges.txt") {
		t.Errorf("merges.txt over the limit: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "merges.txt"), []byte("#version: 0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse(t, dir, "tokenizer_config.json", MaxConfigSize+1)
	for _, f := range []string{"vocab.txt", "vocab.json"} {
		if _, err := LoadFile(filepath.Join(dir, f)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "tokenizer_config.json") {
			t.Errorf("%s with tokenizer_config.json over the limit: %v", f, err)
		}
	}
	// Under the limits the same folder loads.
	os.Remove(filepath.Join(dir, "tokenizer_config.json"))
	if _, err := LoadFile(filepath.Join(dir, "vocab.txt")); err != nil {
		t.Errorf("vocab.txt under the limits: %v", err)
	}
}
