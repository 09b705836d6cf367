package encoder

import (
	"bufio"
	"fmt"
	"github.com/int8bert/int8bert/internal/atomicfile"
	"io"
	"os"
	"path/filepath"

	"github.com/int8bert/int8bert/checkpoint"
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
		bw := bufio.NewWriterSize(w, 1<<20)
		if _, err := m.artifact.WriteTo(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// writeArtifact writes the artifact's tensors and metadata to a temporary
// file in dir (os.TempDir() when ""), a tensor at a time, and returns it
// opened (mapped) and already removed, so that nothing is left behind
// whatever happens next, and the artifact is never whole in memory. Where
// no file can be made or mapped, it is encoded in memory instead.
func writeArtifact(dir string, tensors map[string]checkpoint.Tensor, meta map[string]string) (*checkpoint.Safetensors, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if st, err := writeArtifactFile(dir, tensors, meta); err == nil {
		return st, nil
	}
	// (Tensors that cannot be encoded fail here again, with the reason.)
	buf, err := checkpoint.EncodeSafetensors(tensors, meta)
	if err != nil {
		return nil, err
	}
	return checkpoint.ParseSafetensors(buf)
}

func writeArtifactFile(dir string, tensors map[string]checkpoint.Tensor, meta map[string]string) (*checkpoint.Safetensors, error) {
	f, err := os.CreateTemp(dir, ".int8bert-artifact-*.safetensors")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Removed at once, so that nothing is left behind whatever happens
	// next: the open file, and then its mapping, keep its data until
	// they go (where mmap is missing, the file is read into memory).
	if err := os.Remove(f.Name()); err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := checkpoint.WriteSafetensors(bw, tensors, meta); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return checkpoint.OpenSafetensorsFile(f)
}

// fileMode is the mode of the files Save writes: readable by everyone, as
// the model folder it copies from usually is (os.CreateTemp alone would
// leave 0600, which a service running as another user cannot read).
const fileMode = 0o644

// writeAtomic writes path through a temporary file in the same folder,
// renamed into place, with mode fileMode.
func writeAtomic(path string, write func(io.Writer) error) (err error) {
	// A killed writer's temporary files go first (DESIGN 6.1).
	atomicfile.Sweep(filepath.Dir(path), "."+filepath.Base(path)+".", atomicfile.Stale)
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

// Save writes an INT8 model to dir as a model folder that Load opens
// without recalibration: the artifact (ArtifactFile), config.json and the
// tokenizer files of the folder the FP32 model came from, and the tuning
// record of the model's keys (TuningRecordFile) that its selector has
// tuned, so that Load on this CPU and build starts warm.
func (m *TaskModel) Save(dir string) error {
	if err := m.enter(); err != nil {
		return err
	}
	defer m.leave()
	if p := m.Encoder.Precision(); !p.Int8() {
		return fmt.Errorf("encoder: save: the model is %s; only INT8 models are saved: %w", p, ErrConfig)
	}
	if m.dir == "" {
		return fmt.Errorf("encoder: save: the model was not loaded from a folder, so it has no config.json and tokenizer to copy: %w", ErrConfig)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := m.saveArtifact(filepath.Join(dir, ArtifactFile)); err != nil {
		return err
	}
	// Every file tokenizer.Find may read, so that the artifact keeps the
	// model's tokenizer.
	for _, f := range []string{"config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
		"vocab.json", "merges.txt", "added_tokens.json", "spm.model", "sentencepiece.bpe.model"} {
		src := filepath.Join(m.dir, f)
		if !fileExists(src) {
			continue
		}
		if same, _ := sameFile(src, filepath.Join(dir, f)); same {
			continue
		}
		if err := copyFile(src, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return m.SaveTuningRecord(dir)
}
