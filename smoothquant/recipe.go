package smoothquant

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// MetadataKey is the safetensors metadata key holding the artifact's recipe
// as JSON.
const MetadataKey = "int8bert.recipe"

// RecipeFormat is the recipe format this build writes and the newest it
// reads.
const RecipeFormat = 1

// LayerRecipe is what the recipe records of one linear layer.
//
// JSON cannot hold infinities, so SQNR is written as null for +Inf (an exact
// layer) and as -1.7976931348623157e308 (-math.MaxFloat64) for -Inf; both
// decode back to the infinity. A NaN SQNR cannot be encoded.
type LayerRecipe struct {
	Name     string  `json:"name"`
	Alpha    float64 `json:"alpha"`
	SQNR     float64 `json:"sqnr_db"`
	Fallback bool    `json:"fallback,omitempty"`
	Folded   bool    `json:"smooth_folded,omitempty"`
}

type layerRecipeJSON struct {
	Name     string   `json:"name"`
	Alpha    float64  `json:"alpha"`
	SQNR     *float64 `json:"sqnr_db"`
	Fallback bool     `json:"fallback,omitempty"`
	Folded   bool     `json:"smooth_folded,omitempty"`
}

// MarshalJSON writes the layer with SQNR +Inf as null.
func (l LayerRecipe) MarshalJSON() ([]byte, error) {
	j := layerRecipeJSON{Name: l.Name, Alpha: l.Alpha, Fallback: l.Fallback, Folded: l.Folded}
	switch {
	case math.IsNaN(l.SQNR):
		return nil, fmt.Errorf("smoothquant: layer %q: NaN SQNR: %w", l.Name, ErrInvalid)
	case math.IsInf(l.SQNR, 1):
	case math.IsInf(l.SQNR, -1):
		v := -math.MaxFloat64
		j.SQNR = &v
	default:
		v := l.SQNR
		j.SQNR = &v
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a layer, null (or an absent) SQNR meaning +Inf.
func (l *LayerRecipe) UnmarshalJSON(b []byte) error {
	var j layerRecipeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = LayerRecipe{Name: j.Name, Alpha: j.Alpha, Fallback: j.Fallback, Folded: j.Folded, SQNR: math.Inf(1)}
	if j.SQNR != nil {
		l.SQNR = *j.SQNR
		if l.SQNR == -math.MaxFloat64 {
			l.SQNR = math.Inf(-1)
		}
	}
	return nil
}

// Recipe is the artifact's metadata, stored as JSON under MetadataKey.
type Recipe struct {
	Format       int     `json:"format"`
	Mode         string  `json:"mode"`
	Alpha        string  `json:"alpha"` // "0.5" or "auto"
	Range        string  `json:"range"`
	Percentile   float64 `json:"percentile,omitempty"`
	FallbackSQNR float64 `json:"fallback_sqnr_db,omitempty"`

	CalibTexts int    `json:"calib_texts"`
	CalibRows  int    `json:"calib_rows"`
	CalibHash  string `json:"calib_sha256"`

	Family    string `json:"family"`
	ModelType string `json:"model_type"`
	Task      string `json:"task"`
	Source    string `json:"source"`

	Versions map[string]string `json:"versions"`
	Layers   []LayerRecipe     `json:"layers"`
	Created  time.Time         `json:"created"`
}

// Encode returns r as JSON. A zero Format is written as RecipeFormat.
func (r *Recipe) Encode() (string, error) {
	if r == nil {
		return "", fmt.Errorf("smoothquant: nil recipe: %w", ErrInvalid)
	}
	c := *r
	if c.Format == 0 {
		c.Format = RecipeFormat
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("smoothquant: encode recipe: %w: %w", ErrInvalid, err)
	}
	return string(b), nil
}

// DecodeRecipe parses a recipe. It refuses a missing or newer format (a
// newer one needs a newer int8bert), an invalid mode, alpha or range; all
// errors wrap ErrInvalid.
func DecodeRecipe(s string) (*Recipe, error) {
	var r Recipe
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("smoothquant: decode recipe: %w: %w", ErrInvalid, err)
	}
	switch {
	case r.Format > RecipeFormat:
		return nil, fmt.Errorf("smoothquant: recipe format %d is newer than the %d this build reads; use a newer int8bert: %w", r.Format, RecipeFormat, ErrInvalid)
	case r.Format < 1:
		return nil, fmt.Errorf("smoothquant: recipe format %d (missing or invalid): %w", r.Format, ErrInvalid)
	}
	if _, err := ParseMode(r.Mode); err != nil {
		return nil, fmt.Errorf("smoothquant: recipe: %w", err)
	}
	if r.Alpha != "" {
		if _, _, err := ParseAlpha(r.Alpha); err != nil {
			return nil, fmt.Errorf("smoothquant: recipe: %w", err)
		}
	}
	switch r.Range {
	case "", RangeMax, RangePercentile:
	default:
		return nil, fmt.Errorf("smoothquant: recipe: range %q: %w", r.Range, ErrInvalid)
	}
	return &r, nil
}

// HashTexts returns the hex SHA-256 of the texts, each followed by "\n".
func HashTexts(texts []string) string {
	h := sha256.New()
	for _, t := range texts {
		h.Write([]byte(t))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}
