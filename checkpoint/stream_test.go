package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// streamTensors is a fixed set of tensors of mixed element sizes, shapes
// and names, as an artifact holds (int8 weights, F32 scales and tables).
func streamTensors() (map[string]Tensor, map[string]string) {
	r := rand.New(rand.NewPCG(7, 11))
	f32 := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
		return v
	}
	i8 := func(n int) []int8 {
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(r.IntN(256) - 128)
		}
		return v
	}
	t := map[string]Tensor{
		"embeddings.word_embeddings.weight": Float32Tensor([]int{50, 16}, f32(800)),
		"layer.0.qkv.w":                     Int8Tensor([]int{48, 16}, i8(768)),
		"layer.0.qkv.w_scale":               Float32Tensor([]int{48}, f32(48)),
		"layer.0.o.w":                       Int8Tensor([]int{16, 16}, i8(256)),
		"layer.0.o.x_scale":                 Float32Tensor(nil, f32(1)),
		"half":                              {Dtype: F16, Shape: []int{3}, Data: []byte{1, 2, 3, 4, 5, 6}},
		"odd":                               Int8Tensor([]int{7}, i8(7)),
		"empty":                             Float32Tensor([]int{0}, nil),
	}
	return t, map[string]string{"format": "int8bert", "recipe": `{"mode":"static"}`}
}

// goldenStreamSHA is the SHA-256 of streamTensors as EncodeSafetensors
// encoded it before the writer streamed (commit 19fa68a): the streamed
// file must be the same bytes.
const goldenStreamSHA = "6b2b22991df0213955c95ffcd79502c003d78cf5c63d24cf11f201289b3dda49"

func TestWriteSafetensorsSameBytes(t *testing.T) {
	tensors, meta := streamTensors()
	enc, err := EncodeSafetensors(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(enc)
	if got := hex.EncodeToString(sum[:]); got != goldenStreamSHA {
		t.Errorf("EncodeSafetensors: sha256 %s, want %s (the encoding changed)", got, goldenStreamSHA)
	}
	var buf bytes.Buffer
	n, err := WriteSafetensors(&buf, tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) || !bytes.Equal(buf.Bytes(), enc) {
		t.Fatalf("WriteSafetensors wrote %d bytes (counted %d) that differ from EncodeSafetensors's %d", buf.Len(), n, len(enc))
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, enc) {
		t.Fatal("Save wrote other bytes than EncodeSafetensors")
	}
	// The file opens, and WriteTo copies it exactly.
	st, err := OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, _, err := st.Int8("layer.0.qkv.w")
	if err != nil || len(got) != 768 || got[5] != int8(tensors["layer.0.qkv.w"].Data[5]) {
		t.Fatalf("Int8 after Save: %v, %v", len(got), err)
	}
	var cp bytes.Buffer
	if n, err := st.WriteTo(&cp); err != nil || n != int64(len(enc)) || !bytes.Equal(cp.Bytes(), enc) {
		t.Fatalf("WriteTo: %d bytes, %v; same bytes: %v", n, err, bytes.Equal(cp.Bytes(), enc))
	}
	st.Close()
	if _, err := st.WriteTo(&cp); err == nil {
		t.Error("WriteTo after Close: no error")
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

var errFull = errors.New("disk full")

func (w *failWriter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		k := w.n
		w.n = 0
		return k, errFull
	}
	w.n -= len(b)
	return len(b), nil
}

func TestWriteSafetensorsErrors(t *testing.T) {
	tensors, meta := streamTensors()
	for _, n := range []int{0, 10, 200, 900} {
		if _, err := WriteSafetensors(&failWriter{n: n}, tensors, meta); !errors.Is(err, errFull) {
			t.Errorf("writer failing after %d bytes: %v, want the writer's error", n, err)
		}
	}
	bad := map[string]Tensor{"x": {Dtype: F32, Shape: []int{3}, Data: make([]byte, 8)}}
	if _, err := WriteSafetensors(&bytes.Buffer{}, bad, nil); err == nil {
		t.Error("a tensor whose bytes do not fit its shape: no error")
	}
}

// TestSaveSweepsDeadTemporaries: Save removes the temporary files of a
// writer killed before its rename (older than atomicfile.Stale), and
// keeps a recent one, which a writer still running may own.
func TestSaveSweepsDeadTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	dead := filepath.Join(dir, ".model.safetensors.tmp1234")
	live := filepath.Join(dir, ".model.safetensors.tmp5678")
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(dead, old, old); err != nil {
		t.Fatal(err)
	}
	tensors, meta := streamTensors()
	if err := Save(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead writer's temporary file is still there (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a recent temporary file was removed: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
