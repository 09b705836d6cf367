package encoder

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Source is where weights come from: a checkpoint.
type Source interface {
	// Names lists every tensor.
	Names() []string
	// Float32 returns a tensor as float32 with its shape.
	Float32(name string) ([]float32, []int, error)
}

// LayerNames are the tensor names of one layer. Q, K and V are fused into
// one [3H, H] projection at load.
type LayerNames struct {
	Q, QBias, K, KBias, V, VBias string
	O, OBias                     string
	AttnLN, AttnLNBias           string
	FFN1, FFN1Bias               string
	FFN2, FFN2Bias               string
	OutLN, OutLNBias             string
	// PosQ and PosK (with biases) project DeBERTa's relative embeddings
	// where the layer does not share its query and key linears for them
	// (Disentangled.Shared false).
	PosQ, PosQBias, PosK, PosKBias string
}

// Names are the tensor names of an encoder; TypeEmb is "" without token
// types. EmbProj and EmbProjBias are the projection of the embeddings
// onto the hidden size (read only when Config.Projects). RelBias is the
// relative position bias table ([RelTable][Heads]) of a Config with
// RelBuckets > 0. Layer returns layer i's names.
type Names struct {
	WordEmb, PosEmb, TypeEmb string
	EmbLN, EmbLNBias         string
	EmbProj, EmbProjBias     string
	RelBias                  string
	// RelEmb, RelLN and RelLNBias are DeBERTa's relative embeddings
	// ([2 Span][Hidden]) and their LayerNorm (Config.Dis).
	RelEmb, RelLN, RelLNBias string
	Layer                    func(i int) LayerNames
}

// Loader reads tensors by name, checking shapes, remembering which names
// were used so that unexpected tensors can be reported, and accepting the
// old LayerNorm names (gamma/beta) for weight/bias. Family packages use it
// for their heads.
type Loader struct {
	src  Source
	have map[string]bool
	used map[string]bool
}

// NewLoader starts reading src.
func NewLoader(src Source) *Loader {
	l := &Loader{src: src, have: map[string]bool{}, used: map[string]bool{}}
	for _, n := range src.Names() {
		l.have[n] = true
	}
	return l
}

// alternatives are older spellings of a name.
func alternatives(name string) []string {
	alts := []string{name}
	switch {
	case strings.HasSuffix(name, "LayerNorm.weight") || strings.HasSuffix(name, "layer_norm.weight"):
		alts = append(alts, strings.TrimSuffix(name, "weight")+"gamma")
	case strings.HasSuffix(name, "LayerNorm.bias") || strings.HasSuffix(name, "layer_norm.bias"):
		alts = append(alts, strings.TrimSuffix(name, "bias")+"beta")
	}
	return alts
}

// Get reads name, which must have the given shape.
func (l *Loader) Get(name string, shape ...int) ([]float32, error) {
	for _, n := range alternatives(name) {
		if !l.have[n] {
			continue
		}
		v, s, err := l.src.Float32(n)
		if err != nil {
			return nil, fmt.Errorf("encoder: tensor %s: %w", n, err)
		}
		if !slices.Equal(s, shape) {
			return nil, fmt.Errorf("encoder: tensor %s has shape %v, want %v: %w", n, s, shape, ErrConfig)
		}
		l.used[n] = true
		return v, nil
	}
	return nil, fmt.Errorf("encoder: missing tensor %s: %w", name, ErrConfig)
}

// Has reports whether the source holds name (or an older spelling).
func (l *Loader) Has(name string) bool {
	for _, n := range alternatives(name) {
		if l.have[n] {
			return true
		}
	}
	return false
}

// MarkUsed records tensors that are deliberately not read (buffers such as
// position_ids).
func (l *Loader) MarkUsed(names ...string) {
	for _, n := range names {
		l.used[n] = true
	}
}

// Unexpected lists the tensors nobody read.
func (l *Loader) Unexpected() []string {
	var out []string
	for n := range l.have {
		if !l.used[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
