package encodertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/stretchr/testify/require"
)

// WordFolder is a model folder for a tiny golden checkpoint of 1000 ids
// (../shared/golden): dir's config.json and model.safetensors, hard-linked
// or copied (LinkFile),
// and a tokenizer whose word "wN" is id N. XLM-R layout (xlmr: <s> 0,
// <pad> 1, </s> 2, <unk> 3, a tokenizer.json) or BERT's (a vocab.txt
// with [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103). So a test
// can give such a model texts: "w5 w17" is ids 5 and 17.
func WordFolder(tb testing.TB, dir string, xlmr bool) string {
	tb.Helper()
	out := tb.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		LinkFile(tb, filepath.Join(dir, f), filepath.Join(out, f))
	}
	if xlmr {
		vocab := map[string]int32{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
		for i := int32(4); i < 1000; i++ {
			vocab[fmt.Sprintf("w%d", i)] = i
		}
		var added []map[string]any
		for _, s := range []string{"<s>", "<pad>", "</s>", "<unk>"} {
			added = append(added, map[string]any{"id": vocab[s], "content": s, "special": true})
		}
		js, err := json.Marshal(map[string]any{
			"added_tokens":   added,
			"normalizer":     nil,
			"pre_tokenizer":  map[string]any{"type": "WhitespaceSplit"},
			"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 2}, "cls": []any{"<s>", 0}},
			"model":          map[string]any{"type": "WordPiece", "vocab": vocab, "unk_token": "<unk>"},
		})
		require.NoError(tb, err)
		require.NoError(tb, os.WriteFile(filepath.Join(out, "tokenizer.json"), js, 0o644))
		return out
	}
	special := map[int]string{0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"}
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		s, ok := special[i]
		if !ok {
			s = fmt.Sprintf("w%d", i)
		}
		b.WriteString(s + "\n")
	}
	require.NoError(tb, os.WriteFile(filepath.Join(out, "vocab.txt"), []byte(b.String()), 0o644))
	return out
}

// LoadAs opens the model folder dir with models.Load and checks that it
// loads as family fam (models.Load reads the family from config.json).
func LoadAs(dir string, fam *encoder.Family, o models.Options) (*models.Pipeline, error) {
	p, err := models.Load(context.Background(), dir, o)
	if err != nil {
		return nil, err
	}
	if p.Family() != fam.Name {
		p.Close()
		return nil, fmt.Errorf("encodertest: %s loads as %s, not %s", dir, p.Family(), fam.Name)
	}
	return p, nil
}

// Words is the text of the ids lo to hi-1 of a WordFolder's tokenizer:
// "wlo w(lo+1) ... w(hi-1)".
func Words(lo, hi int) string {
	w := make([]string, 0, max(hi-lo, 0))
	for i := lo; i < hi; i++ {
		w = append(w, fmt.Sprintf("w%d", i))
	}
	return strings.Join(w, " ")
}

// LinkFile puts the file src at dst as a hard link, or a copy where src
// is on another file system: not as a symlink, which a model folder may
// not hold when it points outside the folder (models.Options.AllowSymlinksOutside).
func LinkFile(tb testing.TB, src, dst string) {
	tb.Helper()
	if os.Link(src, dst) == nil {
		return
	}
	b, err := os.ReadFile(src)
	require.NoError(tb, err)
	require.NoError(tb, os.WriteFile(dst, b, 0o644))
}
