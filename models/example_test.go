package models_test

import (
	"context"
	"fmt"

	"github.com/int8bert/int8bert/models"
)

// Load a sequence classifier from a folder (or a Hugging Face model id):
// its config.json says which family and head it is. Here it is quantized to INT8 at load, with
// per-token activation scales, which needs no calibration texts.
func ExampleLoad() {
	ctx := context.Background()
	p, err := models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{
		Precision: models.PrecisionInt8Dynamic,
		Threads:   1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	fmt.Println(p.Family(), p.Task(), p.Precision())
	res, err := p.Classify(ctx, []string{"a gorgeous , witty , seductive movie .", "the story is bleak and the acting is worse ."}, models.ClassifyOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		fmt.Println(r.Label)
	}
	// Output:
	// xlm-roberta ForSequenceClassification int8-dynamic
	// positive
	// negative
}

// A service warms its model up at load, so that no request pays for
// kernel tuning: every shape of up to 8 texts of 64 tokens is tuned before
// Load returns (Save then stores the choices next to an INT8 model, and a
// later Load on this CPU starts warm). The warm-up takes a while, so this
// example is compiled but not run by go test; TestLoadWarmupOption runs
// the same option on a private selector.
func ExampleLoad_warmup() {
	ctx := context.Background()
	p, err := models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{
		Precision: models.PrecisionInt8Dynamic,
		Threads:   1,
		Warmup:    &models.WarmupOptions{MaxBatch: 8, MaxLength: 64},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	res, err := p.Classify(ctx, []string{"an utterly charming film ."}, models.ClassifyOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res[0].Label)
}

// Sentence embeddings: mean of the token states, L2-normalised.
func ExamplePipeline_Embed() {
	ctx := context.Background()
	p, err := models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	vecs, err := p.Embed(ctx, []string{"a charming film"}, models.EmbedOptions{Pool: models.PoolMean, Normalize: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(vecs), len(vecs[0]))
	// Output: 1 256
}

// Every label's score, best first, as Hugging Face's text-classification
// pipeline gives it with top_k=None. The default function is the model's
// own: softmax for this two-label head, sigmoid for a multi-label or
// one-label head (a reranker, a regression: FunctionNone gives the raw
// score, also in Logits).
func ExamplePipeline_Classify() {
	ctx := context.Background()
	p, err := models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	res, err := p.Classify(ctx, []string{"a gorgeous , witty , seductive movie ."}, models.ClassifyOptions{TopK: models.TopKAll})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res[0].Function)
	for _, l := range res[0].Top {
		fmt.Println(l.Label)
	}
	// Output:
	// softmax
	// positive
	// negative
}
