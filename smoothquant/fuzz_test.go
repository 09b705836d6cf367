package smoothquant

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeRecipe feeds arbitrary text to DecodeRecipe, the reader of the
// INT8 artifact's metadata: an error or a recipe, never a panic; a recipe
// it accepts encodes, and decodes back to itself.
func FuzzDecodeRecipe(f *testing.F) {
	good := &Recipe{Format: RecipeFormat, Mode: "static", Alpha: "0.5", Range: RangePercentile, Percentile: 99.9,
		FallbackSQNR: 12, CalibTexts: 2, CalibRows: 40, CalibHash: HashTexts([]string{"a", "b"}), Family: "bert",
		ModelType: "bert", Task: "ForSequenceClassification", Source: "dir", Versions: map[string]string{"go": "go1.26"},
		Layers: []LayerRecipe{{Name: "layer.0.qkv", Alpha: 0.5, SQNR: 31.5}, {Name: "layer.0.o", SQNR: math.Inf(1), Folded: true},
			{Name: "layer.0.ffn2", SQNR: math.Inf(-1), Fallback: true}},
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s, err := good.Encode()
	require.NoError(f, err)
	f.Add(s)
	f.Add(`{"format":1,"mode":"dynamic","alpha":"auto","layers":[{"name":"x","alpha":0.25,"sqnr_db":null}]}`)
	f.Add(`{"format":2,"mode":"static"}`)
	f.Add(`{"format":1,"mode":"static","alpha":"1.5"}`)
	f.Add(`{"format":1,"mode":"static","range":"median"}`)
	f.Add(`{"format":1,"mode":"static","created":"not a time"}`)
	f.Add(`{"format":1,"mode":"static","layers":[{"sqnr_db":-1.7976931348623157e308}]}`)
	f.Add(`[]`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := DecodeRecipe(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			return
		}
		enc, err := r.Encode()
		require.NoError(t, err, "a decoded recipe must encode")
		back, err := DecodeRecipe(enc)
		require.NoError(t, err, "an encoded recipe must decode: %s", enc)
		require.True(t, back.Created.Equal(r.Created))
		back.Created, r.Created = time.Time{}, time.Time{}
		if len(r.Layers) == 0 {
			r.Layers, back.Layers = nil, nil
		}
		if len(r.Versions) == 0 {
			r.Versions, back.Versions = nil, nil
		}
		require.True(t, reflect.DeepEqual(r, back), "round trip:\n%+v\n%+v", r, back)
	})
}
