package tokenizer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// benchSentences returns the golden inputs (single texts and both halves of pairs).
func benchSentences(b *testing.B) []string {
	var texts []string
	for _, c := range loadGolden(b, "bert-base-uncased") {
		texts = append(texts, c.Text)
		if c.TextPair != nil {
			texts = append(texts, *c.TextPair)
		}
	}
	return texts
}

// BenchmarkEncode encodes the golden sentences on one goroutine and reports
// tokens/s (special tokens not counted): WordPiece (bert-base-uncased),
// Unigram (xlmr-spm-unigram) and byte-level BPE (roberta-base).
func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"bert-base-uncased", "xlmr-spm-unigram", "roberta-base"} {
		b.Run(name, func(b *testing.B) {
			var tk *Tokenizer
			if name == "roberta-base" {
				tk = robertaTokenizer(b)
			} else {
				tk = testTokenizer(b, name)
			}
			texts := benchSentences(b)
			opts := Options{SkipSpecialTokens: true}
			tokens := 0
			b.ResetTimer()
			for b.Loop() {
				for _, s := range texts {
					enc, err := tk.Encode(s, opts)
					if err != nil {
						b.Fatal(err)
					}
					tokens += len(enc.IDs)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkEncodeBatch encodes the golden sentences as one batch on all CPUs.
func BenchmarkEncodeBatch(b *testing.B) {
	tk := testTokenizer(b, "bert-base-uncased")
	texts := benchSentences(b)
	tokens := 0
	for b.Loop() {
		encs, err := tk.EncodeBatch(context.Background(), texts, Options{SkipSpecialTokens: true})
		if err != nil {
			b.Fatal(err)
		}
		for i := range encs {
			tokens += len(encs[i].IDs)
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkLoad measures reading bert-base-uncased's tokenizer.json.
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "bert-base-uncased", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := FromJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

// sst2Sentences returns the first n sentences of SST-2's train.tsv in the
// project's shared folder ($INT8BERT_SHARED, else ../../shared), skipping
// the benchmark when it is absent.
func sst2Sentences(b *testing.B, n int) []string {
	dir := os.Getenv("INT8BERT_SHARED")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared")
	}
	path := filepath.Join(dir, "data", "sst2", "train.tsv")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Skipf("%s not found (the project's shared folder; set INT8BERT_SHARED): %v", path, err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		text, _, ok := strings.Cut(line, "\t")
		if !ok || line == "sentence\tlabel" {
			continue
		}
		if out = append(out, strings.TrimSpace(text)); len(out) == n {
			break
		}
	}
	return out
}

// BenchmarkEncodeBatchSST2 encodes 1,024 SST-2 sentences (about 13 tokens
// each) as one batch, truncated as a Pipeline does, and reports what a
// sentence (a pair for the pairs) costs: time, bytes allocated and
// allocations, which are the garbage a service's GC has to keep up with
// once the Encodings are dropped; -inputs-only with Options.InputsOnly.
func BenchmarkEncodeBatchSST2(b *testing.B) {
	texts := sst2Sentences(b, 1024)
	pairs := make([]Pair, len(texts)/2)
	for i := range pairs {
		pairs[i] = Pair{texts[2*i], texts[2*i+1]}
	}
	o := Options{MaxLength: 128, Truncation: LongestFirst}
	lean := o
	lean.InputsOnly = true
	ctx := context.Background()
	for _, c := range []struct {
		name, tok string
		n         int
		run       func(tk *Tokenizer) error
	}{
		{"bert", "bert-base-uncased", len(texts), func(tk *Tokenizer) error {
			_, err := tk.EncodeBatch(ctx, texts, o)
			return err
		}},
		{"bert-pairs", "bert-base-uncased", len(pairs), func(tk *Tokenizer) error {
			_, err := tk.EncodePairBatch(ctx, pairs, o)
			return err
		}},
		{"xlmr", "xlmr-spm-unigram", len(texts), func(tk *Tokenizer) error {
			_, err := tk.EncodeBatch(ctx, texts, o)
			return err
		}},
		{"bert-inputs-only", "bert-base-uncased", len(texts), func(tk *Tokenizer) error {
			_, err := tk.EncodeBatch(ctx, texts, lean)
			return err
		}},
		{"bert-pairs-inputs-only", "bert-base-uncased", len(pairs), func(tk *Tokenizer) error {
			_, err := tk.EncodePairBatch(ctx, pairs, lean)
			return err
		}},
		{"xlmr-inputs-only", "xlmr-spm-unigram", len(texts), func(tk *Tokenizer) error {
			_, err := tk.EncodeBatch(ctx, texts, lean)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tk := testTokenizer(b, c.tok)
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if err := c.run(tk); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			n := float64(b.N * c.n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/sentence")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/sentence")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/sentence")
		})
	}
}
