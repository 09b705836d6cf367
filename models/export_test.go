package models

import "github.com/int8bert/int8bert/models/encoder"

// Engine is p's model on the engine, for the tests that check the engine
// under a pipeline (lifecycle, quantization, warm-up).
func Engine(p *Pipeline) *encoder.TaskModel { return p.m }

// WithEngine is a pipeline without a tokenizer over m, for the tests of
// the post-processing on a model built in memory.
func WithEngine(m *encoder.TaskModel) *Pipeline {
	return &Pipeline{m: m, st: defaultSentence(m.Family)}
}

// SequenceOf is a sequence of token ids (types nil: all 0), for the tests
// of Run on a model folder without a tokenizer.
func SequenceOf(ids, types []int32) Sequence {
	return Sequence{t: encoder.Tokens{IDs: ids, Types: types}}
}

// PyLower is pyLower, for its test.
var PyLower = pyLower

// PromptEmbedding is Batch.Embedding with the model's own pooling of a
// text after a prompt of prompt tokens (sentence-transformers'
// prompt_length), for the test of include_prompt.
func PromptEmbedding(b *Batch, r, prompt int, normalize bool) ([]float32, error) {
	pool, err := b.p.pooling(PoolDefault)
	if err != nil {
		return nil, err
	}
	return b.p.embedRow(b.out.Output, r, b.in.Mask, pool, prompt, true, normalize), nil
}

// TokenStates are row r's last hidden states, one slice per token, for
// tests that pool them by hand.
func TokenStates(b *Batch, r int) [][]float32 {
	o := b.out.Output
	start, end := o.Rows(r)
	var s [][]float32
	for i := start; i < end; i++ {
		s = append(s, o.Last[i*o.Hidden:(i+1)*o.Hidden])
	}
	return s
}
