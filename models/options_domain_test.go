package models_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// TestNegativeOptionsRefused: a negative count in a call's options is an
// error wrapping ErrInput that names the field (QAOptions.NBest -1 used
// to be taken as the default while ClassifyOptions.TopK -1 was refused),
// and the message ends with what to give instead, not a category suffix.
func TestNegativeOptionsRefused(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	qa, err := encodertest.LoadAs(goldenFolder(t, "bert-qa"), bert.Family, models.Options{Selector: sel})
	require.NoError(t, err)
	defer qa.Close()
	cls, err := encodertest.LoadAs(goldenFolder(t, "bert-seqcls"), bert.Family, models.Options{Selector: sel})
	require.NoError(t, err)
	defer cls.Close()
	for _, c := range []struct {
		name, field string
		call        func() error
	}{
		{"QAOptions.NBest", "NBest -1", func() error { _, err := qa.Answer(ctx, "w5", "w6 w7", models.QAOptions{NBest: -1}); return err }},
		{"QAOptions.MaxAnswerLength", "MaxAnswerLength -2", func() error {
			_, err := qa.Answer(ctx, "w5", "w6 w7", models.QAOptions{MaxAnswerLength: -2})
			return err
		}},
		{"QAOptions.DocStride", "DocStride -3", func() error { _, err := qa.Answer(ctx, "w5", "w6 w7", models.QAOptions{DocStride: -3}); return err }},
		{"ClassifyOptions.TopK", "top_k -1", func() error { _, err := cls.Classify(ctx, lifeTexts, models.ClassifyOptions{TopK: -1}); return err }},
	} {
		err := c.call()
		require.ErrorIs(t, err, models.ErrInput, c.name)
		assert.Contains(t, err.Error(), c.field, c.name)
	}
	for _, o := range []models.QAOptions{{}, {NBest: 2, MaxAnswerLength: 5, DocStride: 1}} {
		_, err := qa.Answer(ctx, "w5", "w6 w7", o)
		require.NoError(t, err, "%+v", o)
	}
}
