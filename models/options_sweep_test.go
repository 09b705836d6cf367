package models_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/smoothquant"
)

// sweepRule says which values of one option field are invalid, beyond
// what its kind gives (sweepValues), and why a field with no invalid
// value has none.
type sweepRule struct {
	// bad are further invalid values.
	bad []any
	// valid are values the kind's generic invalid ones would include but
	// that the field takes, with why in the rule's comment.
	valid []any
	// none: every value of the field is valid (the reason is the
	// comment); no generic value is tried.
	none bool
	// names are the words the error must contain (any of them; default:
	// the field's name, as is or in snake_case).
	names []string
}

// sweepRules are the option fields' rules by "Type.Field". A field of a
// kind with no generic invalid value (a string, a slice of strings) must
// have one, so that a new field is classified when it is added.
var sweepRules = map[string]sweepRule{
	// Any text is a prompt.
	"ClassifyOptions.Prompt": {none: true},
	"EmbedOptions.Prompt":    {none: true},
	"EncodeOptions.Prompt":   {none: true},
	"SparseOptions.Prompt":   {none: true},
	// A prompt name the model does not declare is refused.
	"EmbedOptions.PromptName":  {bad: []any{"no-such-prompt"}, names: []string{"no-such-prompt"}},
	"SparseOptions.PromptName": {bad: []any{"no-such-prompt"}, names: []string{"no-such-prompt"}},
	// Targets and labels are texts; an empty one is refused.
	"FillMaskOptions.Targets":            {bad: []any{[]string{""}}, names: []string{"target"}},
	"ZeroShotOptions.CandidateLabels":    {bad: []any{[]string{}, []string{""}}, names: []string{"label"}},
	"ZeroShotOptions.HypothesisTemplate": {bad: []any{"no placeholder"}, names: []string{"template"}},
	"TokenClassifyOptions.IgnoreLabels":  {none: true}, // a label the model lacks ignores nothing, as in Hugging Face's pipeline
	// Where no file can be made in it, the artifact is encoded in
	// memory instead, the same bytes (documented; TestQuantizeArtifactStreamed).
	"QuantizeOptions.TempDir":              {none: true},
	"QuantizeOptions.Source":               {none: true}, // a note recorded in the recipe
	"QuantizeOptions.Options.Range":        {bad: []any{"median"}, names: []string{"range"}},
	"QuantizeOptions.Options.FallbackSQNR": {valid: []any{-1.0}, names: []string{"sqnr"}}, // dB: a negative threshold keeps every linear in INT8
	"QuantizeOptions.Options.Mode":         {names: []string{"mode"}},
	"QuantizeOptions.Options.Alpha":        {bad: []any{1.5}},
	"QuantizeOptions.Options.Percentile":   {bad: []any{101.0, 50.0}},
	"QuantizeOptions.Options.Grid":         {names: []string{"grid"}},
	"QAOptions.DocStride":                  {bad: []any{1 << 30}},
	"ClassifyOptions.TopK":                 {names: []string{"top_k"}},
	"ClassifyOptions.FunctionToApply":      {names: []string{"function"}},
	// 99 is a set of modes with splade, a valid value Embed refuses
	// with ErrConfig (no masked-LM head); 1<<20 is no mode.
	"EmbedOptions.Pool":                        {valid: []any{models.Pooling(99)}, bad: []any{models.Pooling(1 << 20)}, names: []string{"pool"}},
	"TokenClassifyOptions.AggregationStrategy": {names: []string{"aggregation"}},
	// A revision picks a version of a hub id; a local folder has one,
	// and transformers' from_pretrained ignores it there as Load does.
	"Options.Revision": {none: true},
	// Calibration with nothing to quantize is refused (ErrConfig).
	"Options.Calib":        {bad: []any{[]string{"a text"}}, names: []string{"calib"}},
	"Options.CalibInputs":  {bad: []any{[]*models.Inputs{{Batch: 1, Seq: 2, IDs: []int32{101, 102}, Mask: []int32{1, 1}}}}, names: []string{"calib"}},
	"Options.Precision":    {names: []string{"precision"}},
	"Options.Attention":    {names: []string{"attention"}},
	"FillMaskOptions.TopK": {names: []string{"top_k"}},
}

// sweepNested are the struct fields whose own fields are swept, under
// their type's rules, as part of the struct holding them.
var sweepNested = map[string]bool{"Options.Quant": true}

