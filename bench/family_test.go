package bench

import (
	"fmt"

	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/deberta"
	"github.com/int8bert/int8bert/models/distilbert"
	"github.com/int8bert/int8bert/models/electra"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/mpnet"
	"github.com/int8bert/int8bert/models/xlmr"
)

// archFamily is the engine's family of a's config.json (by model_type, as
// models.Load picks it; nil for none), for the tests that hold the random
// weights to the family's tensor names and heads.
func archFamily(a *Arch) *encoder.Family {
	if a == nil || a.Config == nil {
		return nil
	}
	for _, f := range []*encoder.Family{bert.Family, distilbert.Family, xlmr.Family, xlmr.RoBERTa, xlmr.CamemBERT, electra.Family, mpnet.Family, deberta.Family} {
		if f.HasModelType(a.Config.ModelType) {
			return f
		}
	}
	return nil
}

// encoderConfig is the engine's configuration of a, as its family maps
// config.json.
func encoderConfig(a *Arch) (encoder.Config, error) {
	f := archFamily(a)
	if f == nil {
		return encoder.Config{}, fmt.Errorf("bench: incomplete architecture: %w", encoder.ErrConfig)
	}
	return f.Config(a.Config)
}
