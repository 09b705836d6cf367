package tokenizer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
// tokens/s (special tokens not counted).
func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"bert-base-uncased", "xlmr-spm-unigram"} {
		b.Run(name, func(b *testing.B) {
			tk := testTokenizer(b, name)
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