// sweepValues are the invalid values of a field by its kind: a negative
// count, NaN, infinities and a negative float, an unknown enum value (a
// named integer type), a grid holding one of those; plus the rule's.
func sweepValues(key string, f reflect.StructField) ([]any, bool) {
	r := sweepRules[key]
	if r.none {
		return nil, true
	}
	var vals []any
	t := f.Type
	switch {
	case t.Kind() == reflect.Int && t.PkgPath() == "":
		vals = []any{-1, math.MinInt32}
	case t.Kind() == reflect.Int:
		// An enum: a value past its names, and a negative one.
		vals = []any{reflect.ValueOf(99).Convert(t).Interface(), reflect.ValueOf(-1).Convert(t).Interface()}
	case t.Kind() == reflect.Float64:
		vals = []any{math.NaN(), math.Inf(1), math.Inf(-1), -1.0}
	case t == reflect.TypeOf([]float64(nil)):
		vals = []any{[]float64{}, []float64{math.NaN()}, []float64{math.Inf(1)}, []float64{-1}, []float64{0.5, 2}}
	case t.Kind() == reflect.Bool, t.Kind() == reflect.Func, t.Kind() == reflect.Pointer:
		return nil, true // every value is valid (nil: the default)
	default:
		if len(r.bad) == 0 {
			return nil, false
		}
	}
	kept := vals[:0]
	for _, v := range vals {
		ok := false
		for _, w := range r.valid {
			if reflect.DeepEqual(v, w) {
				ok = true
			}
		}
		if !ok {
			kept = append(kept, v)
		}
	}
	return append(kept, r.bad...), true
}

// snake is FieldName as field_name.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

// sweep sets each field of the options struct zero (a valid value, the
// defaults) in turn to each invalid value and calls call: each must
// return an error wrapping one of sentinels that names the field, and
// no panic.
func sweep(t *testing.T, zero any, call func(o any) error, sentinels ...error) {
	t.Helper()
	require.NoError(t, call(zero), "%T's zero value is valid", zero)
	var walk func(prefix string, typ reflect.Type, path []int)
	walk = func(prefix string, typ reflect.Type, path []int) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			key := prefix + "." + f.Name
			idx := append(append([]int(nil), path...), i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(key, f.Type, idx)
				continue
			}
			if f.Type.Kind() == reflect.Struct && sweepNested[key] {
				// An options struct inside another (Options.Quant): its
				// fields keep their own type's rules.
				walk(f.Type.Name(), f.Type, idx)
				continue
			}
			vals, ok := sweepValues(key, f)
			if !ok {
				t.Errorf("%s (%s): no rule says which values are invalid: add one to sweepRules", key, f.Type)
				continue
			}
			for _, v := range vals {
				o := reflect.New(reflect.TypeOf(zero)).Elem()
				o.FieldByIndex(idx).Set(reflect.ValueOf(v).Convert(f.Type))
				err := func() (err error) {
					defer func() {
						if p := recover(); p != nil {
							err = fmt.Errorf("panic: %v", p)
						}
					}()
					return call(o.Interface())
				}()
				if !assert.Error(t, err, "%s = %v: accepted", key, v) {
					continue
				}
				assert.False(t, strings.HasPrefix(err.Error(), "panic: "), "%s = %v: %v", key, v, err)
				hit := false
				for _, s := range sentinels {
					hit = hit || errors.Is(err, s)
				}
				assert.True(t, hit, "%s = %v: %v does not wrap %v", key, v, err, sentinels)
				names := sweepRules[key].names
				if len(names) == 0 {
					names = []string{strings.ToLower(f.Name), snake(f.Name), strings.ReplaceAll(snake(f.Name), "_", " ")}
				}
				msg, named := strings.ToLower(err.Error()), false
				for _, n := range names {
					named = named || strings.Contains(msg, strings.ToLower(n))
				}
				assert.True(t, named, "%s = %v: the error does not name the field (%v): %v", key, v, names, err)
			}
		}
	}
	walk(reflect.TypeOf(zero).Name(), reflect.TypeOf(zero), nil)
}

