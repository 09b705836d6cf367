package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Errors of the checks that keep a hostile model folder, index or hub
// server inside its bounds (docs/DESIGN.md section 6.2), for errors.Is.
var (
	// ErrUnsafePath: a file name that a file declares (an index's
	// weight_map), that a caller or server gives the hub client (a file
	// name, an ETag), or that a symlink of a model folder points to, leads
	// outside the folder or cache it must stay in.
	ErrUnsafePath = errors.New("path leaves its folder")
	// ErrTooLarge: a file, or a length field it declares, is over the
	// package's limit for it.
	ErrTooLarge = errors.New("over the size limit")
)

// The size limits of the small JSON files a model folder holds; each is
// far above what real models have (a few KB of config, a few hundred KB
// of index for the largest sharded checkpoints) and far below what would
// hurt a server that reads them.
const (
	// MaxConfigSize bounds config.json and the other small JSON files
	// of a model folder (modules.json, the module configs).
	MaxConfigSize = 16 << 20
	// MaxIndexSize bounds model.safetensors.index.json.
	MaxIndexSize = 64 << 20
)

// ReadFileLimited reads the file at path whole when it holds at most
// limit bytes, else returns an error wrapping ErrTooLarge that names the
// file, its size and the limit. what names the kind of file in the error.
func ReadFileLimited(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit of a %s: %w", path, fi.Size(), limit, what, ErrTooLarge)
	}
	// The file may grow after Stat, or be no regular file: read one byte
	// past the limit to tell.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over the %d-byte limit of a %s: %w", path, limit, what, ErrTooLarge)
	}
	return b, nil
}

// localName reports whether the slash-separated name n stays inside the
// folder it is relative to: not empty, not absolute, no "." or ".."
// element, no backslash, no name Windows reserves (filepath.IsLocal).
func localName(n string) bool {
	if n == "" || strings.Contains(n, `\`) || !filepath.IsLocal(filepath.FromSlash(n)) {
		return false
	}
	for _, part := range strings.Split(n, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// maxFolderDepth bounds how deep CheckSymlinks looks: a model folder
// holds its files at the top and sentence-transformers modules one
// level down.
const maxFolderDepth = 4

// CheckSymlinks returns an error wrapping ErrUnsafePath when a symlink in
// the model folder dir (to maxFolderDepth levels) resolves to a path
// outside it, or cannot be resolved. A snapshot folder of the hub cache
// (.../models--<org>--<name>/snapshots/<commit>) may link into its
// repository's cache folder, where the hub client keeps the blobs its
// symlinks name. The folder itself may be reached through a symlink.
// A caller that trusts the folder's links skips the check
// (models.Options.AllowSymlinksOutside).
func CheckSymlinks(dir string) error {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	allowed := root
	if snaps := filepath.Dir(root); filepath.Base(snaps) == "snapshots" && strings.HasPrefix(filepath.Base(filepath.Dir(snaps)), "models--") {
		allowed = filepath.Dir(snaps)
	}
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel != "." && strings.Count(rel, string(filepath.Separator)) >= maxFolderDepth-1 {
			return filepath.SkipDir
		}
		if d.Type()&os.ModeSymlink == 0 {
			return nil
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("checkpoint: model folder %s: symlink %s does not resolve (%v): %w", dir, rel, err, ErrUnsafePath)
		}
		if r, err := filepath.Rel(allowed, target); err != nil || !filepath.IsLocal(r) {
			return fmt.Errorf("checkpoint: model folder %s: symlink %s points to %s, outside the folder (allow it with models.Options.AllowSymlinksOutside, the CLI's --allow-symlinks-outside): %w",
				dir, rel, target, ErrUnsafePath)
		}
		return nil
	})
}
