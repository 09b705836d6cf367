package models_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stTextCase is a fixture of testdata/sentence_text (made by its
// make_text_fixture.py): the sentence-transformers files of a golden
// model with a WordPiece vocabulary, the texts, and for each call of
// sentence-transformers' encode (a prompt by name or as text,
// truncate_dim, normalize_embeddings) the token ids of the prompted texts
// and the embeddings that Hugging Face's tokenizer and model followed by
// sentence-transformers' modules give.
type stTextCase struct {
	Model        string   `json:"model"`
	MaxSeqLength int      `json:"max_seq_length"`
	Texts        []string `json:"texts"`
	Calls        []struct {
		PromptName   string      `json:"prompt_name"`
		Prompt       string      `json:"prompt"`
		Dimensions   int         `json:"dimensions"`
		Normalize    bool        `json:"normalize"`
		PromptLength int         `json:"prompt_length"`
		InputIDs     [][]int32   `json:"input_ids"`
		Embeddings   [][]float64 `json:"embeddings"`
	} `json:"calls"`
	name, dir string
}

// stTextCases are the fixtures, each in a model folder of its own: the
// case's files, testdata/sentence_text/vocab.txt and the golden model's
// config.json and model.safetensors.
func stTextCases(t *testing.T) []*stTextCase {
	t.Helper()
	names, err := filepath.Glob("testdata/sentence_text/*/expected.json")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	vocab, err := os.ReadFile("testdata/sentence_text/vocab.txt")
	require.NoError(t, err)
	var cs []*stTextCase
	for _, n := range names {
		c := &stTextCase{name: filepath.Base(filepath.Dir(n))}
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, c))
		golden := shared(t, filepath.Join("golden", "models", c.Model))
		c.dir = filepath.Join(t.TempDir(), c.name)
		require.NoError(t, os.CopyFS(c.dir, os.DirFS(filepath.Dir(n))))
		require.NoError(t, os.Remove(filepath.Join(c.dir, "expected.json")))
		require.NoError(t, os.WriteFile(filepath.Join(c.dir, "vocab.txt"), vocab, 0o644))
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join(golden, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(c.dir, f), b, 0o644))
		}
		cs = append(cs, c)
	}
	return cs
}

// embedOptions is the EmbedOptions of call i: sentence-transformers'
// prompt_name, prompt, truncate_dim and normalize_embeddings.
func (c *stTextCase) embedOptions(i int) models.EmbedOptions {
	k := c.Calls[i]
	return models.EmbedOptions{PromptName: k.PromptName, Prompt: k.Prompt, Dimensions: k.Dimensions, Normalize: k.Normalize}
}

func (c *stTextCase) call(i int) string {
	k := c.Calls[i]
	return fmt.Sprintf("%s: call %d (prompt_name %q, prompt %q, dimensions %d, normalize %v)",
		c.name, i, k.PromptName, k.Prompt, k.Dimensions, k.Normalize)
}

// TestSentenceTransformersText: end to end from text, a folder of a golden
// model with a WordPiece vocabulary and sentence-transformers' files
// (every pooling mode, include_prompt false, a Dense module, Normalize,
// max_seq_length, prompts in config_sentence_transformers.json) embeds as
// sentence-transformers' encode over Hugging Face's slow tokenizer and
// model: the prompted texts tokenize to the same ids (truncated at
// max_seq_length), and Embed with the call's prompt name or prompt,
// Dimensions (truncate_dim) and Normalize (normalize_embeddings) gives the
// same vectors within 1e-5 of the largest value at FP32, and cosine 0.99
// (the INT8 gate of the golden models and of the sentence-transformers
// module fixtures) quantized at load, static and dynamic.
func TestSentenceTransformersText(t *testing.T) {
	ctx := context.Background()
	sel := encodertest.Selector(t)
	for _, c := range stTextCases(t) {
		t.Run(c.name, func(t *testing.T) {
			p, err := models.Load(ctx, c.dir, models.Options{Selector: sel})
			require.NoError(t, err)
			defer p.Close()
			assert.Equal(t, c.MaxSeqLength, p.MaxLength(), "max_seq_length")
			assert.Equal(t, "", p.Prompts()["none"])
			worst := 0.0
			for i, k := range c.Calls {
				prompt := k.Prompt
				if k.PromptName != "" {
					prompt, err = p.Prompt(k.PromptName)
					require.NoError(t, err, c.call(i))
				}
				for j, s := range c.Texts {
					seq, err := p.Encode(s, nil, models.EncodeOptions{Truncate: true, Prompt: prompt})
					require.NoError(t, err, c.call(i))
					assert.Equal(t, k.InputIDs[j], seq.IDs(), "%s: text %d: token ids", c.call(i), j)
				}
				got, err := p.Embed(ctx, c.Texts, c.embedOptions(i))
				require.NoError(t, err, c.call(i))
				worst = math.Max(worst, c.check(t, got, k.Embeddings, c.call(i)))
			}
			// An empty prompt is no prompt, include_prompt false or not, as
			// sentence-transformers 5 (before it, encode still left out the
			// CLS token: make_text_fixture.py); call 0 has no prompt.
			require.Zero(t, c.Calls[0].PromptName+c.Calls[0].Prompt)
			got, err := p.Embed(ctx, c.Texts, models.EmbedOptions{PromptName: "none"})
			require.NoError(t, err)
			c.check(t, got, c.Calls[0].Embeddings, c.name+": the empty prompt")
			t.Logf("fp32: largest difference %.3g of the largest value", worst)

			calib := append([]string(nil), c.Texts...)
			for _, s := range c.Texts {
				calib = append(calib, "query: "+s)
			}
			for _, prec := range []models.Precision{models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
				q, err := models.Load(ctx, c.dir, models.Options{Selector: sel, Precision: prec, Calib: calib})
				require.NoError(t, err, prec)
				least := 1.0
				for i, k := range c.Calls {
					got, err := q.Embed(ctx, c.Texts, c.embedOptions(i))
					require.NoError(t, err, "%s %v", c.call(i), prec)
					for j, want := range k.Embeddings {
						w := make([]float32, len(want))
						for x, v := range want {
							w[x] = float32(v)
						}
						cos := cosine(w, got[j])
						least = math.Min(least, cos)
						assert.GreaterOrEqual(t, cos, 0.99, "%s %v: text %d", c.call(i), prec, j)
					}
				}
				q.Close()
				t.Logf("%v: least cosine %.6f", prec, least)
			}
		})
	}
}

// check asserts that got are want within 1e-5 of want's largest value,
// and returns the largest such difference.
func (c *stTextCase) check(t *testing.T, got [][]float32, want [][]float64, what string) float64 {
	t.Helper()
	require.Len(t, got, len(want), what)
	worst := 0.0
	for j, w := range want {
		require.Len(t, got[j], len(w), "%s: text %d", what, j)
		var d, m float64
		for x, v := range w {
			d = math.Max(d, math.Abs(float64(got[j][x])-v))
			m = math.Max(m, math.Abs(v))
		}
		assert.LessOrEqual(t, d/m, 1e-5, "%s: text %d: max difference %.3g relative to %.3g", what, j, d, m)
		worst = math.Max(worst, d/m)
	}
	return worst
}
