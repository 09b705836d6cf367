package tokenizer

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// goldenInputs returns the texts and the pairs of a golden file
// (roberta-base: the same shared texts, from bert-base-uncased's).
func goldenInputs(t testing.TB, name string) ([]string, []Pair) {
	t.Helper()
	if name == "roberta-base" {
		name = "bert-base-uncased"
	}
	var texts []string
	var pairs []Pair
	for _, c := range loadGolden(t, name) {
		texts = append(texts, c.Text)
		if c.TextPair != nil {
			pairs = append(pairs, Pair{c.Text, *c.TextPair})
		}
	}
	return texts, pairs
}

// reuseOptions are the options the tests of scratch reuse run under:
// plain, truncated with overflowing windows and padding, and truncated
// from the left with only_second, padded on the left.
var reuseOptions = []Options{
	{},
	{MaxLength: 10, Truncation: LongestFirst, Stride: 2, Overflow: true, Padding: PadFixed, PadToMultipleOf: 4},
	{MaxLength: 12, Truncation: OnlySecond, TruncateLeft: true, Overflow: true, Stride: 1, Padding: PadFixed, PadLength: 16, PadLeft: true},
	{SkipSpecialTokens: true, MaxLength: 6, Truncation: LongestFirst},
}

// sameInputs reports whether lean holds what full does of the model's
// inputs, and nothing else, overflowing windows included.
func sameInputs(lean, full Encoding) bool {
	if !slices.Equal(lean.IDs, full.IDs) || !slices.Equal(lean.TypeIDs, full.TypeIDs) || !slices.Equal(lean.AttentionMask, full.AttentionMask) {
		return false
	}
	if lean.Tokens != nil || lean.Offsets != nil || lean.SpecialTokensMask != nil || lean.SequenceIDs != nil {
		return false
	}
	if len(lean.Overflowing) != len(full.Overflowing) {
		return false
	}
	for i := range lean.Overflowing {
		if !sameInputs(lean.Overflowing[i], full.Overflowing[i]) {
			return false
		}
	}
	return true
}

// TestInputsOnlyMatchesFull: with Options.InputsOnly every golden input
// gets the ids, type ids and attention mask of the full Encoding, and
// nothing else, from Encode, EncodePair and both batch methods.
func TestInputsOnlyMatchesFull(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"bert-base-uncased", "xlmr-spm-unigram", "roberta-base"} {
		tk := testTokenizer(t, name)
		texts, pairs := goldenInputs(t, name)
		for oi, o := range reuseOptions {
			lo := o
			lo.InputsOnly = true
			fulls, ferr := tk.EncodeBatch(ctx, texts, o)
			leans, lerr := tk.EncodeBatch(ctx, texts, lo)
			if (ferr == nil) != (lerr == nil) {
				t.Fatalf("%s options %d: batch errors %v and %v", name, oi, ferr, lerr)
			}
			for i := range leans {
				if !sameInputs(leans[i], fulls[i]) {
					t.Fatalf("%s options %d: batch item %d %q: inputs only %+v, full %+v", name, oi, i, texts[i], leans[i], fulls[i])
				}
			}
			for _, s := range texts {
				full, ferr := tk.Encode(s, o)
				lean, lerr := tk.Encode(s, lo)
				if (ferr == nil) != (lerr == nil) || !sameInputs(lean, full) {
					t.Fatalf("%s options %d: %q: inputs only %+v (%v), full %+v (%v)", name, oi, s, lean, lerr, full, ferr)
				}
			}
			pfulls, ferr := tk.EncodePairBatch(ctx, pairs, o)
			pleans, lerr := tk.EncodePairBatch(ctx, pairs, lo)
			if (ferr == nil) != (lerr == nil) {
				t.Fatalf("%s options %d: pair batch errors %v and %v", name, oi, ferr, lerr)
			}
			for i := range pleans {
				if !sameInputs(pleans[i], pfulls[i]) {
					t.Fatalf("%s options %d: pair %d: inputs only %+v, full %+v", name, oi, i, pleans[i], pfulls[i])
				}
				lean, err := tk.EncodePair(pairs[i].A, pairs[i].B, lo)
				if err != nil || !sameInputs(lean, pfulls[i]) {
					t.Fatalf("%s options %d: pair %d: EncodePair inputs only %+v (%v), full %+v", name, oi, i, lean, err, pfulls[i])
				}
			}
		}
	}
}

