package models

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"sync"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// Random weights: the initialisation of Hugging Face's _init_weights.
const (
	randInitNormal = iota // N(0, initializer_range)
	randInitOnes          // LayerNorm weights
	randInitZeros         // LayerNorm biases
)

// randTensorSpec is one tensor of a RandomSource.
type randTensorSpec struct {
	shape   []int
	init    int
	zeroRow int // a row set to zero (embedding padding_idx), or -1
}

// RandomSource is the Weights (New) of deterministic random weights with
// the tensor names and shapes of a checkpoint of one architecture and task.
// Tensors are generated when read, each from the seed and its own name, so
// the values do not depend on the order of calls. It is safe for concurrent
// use.
type RandomSource struct {
	// Prefix is the base model's prefix in the tensor names ("" for the
	// base model, the family's for a task checkpoint).
	Prefix string
	// Task is the head the tensors describe.
	Task Task

	seed  uint64
	std   float64
	err   error
	names []string
	specs map[string]randTensorSpec

	mu       sync.RWMutex
	override map[string][]float32
}

// RandomWeights returns the random weights of a checkpoint of config cfg
// (named name in errors; the family is the one Load picks) for task:
// for the base model the names have no prefix (as BertModel,
// DistilBertModel and XLMRobertaModel save them) and include the family's
// pooler; for sequence classification (Config.NumLabels labels, 2 when
// unset) and question answering they carry the family's prefix and the
// head's tensors, with the pooler only where Hugging Face's class builds one
// (BERT's classifier, which reads it). DeBERTa's are its relative
// embeddings (with their LayerNorm under norm_rel_ebd layer_norm), the
// layers' pos_key_proj and pos_query_proj where share_att_key is false,
// and no position table where position_biased_input is false. Weights are N(0, initializer_range)
// (0.02 by default), linear biases too, LayerNorm weights 1 and biases 0;
// the word embedding row of pad_token_id (and for XLM-R the position
// embedding row of the padding index) is 0 as Hugging Face initialises it.
// The normal values come from a splitmix64 stream seeded by seed and the
// tensor's name, through the normal quantile function tabulated at 4096
// points (so they lie within about 3.9 standard deviations). Same arch,
// task and seed, same tensors.
//
// A nil or incomplete config, an unsupported family or an unknown task
// gives a source whose Names is empty and whose Float32 and Err return the
// error.
func RandomWeights(name string, cfg *checkpoint.Config, task Task, seed uint64) *RandomSource {
	r := &RandomSource{Task: task, seed: seed, std: 0.02, specs: map[string]randTensorSpec{}, override: map[string][]float32{}}
	r.err = r.build(name, cfg, encoder.Task(task))
	if r.err != nil {
		r.names, r.specs = nil, map[string]randTensorSpec{}
	}
	return r
}

