package checkpoint

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const goldenModels = "../../shared/golden/models"

// compareFormats checks that model.safetensors and pytorch_model.bin in dir
// hold the same names, shapes and float32 bits.
func compareFormats(t *testing.T, dir string) []string {
	t.Helper()
	st, err := OpenFile(filepath.Join(dir, SafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pt, err := OpenFile(filepath.Join(dir, PytorchFile))
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if st.Format != FormatSafetensors || pt.Format != FormatPytorch {
		t.Fatalf("formats %s, %s", st.Format, pt.Format)
	}
	if !reflect.DeepEqual(st.Names(), pt.Names()) {
		t.Fatalf("names differ:\nsafetensors %v\npytorch     %v", st.Names(), pt.Names())
	}
	for _, name := range st.Names() {
		a, sa, err := st.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		b, sb, err := pt.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sa, sb) {
			t.Fatalf("%s: shapes %v vs %v", name, sa, sb)
		}
		if len(a) != len(b) {
			t.Fatalf("%s: %d vs %d values", name, len(a), len(b))
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s[%d]: %v vs %v", name, i, a[i], b[i])
			}
		}
	}
	return st.Names()
}

func TestGoldenModels(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(goldenModels, "*"))
	if len(dirs) == 0 {
		t.Skipf("no golden models under %s (../shared absent): the testdata copy still runs in TestTestdataModel", goldenModels)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			names := compareFormats(t, dir)
			cfg, err := LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if cfg.HiddenSize != 64 || cfg.NumHiddenLayers != 2 || cfg.NumAttentionHeads != 4 || cfg.IntermediateSize != 128 || cfg.VocabSize != 1000 {
				t.Errorf("config %+v", cfg)
			}
			g, err := os.ReadFile(filepath.Join(dir, "golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var gold struct {
				Params map[string][]int `json:"params"`
			}
			if err := json.Unmarshal(g, &gold); err != nil {
				t.Fatal(err)
			}
			c, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Format != FormatSafetensors {
				t.Errorf("Open chose %s", c.Format)
			}
			if len(names) != len(gold.Params) {
				t.Errorf("%d tensors, golden.json lists %d", len(names), len(gold.Params))
			}
			for name, shape := range gold.Params {
				got, err := c.Shape(name)
				if err != nil {
					t.Error(err)
					continue
				}
				if !reflect.DeepEqual(got, shape) {
					t.Errorf("%s: shape %v, golden %v", name, got, shape)
				}
			}
		})
	}
}
