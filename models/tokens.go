package models

import "fmt"

// TokenEmbeddings is row r's last hidden state at each of its tokens,
// special tokens included, in order: [tokens][Hidden] new slices, what
// TEI's /embed_all answers (no pooling, no normalisation).
func (b *Batch) TokenEmbeddings(r int) ([][]float32, error) {
	if r < 0 || r >= len(b.idx) {
		return nil, fmt.Errorf("models: batch row %d of %d: %w", r, len(b.idx), ErrInput)
	}
	o := b.out.Output
	h := o.Hidden
	start, end := o.Rows(r)
	out := make([][]float32, 0, end-start)
	for i := start; i < end; i++ {
		if b.in.Mask != nil && b.in.Mask[i] == 0 {
			continue // padding, in a padded layout
		}
		out = append(out, append([]float32(nil), o.Last[i*h:(i+1)*h]...))
	}
	return out, nil
}
