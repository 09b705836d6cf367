package smoothquant

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRecipeRoundTrip(t *testing.T) {
	r := &Recipe{
		Format: RecipeFormat, Mode: "static", Alpha: "auto", Range: "percentile", Percentile: 99.99, FallbackSQNR: 15,
		CalibTexts: 128, CalibRows: 4096, CalibHash: HashTexts([]string{"a", "b"}),
		Family: "bert", ModelType: "bert", Task: "sequence-classification", Source: "some/model",
		Versions: map[string]string{"int8bert": "dev", "go": "go1.26"},
		Layers: []LayerRecipe{
			{Name: "layer.0.q", Alpha: 0.55, SQNR: 38.25},
			{Name: "layer.0.o", Alpha: 0, SQNR: math.Inf(1), Folded: true},
			{Name: "layer.0.ffn2", Alpha: 0.3, SQNR: 9.5, Fallback: true},
			{Name: "layer.1.ffn2", Alpha: 0.3, SQNR: math.Inf(-1)},
		},
		Created: time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC),
	}
	s, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, `"sqnr_db":null`) || !strings.Contains(s, `"smooth_folded":true`) || !strings.Contains(s, `"calib_sha256"`) {
		t.Errorf("encoding %s", s)
	}
	got, err := DecodeRecipe(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	// Format 0 is written as the current one
	r0 := *r
	r0.Format = 0
	if s, err := r0.Encode(); err != nil || !strings.Contains(s, `"format":1`) {
		t.Errorf("format 0: %v %s", err, s)
	}
	rn := *r
	rn.Layers = []LayerRecipe{{Name: "x", SQNR: math.NaN()}}
	if _, err := rn.Encode(); err == nil {
		t.Error("NaN SQNR encoded")
	}
}

func TestDecodeRecipeErrors(t *testing.T) {
	cases := map[string]string{
		"newer":   `{"format":2,"mode":"static"}`,
		"missing": `{"mode":"static"}`,
		"mode":    `{"format":1,"mode":"fp16"}`,
		"alpha":   `{"format":1,"mode":"dynamic","alpha":"2"}`,
		"range":   `{"format":1,"mode":"dynamic","range":"minmax"}`,
		"json":    `{"format":1,`,
	}
	for name, s := range cases {
		_, err := DecodeRecipe(s)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if name == "newer" && (err == nil || !strings.Contains(err.Error(), "newer")) {
			t.Errorf("newer format error unclear: %v", err)
		}
	}
	if _, err := DecodeRecipe(`{"format":1,"mode":"int8-dynamic","alpha":"0.5"}`); err != nil {
		t.Error(err)
	}
}

func TestHashTexts(t *testing.T) {
	sum := sha256.Sum256([]byte("hello\nworld\n"))
	if got := HashTexts([]string{"hello", "world"}); got != hex.EncodeToString(sum[:]) {
		t.Errorf("hash %s", got)
	}
	if HashTexts([]string{"ab"}) == HashTexts([]string{"a", "b"}) {
		t.Error("text boundaries not hashed")
	}
}
