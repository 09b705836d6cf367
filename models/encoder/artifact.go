package encoder

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// saveArtifact writes the INT8 model's artifact to path (atomically: a
// temporary file in the same folder, then a rename).
func (m *TaskModel) saveArtifact(path string) error {
	if m.artifact == nil {
		src := filepath.Join(m.dir, ArtifactFile)
		if same, _ := sameFile(src, path); same {
			return nil
		}
		return copyFile(src, path)
	}
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(m.artifact)
		return err
	})
}

// fileMode is the mode of the files Save writes: readable by everyone, as
// the model folder it copies from usually is (os.CreateTemp alone would
// leave 0600, which a service running as another user cannot read).
const fileMode = 0o644

// writeAtomic writes path through a temporary file in the same folder,
// renamed into place, with mode fileMode.
func writeAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(fileMode); err != nil {
		return err
	}
	if err = write(f); err != nil {
		return fmt.Errorf("encoder: writing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomic(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// sameFile reports whether a and b are one file (saving a model onto its
// own folder).
func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
