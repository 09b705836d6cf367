package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrTooLarge: a tokenizer file is over its size limit (docs/DESIGN.md
// section 6.2).
var ErrTooLarge = errors.New("over the size limit")

// The size limits of the files LoadFile reads: far above real tokenizers
// (a multilingual tokenizer.json is about 20 MB, a tokenizer_config.json a
// few KB to a few MB with a chat template) and far below what would hurt
// a server that reads them.
const (
	// MaxFileSize bounds tokenizer.json, vocab.txt, vocab.json and
	// merges.txt.
	MaxFileSize = 256 << 20
	// MaxConfigSize bounds tokenizer_config.json.
	MaxConfigSize = 16 << 20
)

// readLimited reads the file at path whole when it holds at most limit
// bytes, else returns an error wrapping ErrTooLarge that names the file,
// its size and the limit.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit: %w", path, fi.Size(), limit, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over the %d-byte limit: %w", path, limit, ErrTooLarge)
	}
	return b, nil
}

// readConfig reads dir's tokenizer_config.json: nil when there is none or
// it cannot be read (it is optional), an error when it is over its limit.
func readConfig(dir string) ([]byte, error) {
	b, err := readLimited(filepath.Join(dir, "tokenizer_config.json"), MaxConfigSize)
	if errors.Is(err, ErrTooLarge) {
		return nil, err
	}
	return b, nil
}
