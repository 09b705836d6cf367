package models_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sst2 returns the first n sentences of the shared SST-2 file name
// (train.tsv: 67,349 phrases; dev.tsv: 872 sentences), skipping the test
// when the shared folder is absent.
func sst2(tb testing.TB, name string, n int) []string {
	tb.Helper()
	path := filepath.Join(sharedDir(), "data", "sst2", name)
	f, err := os.Open(path)
	if err != nil {
		tb.Skipf("%s not found (the project's shared folder; set INT8BERT_SHARED): %v", path, err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		line := sc.Text()
		if line == "sentence\tlabel" {
			continue
		}
		text, _, _ := strings.Cut(line, "\t")
		out = append(out, strings.TrimSpace(text))
	}
	require.NoError(tb, sc.Err())
	require.Len(tb, out, n, "%s has fewer sentences", path)
	return out
}

// sst2Model loads a shared SST-2 model folder on one thread, on a
// selector of its own that tunes each new shape quickly (one repetition,
// no cache file): the tests here meet many shapes.
func sst2Model(tb testing.TB, name string, o models.Options) *models.Pipeline {
	tb.Helper()
	dir := filepath.Join(sharedDir(), "models", name)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		tb.Skipf("%s not found (the project's shared folder; set INT8BERT_SHARED): %v", dir, err)
	}
	o.Threads = 1
	if o.Selector == nil {
		o.Selector = encodertest.Selector(tb)
	}
	p, err := models.Load(context.Background(), dir, o)
	require.NoError(tb, err)
	tb.Cleanup(func() { p.Close() })
	return p
}

// relDiff is the largest difference of a and b over the largest |a|.
func relDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = math.Max(m, math.Abs(float64(a[i])))
	}
	return d / m
}

// TestMicroBatchesMatchOneByOne: Classify, ClassifyPairs and Embed of
// many texts, split into micro-batches under a small and the default
// budget, give each text what it gets alone, in the caller's order,
// within the parity tolerance of the golden tests (1e-5 relative to the
// largest value: padding adds exact zeros to attention's sums, but in
// another order, and the number of rows may change the kernel). A budget
// of 1 runs every text alone, so it matches bit for bit. XLM-R numbers
// positions from its padding, so it checks that padding keeps them.
func TestMicroBatchesMatchOneByOne(t *testing.T) {
	ctx := context.Background()
	n := 48
	if testing.Short() {
		n = 20
	}
	texts := sst2(t, "dev.tsv", n)
	var pairs []tokenizer.Pair
	for i := 0; i+1 < len(texts); i += 2 {
		pairs = append(pairs, tokenizer.Pair{A: texts[i], B: texts[i+1]})
	}
	for _, name := range []string{"sst2-bert-mini", "sst2-xlmr-mini"} {
		one := sst2Model(t, name, models.Options{MaxBatchTokens: 1})
		var alone []models.Classification
		var aloneEmb [][]float32
		for _, text := range texts {
			c, err := one.Classify(ctx, []string{text}, models.ClassifyOptions{})
			require.NoError(t, err)
			alone = append(alone, c...)
			e, err := one.Embed(ctx, []string{text}, models.EmbedOptions{Normalize: true})
			require.NoError(t, err)
			aloneEmb = append(aloneEmb, e...)
		}
		var alonePairs []models.Classification
		for _, pr := range pairs {
			c, err := one.ClassifyPairs(ctx, []tokenizer.Pair{pr}, models.ClassifyOptions{})
			require.NoError(t, err)
			alonePairs = append(alonePairs, c...)
		}
		all, err := one.Classify(ctx, texts, models.ClassifyOptions{})
		require.NoError(t, err)
		require.Equal(t, alone, all, "%s: budget 1 runs each text alone", name)

		for _, budget := range []int{200, 0} {
			p := sst2Model(t, name, models.Options{MaxBatchTokens: budget, Profile: true})
			got, err := p.Classify(ctx, texts, models.ClassifyOptions{})
			require.NoError(t, err)
			passes := p.Profile().Passes
			t.Logf("%s, budget %d: %d texts in %d micro-batches", name, p.MaxBatchTokens(), len(texts), passes)
			if budget > 0 {
				require.Greater(t, passes, 2, "%s: the budget should split the call", name)
			}
			require.Len(t, got, len(texts))
			for i := range texts {
				require.Equal(t, alone[i].Label, got[i].Label, "%s budget %d text %d", name, budget, i)
				require.LessOrEqual(t, relDiff(alone[i].Logits, got[i].Logits), 1e-5, "%s budget %d text %d logits", name, budget, i)
			}
			gotPairs, err := p.ClassifyPairs(ctx, pairs, models.ClassifyOptions{})
			require.NoError(t, err)
			for i := range pairs {
				require.LessOrEqual(t, relDiff(alonePairs[i].Logits, gotPairs[i].Logits), 1e-5, "%s budget %d pair %d logits", name, budget, i)
			}
			emb, err := p.Embed(ctx, texts, models.EmbedOptions{Normalize: true})
			require.NoError(t, err)
			for i := range texts {
				require.LessOrEqual(t, relDiff(aloneEmb[i], emb[i]), 1e-5, "%s budget %d embedding %d", name, budget, i)
			}
		}
	}
}