func (r *RandomSource) build(arch string, cfg *checkpoint.Config, task encoder.Task) error {
	if cfg == nil {
		return fmt.Errorf("models: random weights: incomplete architecture: %w", ErrConfig)
	}
	fam, err := familyOf(cfg)
	if err != nil {
		return fmt.Errorf("models: random weights for %s: %w", arch, err)
	}
	ec, err := fam.Config(cfg)
	if err != nil {
		return fmt.Errorf("models: random weights for %s: %w", arch, err)
	}
	if cfg.InitializerRange > 0 {
		r.std = cfg.InitializerRange
	}
	switch task {
	case encoder.TaskBase:
	case encoder.TaskSequenceClassification, encoder.TaskQuestionAnswering:
		r.Prefix = fam.Prefix
	default:
		return fmt.Errorf("models: random weights for %s: unknown task %d: %w", arch, int(task), ErrConfig)
	}
	h, p := ec.Hidden, r.Prefix
	var tooBig error
	add := func(name string, init int, shape ...int) {
		if name == "" {
			return
		}
		if tensorNumel(shape) > maxRandomTensor && tooBig == nil {
			tooBig = fmt.Errorf("models: random weights for %s: %s of shape %v is too large: %w", arch, name, shape, ErrConfig)
		}
		if _, dup := r.specs[name]; !dup {
			r.names = append(r.names, name)
		}
		r.specs[name] = randTensorSpec{shape: shape, init: init, zeroRow: -1}
	}
	linear := func(w, b string, n, k int) {
		add(w, randInitNormal, n, k)
		add(b, randInitNormal, n)
	}
	names := fam.Names(p)
	// The embeddings are e wide (ELECTRA's embedding_size), projected onto
	// the hidden size when they differ.
	e := ec.EmbeddingWidth()
	add(names.WordEmb, randInitNormal, ec.Vocab, e)
	if cfg.PadTokenID != nil && *cfg.PadTokenID >= 0 && *cfg.PadTokenID < ec.Vocab {
		s := r.specs[names.WordEmb]
		s.zeroRow = *cfg.PadTokenID
		r.specs[names.WordEmb] = s
	}
	if !ec.NoPositions {
		add(names.PosEmb, randInitNormal, ec.MaxPositions, e)
	}
	if ec.PositionsFromPadding && ec.PaddingIdx >= 0 && ec.PaddingIdx < ec.MaxPositions {
		// RoBERTa's position embedding has padding_idx too.
		s := r.specs[names.PosEmb]
		s.zeroRow = ec.PaddingIdx
		r.specs[names.PosEmb] = s
	}
	if names.TypeEmb != "" && ec.TypeVocab > 0 {
		add(names.TypeEmb, randInitNormal, ec.TypeVocab, e)
	}
	add(names.EmbLN, randInitOnes, e)
	add(names.EmbLNBias, randInitZeros, e)
	if ec.Projects() {
		linear(names.EmbProj, names.EmbProjBias, h, e)
	}
	if names.RelBias != "" && ec.RelBuckets > 0 {
		add(names.RelBias, randInitNormal, ec.RelTable, ec.Heads)
	}
	if dis := ec.Dis; dis.Span > 0 {
		// DeBERTa's shared relative embeddings (2 Span rows) and their
		// LayerNorm (norm_rel_ebd layer_norm).
		add(names.RelEmb, randInitNormal, 2*dis.Span, h)
		if dis.NormLN {
			add(names.RelLN, randInitOnes, h)
			add(names.RelLNBias, randInitZeros, h)
		}
	}
	if names.Layer == nil && ec.Layers > 0 {
		return fmt.Errorf("models: random weights for %s: the family names no layers: %w", arch, ErrConfig)
	}
	for i := 0; i < ec.Layers; i++ {
		l := names.Layer(i)
		linear(l.Q, l.QBias, h, h)
		linear(l.K, l.KBias, h, h)
		linear(l.V, l.VBias, h, h)
		if dis := ec.Dis; dis.Span > 0 && !dis.Shared {
			// DeBERTa's pos_key_proj (c2p) and pos_query_proj (p2c)
			// where share_att_key is false.
			if dis.C2P {
				linear(l.PosK, l.PosKBias, h, h)
			}
			if dis.P2C {
				linear(l.PosQ, l.PosQBias, h, h)
			}
		}
		linear(l.O, l.OBias, h, h)
		add(l.AttnLN, randInitOnes, h)
		add(l.AttnLNBias, randInitZeros, h)
		linear(l.FFN1, l.FFN1Bias, ec.Intermediate, h)
		linear(l.FFN2, l.FFN2Bias, h, ec.Intermediate)
		add(l.OutLN, randInitOnes, h)
		add(l.OutLNBias, randInitZeros, h)
	}
	pooler := fam.Pooler != nil && (task == encoder.TaskBase ||
		task == encoder.TaskSequenceClassification && fam.PoolerForClassification)
	if pooler {
		linear(p+fam.Pooler.Weight, p+fam.Pooler.Bias, h, h)
	}
	switch task {
	case encoder.TaskSequenceClassification:
		if len(fam.Classifier) == 0 {
			return fmt.Errorf("models: random weights for %s: the family has no classifier: %w", arch, ErrConfig)
		}
		labels := cfg.NumLabels
		if labels <= 0 {
			labels = 2
		}
		for i, s := range fam.Classifier {
			n := h
			if i == len(fam.Classifier)-1 {
				n = labels
			}
			linear(s.Weight, s.Bias, n, h)
		}
	case encoder.TaskQuestionAnswering:
		if fam.QA.Weight == "" {
			return fmt.Errorf("models: random weights for %s: the family has no question answering head: %w", arch, ErrConfig)
		}
		linear(fam.QA.Weight, fam.QA.Bias, 2, h)
	}
	return tooBig
}

// maxRandomTensor bounds a tensor's elements (16 GiB of float32).
const maxRandomTensor = 1 << 32

// Err returns the error RandomWeights met, if any.
func (r *RandomSource) Err() error { return r.err }

// Names lists every tensor, embeddings first, then the layers in order,
// then the pooler and the head.
func (r *RandomSource) Names() []string {
	return append([]string(nil), r.names...)
}

// Shape returns a tensor's shape without generating it.
func (r *RandomSource) Shape(name string) ([]int, error) {
	s, err := r.spec(name)
	if err != nil {
		return nil, err
	}
	return append([]int(nil), s.shape...), nil
}

func (r *RandomSource) spec(name string) (randTensorSpec, error) {
	if r.err != nil {
		return randTensorSpec{}, r.err
	}
	s, ok := r.specs[name]
	if !ok {
		return randTensorSpec{}, fmt.Errorf("models: random weights: %s: %w", name, checkpoint.ErrNoTensor)
	}
	return s, nil
}

