package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// sha256 of the original model.safetensors of distilbert-tiny.
const tinySafetensorsSHA256 = "9edfb3b77752c8e2aff7a9db179c2a21a813f4d9f5d8300eeb4d9aa37cf88c44"

func testdataDir(t *testing.T) string {
	t.Helper()
	return filepath.Join("testdata", "distilbert-tiny")
}

// rebuildTinySafetensors writes the original model.safetensors of
// testdata/distilbert-tiny into a temporary folder (with config.json and
// pytorch_model.bin beside it) and returns that folder.
func rebuildTinySafetensors(t *testing.T) string {
	t.Helper()
	src := testdataDir(t)
	hdr, err := os.ReadFile(filepath.Join(src, "model.safetensors.header"))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := OpenTorch(filepath.Join(src, PytorchFile))
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	// Parse the header against a zero data section of the right length,
	// then fill each tensor's bytes from the .bin.
	var end int64
	s, err := parseHeaderOnly(hdr)
	if err != nil {
		t.Fatal(err)
	}
	infos := make([]TensorInfo, 0, len(s))
	for _, info := range s {
		infos = append(infos, info)
		end = max(end, info.End)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Begin < infos[j].Begin })
	file := make([]byte, int64(len(hdr))+end)
	copy(file, hdr)
	for _, info := range infos {
		_, raw, err := pt.Raw(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		copy(file[int64(len(hdr))+info.Begin:], raw)
	}
	sum := sha256.Sum256(file)
	if got := hex.EncodeToString(sum[:]); got != tinySafetensorsSHA256 {
		t.Fatalf("rebuilt model.safetensors has sha256 %s, want %s", got, tinySafetensorsSHA256)
	}
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, PytorchFile} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, SafetensorsFile), file, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// parseHeaderOnly reads the tensor entries of a header-only safetensors
// prefix: it appends a zero data section as long as the header asks for.
func parseHeaderOnly(hdr []byte) (map[string]TensorInfo, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr[8:], &raw); err != nil {
		return nil, err
	}
	var need int64
	for name, msg := range raw {
		var e headerEntry
		if name == "__metadata__" || json.Unmarshal(msg, &e) != nil || len(e.DataOffsets) != 2 {
			continue
		}
		need = max(need, e.DataOffsets[1])
	}
	s, err := ParseSafetensors(append(append([]byte(nil), hdr...), make([]byte, need)...))
	if err != nil {
		return nil, err
	}
	out := map[string]TensorInfo{}
	for _, n := range s.Names() {
		out[n], _ = s.Info(n)
	}
	return out, nil
}

func TestTestdataModel(t *testing.T) {
	dir := rebuildTinySafetensors(t)
	names := compareFormats(t, dir)
	if len(names) != 4+2*16 {
		t.Errorf("%d tensors, want 36", len(names))
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Format != FormatSafetensors || c.Metadata["format"] != "pt" {
		t.Errorf("format %s, metadata %v", c.Format, c.Metadata)
	}
	shape, err := c.Shape("embeddings.word_embeddings.weight")
	if err != nil || len(shape) != 2 || shape[0] != 1000 || shape[1] != 64 {
		t.Errorf("word embeddings shape %v, %v", shape, err)
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.IsDistilBERT() || cfg.HiddenSize != 64 || cfg.NumHiddenLayers != 2 || cfg.NumAttentionHeads != 4 ||
		cfg.IntermediateSize != 128 || cfg.HiddenAct != "gelu" || cfg.LayerNormEpsilon() != 1e-12 {
		t.Errorf("normalised config: %+v", cfg)
	}
	// Without model.safetensors, Open falls back to pytorch_model.bin.
	os.Remove(filepath.Join(dir, SafetensorsFile))
	c2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.Format != FormatPytorch {
		t.Errorf("fallback format %s", c2.Format)
	}
}
