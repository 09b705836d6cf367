package models

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/smoothquant"
)

// Precision is what a model runs at: the arithmetic of its linear layers.
type Precision int

// The precisions. The zero value means "as the model folder holds it" in
// Options.
const (
	PrecisionAsStored = Precision(encoder.PrecisionAsStored)
	// PrecisionFP32: float32 everywhere.
	PrecisionFP32 = Precision(encoder.PrecisionFP32)
	// PrecisionInt8Static: SmoothQuant W8A8 with calibrated per-tensor
	// activation scales, the quantize steps fused into their producers.
	PrecisionInt8Static = Precision(encoder.PrecisionInt8Static)
	// PrecisionInt8Dynamic: SmoothQuant W8A8 with per-token activation
	// scales computed at run time.
	PrecisionInt8Dynamic = Precision(encoder.PrecisionInt8Dynamic)
	// PrecisionBF16: the linear layers' weights and inputs rounded to
	// bfloat16, products accumulated in float32; embeddings, LayerNorm,
	// softmax and the heads stay FP32 (docs/DESIGN.md section 3.9). It
	// needs a CPU with AVX512-BF16 or AMX-BF16.
	PrecisionBF16 = Precision(encoder.PrecisionBF16)
)

// String is the precision's name on the command line ("as-stored",
// "fp32", "bf16", "int8-static", "int8-dynamic"); a value other than the
// five constants is "Precision(N)".
func (p Precision) String() string { return encoder.Precision(p).String() }

// Int8 reports whether p is an INT8 precision.
func (p Precision) Int8() bool { return p == PrecisionInt8Static || p == PrecisionInt8Dynamic }

// ParsePrecision reads "fp32", "bf16", "int8-static" or "int8-dynamic"
// ("static", "dynamic" and "bfloat16" are accepted too).
func ParsePrecision(s string) (Precision, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "float32", "f32":
		return PrecisionFP32, nil
	case "int8-static", "static":
		return PrecisionInt8Static, nil
	case "int8-dynamic", "dynamic":
		return PrecisionInt8Dynamic, nil
	case "bf16", "bfloat16":
		return PrecisionBF16, nil
	}
	return 0, fmt.Errorf("models: precision %q: want fp32, bf16, int8-static or int8-dynamic: %w", s, ErrConfig)
}

