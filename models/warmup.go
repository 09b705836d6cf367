package models

import (
	"context"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/selector"
)

// TuningRecordFile is the tuning record next to a model's weights (a
// selector cache file, selector.CacheFileName): Save writes the choices of
// the model's keys there, and Load hands it to the selector, so that a
// folder shipped with its record starts warm on the CPU and build that
// tuned it (docs/DESIGN.md section 4.8).
const TuningRecordFile = encoder.TuningRecordFile

// WarmupOptions bound the shapes Warmup tunes: the largest batch, length
// and token count whose GEMM shapes it tunes before the first request.
type WarmupOptions struct {
	// MaxBatch is the most sequences of one forward pass (0 means 1).
	MaxBatch int
	// MaxLength is the longest sequence in tokens (0 means the pipeline's
	// MaxLength).
	MaxLength int
	// MaxTokens bounds batch x length of one pass, as a micro-batcher's
	// token budget does (0 means MaxBatch x MaxLength, at most the
	// pipeline's MaxBatchTokens).
	MaxTokens int
	// Progress, when set, is called after each key with the count done,
	// the total and the key's choice.
	Progress func(done, total int, ch selector.Choice)
}

// warmupBounds is o with the pipeline's defaults, as the encoder's warm-up
// takes it: MaxLength 0 is the pipeline's MaxLength, and MaxTokens 0 the
// pipeline's token budget (MaxBatchTokens) where that is less than
// MaxBatch x MaxLength: the pipeline's passes never exceed it.
func (p *Pipeline) warmupBounds(o WarmupOptions) encoder.WarmupOptions {
	if o.MaxLength == 0 {
		o.MaxLength = p.maxLength
	}
	if o.MaxTokens == 0 && o.MaxBatch >= 0 && o.MaxLength > 0 {
		o.MaxTokens = min(max(o.MaxBatch, 1)*o.MaxLength, max(p.maxBatchTokens, o.MaxLength))
	}
	return encoder.WarmupOptions{MaxBatch: o.MaxBatch, MaxLength: o.MaxLength, MaxTokens: o.MaxTokens, Progress: o.Progress}
}

// Warmup tunes, on the model's selector, every GEMM key (linears,
// attention's products, the head) that a forward pass of the pipeline
// meets for batches of up to o.MaxBatch sequences of up to o.MaxLength
// tokens, and packs each linear's weights for the kernel its keys chose,
// so that no call within those bounds waits for a tuning or a packing
// (docs/DESIGN.md section 4.8). Keys already tuned, or in the cache or the
// model's tuning record, cost no tuning. ctx stops it between runs of a
// tuning, returning ctx.Err() wrapped (what was tuned stays). The model
// then keeps one set of pass buffers for o.MaxTokens tokens until it
// closes.
func (p *Pipeline) Warmup(ctx context.Context, o WarmupOptions) error {
	if err := p.refuseClosed("Warmup"); err != nil {
		return err
	}
	return p.m.Warmup(ctx, p.warmupBounds(o))
}

// precheckDefaults queues, on a selector that tunes in the background,
// the quick checks of the default kernels of every key a pass of one
// sequence of any length meets (selector.Precheck): the checks are per
// operation, K, N and epilogue, which batches share, so a call of a new
// length (a new class of attention's products) finds its defaults checked
// instead of checking them itself (docs/DESIGN.md section 4.12).
func (p *Pipeline) precheckDefaults() {
	sel := p.m.Encoder.Selector()
	if sel.Tuning() != selector.TuneBackground {
		return
	}
	keys, err := p.m.WarmupKeys(p.warmupBounds(WarmupOptions{MaxBatch: 1}))
	if err != nil {
		return // the calls check their defaults themselves, as without it
	}
	sel.Precheck(keys)
}

// WarmupKeys lists the keys Warmup tunes with o, smallest M first.
func (p *Pipeline) WarmupKeys(o WarmupOptions) ([]selector.Key, error) {
	if err := p.refuseClosed("WarmupKeys"); err != nil {
		return nil, err
	}
	return p.m.WarmupKeys(p.warmupBounds(o))
}

// SaveTuningRecord writes the tuning record of the model into dir: the
// choices of its keys its selector holds, as the section of this binary,
// next to the sections of other builds and CPUs that dir's record (or the
// record of the folder the model came from) already holds. Save calls it;
// `int8bert tune --model DIR` calls it after a warm-up. A model without
// any tuned key leaves dir's record as it is.
func (p *Pipeline) SaveTuningRecord(dir string) error {
	if err := p.refuseClosed("SaveTuningRecord"); err != nil {
		return err
	}
	return p.m.SaveTuningRecord(dir)
}