// TestEveryOptionRefusesInvalidValues: every field of every call's
// options struct, set to each invalid value of its kind (a negative
// count, NaN, ±Inf, an unknown enum, an empty or out-of-range grid, a
// prompt name the model lacks, ...), is refused with an error wrapping
// the package's sentinel that names the field, never a panic nor a
// silent default. A field added without a rule for its kind fails.
func TestEveryOptionRefusesInvalidValues(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	load := func(dir string) *models.Pipeline {
		p, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1})
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		return p
	}
	nli := load(filepath.Join("testdata", "tasks", "xlmr-nli"))
	nerDir, _ := readNERGolden(t, "bert-ner")
	ner := load(nerDir)
	mlmDir, _, _ := readMLMGolden(t, "bert-mlm")
	mlm := load(mlmDir)
	texts := []string{"a fine film", "a dull one"}

	t.Run("ClassifyOptions", func(t *testing.T) {
		sweep(t, models.ClassifyOptions{}, func(o any) error {
			_, err := nli.Classify(ctx, texts, o.(models.ClassifyOptions))
			return err
		}, models.ErrInput)
	})
	t.Run("EmbedOptions", func(t *testing.T) {
		sweep(t, models.EmbedOptions{}, func(o any) error {
			_, err := nli.Embed(ctx, texts, o.(models.EmbedOptions))
			return err
		}, models.ErrInput)
	})
	t.Run("EncodeOptions", func(t *testing.T) {
		sweep(t, models.EncodeOptions{}, func(o any) error {
			_, err := nli.Encode(texts[0], nil, o.(models.EncodeOptions))
			return err
		}, models.ErrInput)
	})
	t.Run("ZeroShotOptions", func(t *testing.T) {
		sweep(t, models.ZeroShotOptions{CandidateLabels: []string{"good", "bad"}}, func(o any) error {
			z := o.(models.ZeroShotOptions)
			if z.CandidateLabels == nil {
				z.CandidateLabels = []string{"good", "bad"}
			}
			_, err := nli.ZeroShot(ctx, texts, z)
			return err
		}, models.ErrInput)
	})
	t.Run("TokenClassifyOptions", func(t *testing.T) {
		sweep(t, models.TokenClassifyOptions{}, func(o any) error {
			_, err := ner.TokenClassify(ctx, texts, o.(models.TokenClassifyOptions))
			return err
		}, models.ErrInput)
	})
	t.Run("FillMaskOptions", func(t *testing.T) {
		sweep(t, models.FillMaskOptions{}, func(o any) error {
			_, err := mlm.FillMask(ctx, []string{"a [MASK] film"}, o.(models.FillMaskOptions))
			return err
		}, models.ErrInput)
	})
	t.Run("SparseOptions", func(t *testing.T) {
		sweep(t, models.SparseOptions{}, func(o any) error {
			_, err := mlm.EmbedSparse(ctx, texts, o.(models.SparseOptions))
			return err
		}, models.ErrInput)
	})
	t.Run("WarmupOptions", func(t *testing.T) {
		sweep(t, models.WarmupOptions{MaxBatch: 1, MaxLength: 8}, func(o any) error {
			w := o.(models.WarmupOptions)
			// The zero value warms every shape up to the model's limit;
			// keep the valid calls small.
			if w.MaxBatch == 0 && w.MaxLength == 0 && w.MaxTokens == 0 {
				w.MaxBatch, w.MaxLength = 1, 8
			}
			return nli.Warmup(ctx, w)
		}, models.ErrConfig)
	})
	t.Run("QuantizeOptions", func(t *testing.T) {
		sweep(t, models.QuantizeOptions{}, func(o any) error {
			q, err := nli.Quantize(ctx, texts, models.PrecisionInt8Static, o.(models.QuantizeOptions))
			if err == nil {
				q.Close()
			}
			return err
		}, models.ErrConfig, smoothquant.ErrInvalid)
	})
	t.Run("InstanceOptions", func(t *testing.T) {
		sweep(t, models.InstanceOptions{}, func(o any) error {
			_, err := models.NewInstances(o.(models.InstanceOptions))
			return err
		}, models.ErrConfig)
	})
	t.Run("QAOptions", func(t *testing.T) {
		qa, err := encodertest.LoadAs(goldenFolder(t, "bert-qa"), bert.Family, models.Options{Selector: sel})
		require.NoError(t, err)
		defer qa.Close()
		sweep(t, models.QAOptions{}, func(o any) error {
			_, err := qa.Answer(ctx, "w5", "w6 w7", o.(models.QAOptions))
			return err
		}, models.ErrInput)
	})
}

// TestLoadOptionsRefuseInvalidValues is the sweep of models.Load's own
// options (Options, with its QuantizeOptions): every invalid value is
// refused naming the field, never loaded with a default in its place.
func TestLoadOptionsRefuseInvalidValues(t *testing.T) {
	sel := encodertest.Selector(t)
	dir := goldenFolder(t, "bert-base")
	sweep(t, models.Options{}, func(o any) error {
		lo := o.(models.Options)
		lo.Selector = sel // the zero value's process-wide selector would write the user's tuning cache
		p, err := models.Load(context.Background(), dir, lo)
		if err == nil {
			p.Close()
		}
		return err
	}, models.ErrConfig, smoothquant.ErrInvalid)
}