// ParsePrecisions reads a comma-separated list of precisions.
func ParsePrecisions(s string) ([]Precision, error) {
	var out []Precision
	for _, f := range strings.Split(s, ",") {
		p, err := ParsePrecision(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ArtifactFile is the INT8 artifact's name in a model folder: a
// safetensors file with the int8 weights, their scales, the smoothing
// vectors, every FP32 tensor the model still needs, and the recipe in its
// metadata (smoothquant.MetadataKey).
const ArtifactFile = encoder.ArtifactFile

// QuantizeOptions are SmoothQuant's settings of a quantization
// (Pipeline.Quantize, or Options.Quant at load).
type QuantizeOptions struct {
	// Options are SmoothQuant's (alpha, auto search, range, fallback);
	// Quantize sets Mode from its precision.
	smoothquant.Options
	// SampleRows is how many input rows of each linear the calibration
	// keeps for percentile ranges and the alpha search (0: 256).
	SampleRows int
	// BatchSize is the calibration batch (0: 8 texts).
	BatchSize int
	// Progress, when set, is called after each calibration batch and
	// each quantized layer.
	Progress func(stage string, done, total int)
	// Source names the quantized model in the recipe.
	Source string
	// Profile makes the INT8 pipeline count where its forward passes
	// spend their time (Pipeline.Profile).
	Profile bool
	// TempDir is the folder the artifact is written to, a tensor at a
	// time, while it is made ("": os.TempDir()); the file is removed at
	// once and read through a mapping (encoder.QuantizeOptions.TempDir).
	TempDir string
	// Consume says that the caller closes the FP32 pipeline as soon as
	// Quantize (or QuantizeInputs) returns, as Load does when it
	// quantizes: its linears are released once the calibration has run,
	// so that their packed weights are not held beside the quantization
	// and the INT8 model (encoder.QuantizeOptions.Consume). The FP32
	// pipeline is then good for Close only, whatever Quantize returns.
	Consume bool
}

// check reports a quantization option outside its domain, naming the
// value and the domain (smoothquant.Options.Validate and
// encoder.QuantizeOptions.Check), whether or not a quantization uses it.
func (q *QuantizeOptions) check() error {
	if q.BatchSize < 0 {
		return fmt.Errorf("models: quantize options: BatchSize %d: want 0 (8 texts) or a positive number of texts: %w", q.BatchSize, ErrConfig)
	}
	eo := q.engine()
	if err := eo.Check(); err != nil {
		return err
	}
	if err := q.Options.Validate(); err != nil {
		// smoothquant's own message, under both sentinels.
		msg := strings.TrimSuffix(err.Error(), ": "+smoothquant.ErrInvalid.Error())
		return &encoder.Error{Msg: "models: quantize " + strings.TrimPrefix(msg, "smoothquant: "), Errs: []error{ErrConfig, err}}
	}
	return nil
}

// engine is q as the encoder's quantization takes it.
func (q *QuantizeOptions) engine() encoder.QuantizeOptions {
	eo := encoder.QuantizeOptions{Options: q.Options, SampleRows: q.SampleRows, Progress: q.Progress, Source: q.Source, TempDir: q.TempDir}
	if q.Profile {
		eo.Profile = &encoder.Profile{}
	}
	return eo
}

// Quantize calibrates the FP32 pipeline's model on texts and returns an
// INT8 pipeline at precision prec with the same tokenizer and MaxLength:
// it quantizes the four linears of every layer with package smoothquant
// and builds the INT8 model from the resulting artifact, the same way
// Load builds it from a saved ArtifactFile, so a saved model runs bit for
// bit as the one just quantized. Empty or NaN-producing texts are errors.
// Options.Precision quantizes at load instead.
func (p *Pipeline) Quantize(ctx context.Context, texts []string, prec Precision, o QuantizeOptions) (*Pipeline, error) {
	if err := p.refuseClosed("Quantize"); err != nil {
		return nil, err
	}
	return p.quantize(ctx, texts, nil, prec, o, false)
}

// QuantizeInputs is Quantize calibrated on token batches rather than
// texts (a model without a tokenizer, or random inputs of a benchmark).
func (p *Pipeline) QuantizeInputs(ctx context.Context, batches []*Inputs, prec Precision, o QuantizeOptions) (*Pipeline, error) {
	if err := p.refuseClosed("QuantizeInputs"); err != nil {
		return nil, err
	}
	return p.quantize(ctx, nil, batches, prec, o, false)
}

// quantize is Quantize on texts, then the token batches extra. consume
// says that the caller closes p as soon as it returns (Load): p's linears
// are released after the calibration (encoder.QuantizeOptions.Consume).
func (p *Pipeline) quantize(ctx context.Context, texts []string, extra []*Inputs, prec Precision, o QuantizeOptions, consume bool) (*Pipeline, error) {
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if err := o.check(); err != nil {
		return nil, err
	}
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("models: calibration text %d is empty: %w", i+1, ErrInput)
		}
	}
	batches, err := p.calibBatches(ctx, texts, o.BatchSize)
	if err != nil {
		return nil, err
	}
	for _, in := range extra {
		batches = append(batches, in.engine())
	}
	eo := o.engine()
	eo.Consume = consume || o.Consume
	eo.CalibTexts = len(texts)
	if len(texts) > 0 {
		eo.CalibHash = smoothquant.HashTexts(texts)
	}
	q, err := p.m.Quantize(ctx, batches, encoder.Precision(prec), eo)
	if err != nil {
		return nil, err
	}
	return &Pipeline{m: q, Tok: p.Tok, maxLength: p.maxLength, maxBatchTokens: p.maxBatchTokens, prof: eo.Profile,
		prompts: p.prompts, st: p.st}, nil
}

// calibBatches tokenizes texts (truncated to MaxLength) into padded
// batches of batch texts, longest first so that padding stays small.
func (p *Pipeline) calibBatches(ctx context.Context, texts []string, batch int) ([]*encoder.Inputs, error) {
	if batch <= 0 {
		batch = 8
	}
	if len(texts) == 0 {
		return nil, nil
	}
	seqs, err := p.encodeTexts(ctx, "calibration texts", texts)
	if err != nil {
		return nil, err
	}
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]].IDs) > len(seqs[order[b]].IDs) })
	var out []*encoder.Inputs
	for i := 0; i < len(order); i += batch {
		idx := order[i:min(i+batch, len(order))]
		seq := len(seqs[idx[0]].IDs)
		n := len(idx) * seq
		var types []int32
		if p.m.Encoder.Config().TypeVocab > 0 {
			types = make([]int32, n)
		}
		out = append(out, p.padInputs(seqs, idx, seq, make([]int32, n), make([]int32, n), types))
	}
	return out, nil
}

// padInputs pads the sequences idx of seqs to the longest of them, seq
// tokens, into padded model inputs (calibration's batches): the
// tokenizer's padding id, mask 0 and token type 0 after each sequence's
// end. The inputs are views of ids, mask and types (nil: the model has no
// token types), each at least len(idx) x seq long, which it overwrites.
func (p *Pipeline) padInputs(seqs []encoder.Tokens, idx []int, seq int, ids, mask, types []int32) *encoder.Inputs {
	n := len(idx) * seq
	pad := int32(0)
	if p.Tok != nil {
		if sp := p.Tok.Special(); sp.PAD >= 0 {
			pad = sp.PAD
		}
	}
	in := &encoder.Inputs{Batch: len(idx), Seq: seq, IDs: ids[:n:n], Mask: mask[:n:n]}
	clear(in.Mask)
	if types != nil {
		in.TypeIDs = types[:n:n]
		clear(in.TypeIDs)
	}
	for r, i := range idx {
		s := seqs[i]
		ids, mask := in.IDs[r*seq:(r+1)*seq], in.Mask[r*seq:(r+1)*seq]
		k := copy(ids, s.IDs)
		for j := k; j < seq; j++ {
			ids[j] = pad
		}
		if s.Mask != nil {
			copy(mask, s.Mask)
		} else {
			for j := 0; j < k; j++ {
				mask[j] = 1
			}
		}
		if in.TypeIDs != nil && s.Types != nil {
			copy(in.TypeIDs[r*seq:(r+1)*seq], s.Types)
		}
	}
	return in
}

// Save writes an INT8 pipeline to dir as a model folder that Load opens
// without recalibration: the artifact (ArtifactFile), config.json and the
// tokenizer files of the folder the FP32 model came from, and the tuning
// record of the model's keys (TuningRecordFile) that its selector has
// tuned, so that Load on this CPU and build starts warm; and the
// folder's sentence-transformers files (modules.json and its modules,
// sentence_bert_config.json, config_sentence_transformers.json).
func (p *Pipeline) Save(dir string) error {
	if err := p.refuseClosed("Save"); err != nil {
		return err
	}
	if err := p.m.Save(dir); err != nil {
		return err
	}
	return saveSentence(p.m.Dir(), dir)
}