// TestMaxBatchTokensOption: 0 is the documented default, a negative
// budget is a configuration error that names it.
func TestMaxBatchTokensOption(t *testing.T) {
	dir := shared(t, "models/sst2-bert-mini")
	p := sst2Model(t, "sst2-bert-mini", models.Options{})
	assert.Equal(t, models.DefaultMaxBatchTokens, p.MaxBatchTokens())
	_, err := models.Load(context.Background(), dir, models.Options{MaxBatchTokens: -5})
	require.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), "-5")
}

// TestTokenizeErrorNamesTheInput: a call tokenizes its inputs in chunks;
// a bad input past the first chunk is still named by its index in the
// call, and the tokenizer's error is wrapped.
func TestTokenizeErrorNamesTheInput(t *testing.T) {
	p := sst2Model(t, "sst2-bert-mini", models.Options{})
	texts := make([]string, 2500)
	for i := range texts {
		texts[i] = "a fine film"
	}
	for _, bad := range []int{7, 1300, 2499} {
		in := slices.Clone(texts)
		in[bad] = "bad \xff byte"
		_, err := p.Classify(context.Background(), in, models.ClassifyOptions{})
		require.Error(t, err)
		var utf *tokenizer.InvalidUTF8Error
		require.ErrorAs(t, err, &utf, "text %d", bad)
		assert.Contains(t, err.Error(), fmt.Sprintf("batch item %d:", bad))
		_, err = p.ClassifyPairs(context.Background(), []tokenizer.Pair{{A: "ok", B: "ok"}, {A: "ok", B: in[bad]}}, models.ClassifyOptions{})
		require.ErrorAs(t, err, &utf, "pair with text %d", bad)
	}
}

// TestClassifyCancel: a Classify of many SST-2 sentences (seconds of
// work) whose context is cancelled, or whose deadline passes, after 50 ms
// returns ctx.Err() soon after: the check between layers and between
// micro-batches bounds what runs after the cancel to about one layer of
// one micro-batch. Timing is only compared with the same test's own
// measurements: the cancelled call must end long before the uncancelled
// one does, and within two micro-batches' time of the cancel.
func TestClassifyCancel(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 1000
	}
	ctx := context.Background()
	texts := sst2(t, "train.tsv", n)
	p := sst2Model(t, "sst2-bert-mini", models.Options{Profile: true})
	_, err := p.Classify(ctx, texts, models.ClassifyOptions{}) // tunes the kernels of every shape
	require.NoError(t, err)
	head, err := p.Classify(ctx, texts[:64], models.ClassifyOptions{})
	require.NoError(t, err)
	before := p.Profile().Passes
	start := time.Now()
	_, err = p.Classify(ctx, texts, models.ClassifyOptions{})
	full := time.Since(start)
	require.NoError(t, err)
	passes := p.Profile().Passes - before
	onePass := full / time.Duration(passes)
	oneLayer := onePass / time.Duration(p.Config().Layers)
	const after = 50 * time.Millisecond
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(after, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, after) }, context.DeadlineExceeded},
	} {
		cctx, cancel := c.ctx()
		start := time.Now()
		got, err := p.Classify(cctx, texts, models.ClassifyOptions{})
		took := time.Since(start)
		cancel()
		require.ErrorIs(t, err, c.want, c.name)
		require.Nil(t, got, c.name)
		late := took - after
		t.Logf("%s after %v of a %d-text call (%v uncancelled, %d micro-batches of %v, a layer %v): returned after %v, %v after the %s (%.2f layers)",
			c.name, after, n, full.Round(time.Millisecond), passes, onePass.Round(time.Millisecond), oneLayer.Round(time.Millisecond),
			took.Round(time.Millisecond), late.Round(time.Millisecond), c.name, float64(late)/float64(oneLayer))
		assert.Less(t, took, full/4, "%s: the cancelled call should end long before the uncancelled one", c.name)
		assert.Less(t, late, 2*onePass, "%s: the call should end within about a layer of the cancel", c.name)
	}
	// A done context runs nothing.
	done, cancel := context.WithCancel(ctx)
	cancel()
	before = p.Profile().Passes
	_, err = p.Classify(done, texts, models.ClassifyOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, p.Profile().Passes, "a call with a done context ran forward passes")
	// The pipeline is unharmed.
	again, err := p.Classify(ctx, texts[:64], models.ClassifyOptions{})
	require.NoError(t, err)
	require.Equal(t, head, again)
}