func tensorNumel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Float32 returns a tensor (a new slice the caller owns) and its shape.
func (r *RandomSource) Float32(name string) ([]float32, []int, error) {
	s, err := r.spec(name)
	if err != nil {
		return nil, nil, err
	}
	shape := append([]int(nil), s.shape...)
	r.mu.RLock()
	o, ok := r.override[name]
	r.mu.RUnlock()
	if ok {
		return append([]float32(nil), o...), shape, nil
	}
	v := make([]float32, tensorNumel(s.shape))
	switch s.init {
	case randInitOnes:
		for i := range v {
			v[i] = 1
		}
	case randInitNormal:
		fillRandomNormal(v, randTensorSeed(r.seed, name), float32(r.std))
		if s.zeroRow >= 0 && len(s.shape) == 2 {
			clear(v[s.zeroRow*s.shape[1] : (s.zeroRow+1)*s.shape[1]])
		}
	}
	return v, shape, nil
}

// Set replaces one tensor's values (copied) for later Float32 calls, for
// stress tests (outliers, saturated weights). v must have the tensor's
// number of elements.
func (r *RandomSource) Set(name string, v []float32) error {
	s, err := r.spec(name)
	if err != nil {
		return err
	}
	if n := tensorNumel(s.shape); len(v) != n {
		return fmt.Errorf("models: random weights: %s has shape %v (%d values), got %d values: %w", name, s.shape, n, len(v), errRandomShape)
	}
	r.mu.Lock()
	r.override[name] = append([]float32(nil), v...)
	r.mu.Unlock()
	return nil
}

var errRandomShape = errors.New("wrong number of values")

// splitmix64's increment and output mix (Steele, Lea and Flood).
const splitmixGamma = 0x9e3779b97f4a7c15

func splitmixMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// randTensorSeed derives a tensor's stream from the source seed and its name.
func randTensorSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return splitmixMix(seed ^ splitmixMix(h.Sum64()+splitmixGamma))
}

// normQuantileBins is the number of equal-probability bins of the tabulated
// normal quantile function.
const normQuantileBins = 1 << 12

// normQuantiles holds the standard normal quantiles at k/normQuantileBins (k = 0 ...
// normQuantileBins, the two infinite ends replaced by the points that give the tail
// bins the tails' mean) and the differences between neighbours.
var normQuantiles = sync.OnceValue(func() *[2][normQuantileBins + 1]float32 {
	var t [2][normQuantileBins + 1]float64
	for k := 1; k < normQuantileBins; k++ {
		t[0][k] = math.Sqrt2 * math.Erfinv(2*float64(k)/normQuantileBins-1)
	}
	// Uniform on [a, z] with mean E[X | X < z] = -phi(z) * normQuantileBins.
	z := t[0][1]
	phi := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
	t[0][0] = 2*(-phi*normQuantileBins) - z
	t[0][normQuantileBins] = -t[0][0]
	var out [2][normQuantileBins + 1]float32
	for k := 0; k <= normQuantileBins; k++ {
		out[0][k] = float32(t[0][k])
		if k < normQuantileBins {
			out[1][k] = float32(t[0][k+1] - t[0][k])
		}
	}
	return &out
})

// fillRandomNormal writes N(0, std) values: 32-bit uniform u_i, the i-th half of
// the splitmix64 stream from seed, goes through the normal quantile
// function (tabulated at 4096 quantiles, interpolated linearly). Element i
// depends only on seed and i, so chunks are generated in parallel with the
// same result.
func fillRandomNormal(v []float32, seed uint64, std float32) {
	pairs := (len(v) + 1) / 2
	const chunk = 1 << 16
	workers := min(runtime.GOMAXPROCS(0), (pairs+chunk-1)/chunk)
	if workers <= 1 {
		randomNormalPairs(v, seed, 0, pairs, std)
		return
	}
	var wg sync.WaitGroup
	per := (pairs + workers - 1) / workers
	for from := 0; from < pairs; from += per {
		wg.Add(1)
		go func(from, to int) {
			defer wg.Done()
			randomNormalPairs(v, seed, from, to, std)
		}(from, min(from+per, pairs))
	}
	wg.Wait()
}

// randomNormalPairs fills elements [2*from, 2*to) of v (as far as v goes).
func randomNormalPairs(v []float32, seed uint64, from, to int, std float32) {
	t := normQuantiles()
	q, d := &t[0], &t[1]
	const frac = 1.0 / (1 << 20)
	one := func(h uint32) float32 {
		k := h >> 20
		return std * (q[k] + float32(h&(1<<20-1))*frac*d[k])
	}
	state := seed + uint64(from)*splitmixGamma
	last := min(to, len(v)/2)
	for j := from; j < last; j++ {
		state += splitmixGamma
		x := splitmixMix(state)
		v[2*j] = one(uint32(x >> 32))
		v[2*j+1] = one(uint32(x))
	}
	if last < to { // odd length: the last element
		state += splitmixGamma
		v[2*last] = one(uint32(splitmixMix(state) >> 32))
	}
}

// Interface checks.
var (
	_ Weights        = (*RandomSource)(nil)
	_ encoder.Source = (*RandomSource)(nil)
)