// TestBatchResultsOwnTheirMemory: the Encodings of a batch stay what they
// were after more batches ran on the same workers' memory, equal to
// sequential Encode calls in every field, and appending to one field of
// an Encoding changes no other field nor any other Encoding.
func TestBatchResultsOwnTheirMemory(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"bert-base-uncased", "xlmr-spm-unigram", "roberta-base"} {
		tk := testTokenizer(t, name)
		texts, pairs := goldenInputs(t, name)
		for oi, o := range reuseOptions {
			if o.Truncation == OnlySecond {
				continue // single texts cannot be truncated only_second
			}
			first, err := tk.EncodeBatch(ctx, texts, o)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]Encoding, len(texts))
			for i, s := range texts {
				want[i] = mustEncode(t, tk, s, o)
			}
			// More batches over other inputs, reusing the scratch memory.
			rev := slices.Clone(texts)
			slices.Reverse(rev)
			for range 3 {
				if _, err := tk.EncodeBatch(ctx, rev, o); err != nil {
					t.Fatal(err)
				}
				if _, err := tk.EncodePairBatch(ctx, pairs, reuseOptions[1]); err != nil {
					t.Fatal(err)
				}
			}
			for i := range first {
				if !reflect.DeepEqual(first[i], want[i]) {
					t.Fatalf("%s options %d: batch item %d %q:\n have %+v\n want %+v", name, oi, i, texts[i], first[i], want[i])
				}
			}
			for i := range first {
				checkSeparate(t, &first[i])
				for k := range first[i].Overflowing {
					checkSeparate(t, &first[i].Overflowing[k])
				}
			}
			for i := range first {
				// checkSeparate appended to each field of item i only.
				if i+1 < len(first) && !reflect.DeepEqual(first[i+1], want[i+1]) {
					t.Fatalf("%s options %d: appending to item %d changed item %d", name, oi, i, i+1)
				}
			}
		}
	}
}

// checkSeparate appends to each int32 field of e in turn and checks that
// no other field changed.
func checkSeparate(t *testing.T, e *Encoding) {
	t.Helper()
	fields := []*[]int32{&e.IDs, &e.TypeIDs, &e.AttentionMask, &e.SpecialTokensMask}
	for k, f := range fields {
		if *f == nil {
			continue
		}
		before := make([][]int32, len(fields))
		for j, g := range fields {
			before[j] = slices.Clone(*g)
		}
		n := len(*f)
		*f = append(*f, -7, -7, -7)
		for j, g := range fields {
			if j != k && !slices.Equal(*g, before[j]) {
				t.Fatalf("appending to field %d of %v changed field %d", k, e.IDs, j)
			}
		}
		*f = (*f)[:n]
	}
}

// TestBatchFirstFailure: a batch with several bad items names the first.
func TestBatchFirstFailure(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	texts := make([]string, 300)
	for i := range texts {
		texts[i] = "fine text"
	}
	for _, bad := range []int{290, 37, 150} {
		texts[bad] = "bad \xff"
	}
	_, err := tk.EncodeBatch(context.Background(), texts)
	if err == nil || !strings.HasPrefix(err.Error(), "batch item 37: ") {
		t.Errorf("have %v, want the error of item 37", err)
	}
}

// TestConcurrentBatches runs batches and single encodings from several
// goroutines at once (for the race detector) and checks every result.
func TestConcurrentBatches(t *testing.T) {
	ctx := context.Background()
	type job struct {
		tk    *Tokenizer
		texts []string
		pairs []Pair
		want  []Encoding
		wantP []Encoding
	}
	o := Options{MaxLength: 24, Truncation: LongestFirst}
	var jobs []job
	for _, name := range []string{"bert-base-uncased", "xlmr-spm-unigram", "roberta-base"} {
		tk := testTokenizer(t, name)
		texts, pairs := goldenInputs(t, name)
		j := job{tk: tk, texts: texts, pairs: pairs}
		for _, s := range texts {
			j.want = append(j.want, mustEncode(t, tk, s, o))
		}
		for _, p := range pairs {
			e, err := tk.EncodePair(p.A, p.B, o)
			if err != nil {
				t.Fatal(err)
			}
			j.wantP = append(j.wantP, e)
		}
		jobs = append(jobs, j)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := jobs[g%len(jobs)]
			for range 3 {
				switch g % 3 {
				case 0:
					encs, err := j.tk.EncodeBatch(ctx, j.texts, o)
					if err != nil {
						errs <- err.Error()
						return
					}
					for i := range encs {
						if !reflect.DeepEqual(encs[i], j.want[i]) {
							errs <- "batch item differs: " + j.texts[i]
							return
						}
					}
				case 1:
					encs, err := j.tk.EncodePairBatch(ctx, j.pairs, o)
					if err != nil {
						errs <- err.Error()
						return
					}
					for i := range encs {
						if !reflect.DeepEqual(encs[i], j.wantP[i]) {
							errs <- "pair batch item differs: " + j.pairs[i].A
							return
						}
					}
				default:
					for i, s := range j.texts {
						e, err := j.tk.Encode(s, o)
						if err != nil || !reflect.DeepEqual(e, j.want[i]) {
							errs <- "Encode differs: " + s
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