// heapPeak runs f and returns the largest Go heap (bytes of heap objects,
// live or not yet swept) seen while it ran, over the heap before it,
// after two collections (the second empties sync.Pools). A goroutine
// samples runtime/metrics every 100 µs: the peak of a call is its
// micro-batch buffers, held for the whole call, plus what it keeps per
// input, so it is a plateau that sampling does not miss.
func heapPeak(f func()) (peak, base uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	runtime.GC()
	base = read()
	peak = base
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	}()
	f()
	close(stop)
	<-stopped
	return max(peak, read()), base
}

// classifyHeap measures the heap peaks of Classify on small and on all of
// texts (after a warm-up call of each, which tunes the kernels of every
// shape), at GC percent gc: what each call adds over the heap before it,
// and the whole heap (the model's packed weights included).
func classifyHeap(tb testing.TB, p *models.Pipeline, small, all []string, gc int) (smallAdd, allAdd, smallPeak, allPeak uint64) {
	tb.Helper()
	ctx := context.Background()
	run := func(texts []string) {
		_, err := p.Classify(ctx, texts, models.ClassifyOptions{})
		require.NoError(tb, err)
	}
	run(small)
	run(all)
	defer debug.SetGCPercent(debug.SetGCPercent(gc))
	smallPeak, base := heapPeak(func() { run(small) })
	smallAdd = smallPeak - base
	allPeak, base = heapPeak(func() { run(all) })
	allAdd = allPeak - base
	return smallAdd, allAdd, smallPeak, allPeak
}

// TestClassifyHeapBounded: the Go heap a Classify of 10,000 SST-2
// sentences adds at its peak is at most 1.5x what a 256-sentence call
// adds: the micro-batches' buffers are bounded by the token budget, and
// per sentence a call keeps only its token ids and its result. Heap bytes
// are not timing; with GC percent 10 during the measurement the heap
// stays close to what is live, so the ratio does not depend on when the
// collector happens to run. (-short: 2,000 sentences.)
func TestClassifyHeapBounded(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	texts := sst2(t, "train.tsv", n)
	p := sst2Model(t, "sst2-bert-mini", models.Options{})
	smallAdd, allAdd, smallPeak, allPeak := classifyHeap(t, p, texts[:256], texts, 10)
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	ratio := float64(allAdd) / float64(smallAdd)
	t.Logf("Classify heap peak (GC percent 10, budget %d tokens): 256 sentences add %.1f MB (heap %.1f MB), %d add %.1f MB (heap %.1f MB): %.2fx added, %.2fx whole heap",
		p.MaxBatchTokens(), mb(smallAdd), mb(smallPeak), n, mb(allAdd), mb(allPeak), ratio, float64(allPeak)/float64(smallPeak))
	assert.LessOrEqual(t, ratio, 1.5, "the heap a call adds should be bounded by the token budget, not by the number of texts")
}

// BenchmarkClassifyHeap reports the heap peak of Classify (sst2-bert-mini,
// FP32, one thread, default budget) at the default GC percent, with the
// sentences per second: one call of 256 SST-2 sentences, 40 such calls
// back to back (a service's steady state, the same 10,240 sentences), and
// one call of 10,000. added-heap-MB is over the heap before the run
// (after two collections), peak-heap-MB the whole heap. At GC percent 100
// the collector lets the heap grow to about twice what is live before it
// collects: one short call ends before its first collection, while a long
// call, or a stream of short ones, runs up to that goal.
func BenchmarkClassifyHeap(b *testing.B) {
	texts := sst2(b, "train.tsv", 10240)
	p := sst2Model(b, "sst2-bert-mini", models.Options{})
	ctx := context.Background()
	for _, c := range []struct{ texts, calls int }{{256, 1}, {256, 40}, {10000, 1}} {
		b.Run(fmt.Sprintf("%d-texts-x%d", c.texts, c.calls), func(b *testing.B) {
			run := func() {
				for k := 0; k < c.calls; k++ {
					_, err := p.Classify(ctx, texts[k*c.texts:(k+1)*c.texts], models.ClassifyOptions{})
					require.NoError(b, err)
				}
			}
			run()
			var add, peak uint64
			var took time.Duration
			b.ResetTimer()
			for range b.N {
				pk, base := heapPeak(func() {
					start := time.Now()
					run()
					took += time.Since(start)
				})
				add, peak = max(add, pk-base), max(peak, pk)
			}
			b.ReportMetric(float64(add)/(1<<20), "added-heap-MB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(c.texts*c.calls*b.N)/took.Seconds(), "texts/s")
		})
	}
}
