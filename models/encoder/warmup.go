package encoder

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// TuningRecordFile is the tuning record next to a model's weights (a
// selector cache file, selector.CacheFileName): Save writes the choices of
// the model's keys there, and Load hands it to the selector, so that a
// folder shipped with its record starts warm on the CPU and build that
// tuned it (docs/DESIGN.md section 4.8).
const TuningRecordFile = selector.CacheFileName

// WarmupOptions bound the shapes Warmup tunes.
type WarmupOptions struct {
	// MaxBatch is the most sequences of one forward pass (0 means 1).
	MaxBatch int
	// MaxLength is the longest sequence in tokens (0 means the model's
	// longest, at most 512).
	MaxLength int
	// MaxTokens bounds batch x length of one pass, as a micro-batcher's
	// token budget does (0 means MaxBatch x MaxLength).
	MaxTokens int
	// Progress, when set, is called after each key with the count done,
	// the total and the key's choice.
	Progress func(done, total int, ch selector.Choice)
}

// Warmup tunes, on the model's selector, every GEMM key (linears,
// attention's products, the head) that a forward pass meets for batches
// of up to o.MaxBatch sequences of up to o.MaxLength tokens, and packs
// each linear's weights for the kernel its keys chose, so that no call
// within those bounds waits for a tuning or a packing (nor, with a
// background selector, runs a default kernel). Keys already tuned or in
// the cache or the model's tuning record cost no tuning. It waits for
// each tuning, in either selector tuning mode; ctx stops it between runs
// of a tuning, returning ctx.Err() wrapped (what was tuned stays). The
// model then keeps one set of pass buffers for o.MaxTokens tokens until it
// closes (on BERT-base about 30 MB per 1,000 tokens FP32, 47 MB INT8), so that the
// first call after a garbage collection does not allocate them again.
func (m *TaskModel) Warmup(ctx context.Context, o WarmupOptions) error {
	// The gate: packing reads the weights, which Close unmaps.
	if err := m.enter(); err != nil {
		return err
	}
	defer m.leave()
	keys, err := m.warmupKeys(o)
	if err != nil {
		return err
	}
	sel := m.Encoder.Selector()
	for i, wk := range keys {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("encoder: warmup: %w", err)
		}
		ch, err := sel.Tune(ctx, wk.key)
		if err != nil {
			return fmt.Errorf("encoder: warmup: %w", err)
		}
		for _, prep := range wk.prep {
			if err := prep(wk.key); err != nil {
				return fmt.Errorf("encoder: warmup: %w", err)
			}
		}
		if o.Progress != nil {
			o.Progress(i+1, len(keys), ch)
		}
	}
	// One set of buffers for the largest pass stays with the model: a
	// call after a garbage collection would otherwise allocate and clear
	// them again (tens of megabytes on BERT-base).
	b, err := m.bounds(o)
	if err != nil {
		return err
	}
	m.Encoder.keepBuffers(b.MaxTokens)
	return nil
}

// WarmupKeys lists the keys Warmup tunes, smallest M first: the union of
// the keys of every forward pass within o's bounds.
func (m *TaskModel) WarmupKeys(o WarmupOptions) ([]selector.Key, error) {
	// The gate: packing reads the weights, which Close unmaps.
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.leave()
	wks, err := m.warmupKeys(o)
	if err != nil {
		return nil, err
	}
	keys := make([]selector.Key, len(wks))
	for i, wk := range wks {
		keys[i] = wk.key
	}
	return keys, nil
}

// warmKey is a key and what prepares the linears that run it.
type warmKey struct {
	key  selector.Key
	prep []func(selector.Key) error
}

// bounds is o with its defaults filled in, or an error naming the value
// outside its domain.
func (m *TaskModel) bounds(o WarmupOptions) (WarmupOptions, error) {
	most := min(m.Encoder.Config().MaxSeq(), 512)
	if o.MaxLength == 0 {
		o.MaxLength = most
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1
	}
	switch {
	case o.MaxBatch < 0:
		return o, fmt.Errorf("encoder: warmup: max batch %d is negative: %w", o.MaxBatch, ErrConfig)
	case o.MaxLength < 0 || o.MaxLength > m.Encoder.Config().MaxSeq():
		return o, fmt.Errorf("encoder: warmup: max length %d outside [1, %d]: %w", o.MaxLength, m.Encoder.Config().MaxSeq(), ErrConfig)
	case o.MaxTokens < 0:
		return o, fmt.Errorf("encoder: warmup: max tokens %d is negative: %w", o.MaxTokens, ErrConfig)
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = o.MaxBatch * o.MaxLength
	}
	return o, nil
}

func (m *TaskModel) warmupKeys(o WarmupOptions) ([]*warmKey, error) {
	o, err := m.bounds(o)
	if err != nil {
		return nil, err
	}
	// A pass's keys depend on its rows, its batch and its length only
	// through their M buckets. A packed pass (docs/DESIGN.md section 2.2)
	// of up to MaxBatch sequences of up to MaxLength tokens has any number
	// of rows up to MaxBatch x MaxLength (and MaxTokens), not only
	// products batch x length.
	rows, batches, seqs := map[int]int{}, map[int]int{}, map[int]int{}
	for b := 1; b <= o.MaxBatch && b <= o.MaxTokens; b++ {
		batches[selector.BucketM(b)] = b
	}
	for r := 1; r <= min(o.MaxTokens, o.MaxBatch*o.MaxLength); r++ {
		rows[selector.BucketM(r)] = r
	}
	for s := 1; s <= min(o.MaxLength, o.MaxTokens); s++ {
		seqs[selector.BucketM(s)] = s
	}
	byKey := map[string]*warmKey{}
	var keys []*warmKey
	add := func(ks []linKey) {
		for _, k := range ks {
			s := k.key.String()
			wk := byKey[s]
			if wk == nil {
				wk = &warmKey{key: k.key}
				byKey[s] = wk
				keys = append(keys, wk)
			}
			if k.prep != nil {
				wk.prep = append(wk.prep, k.prep)
			}
		}
	}
	for _, r := range rows {
		ks, err := m.rowKeys(r)
		if err != nil {
			return nil, err
		}
		add(ks)
	}
	for _, b := range batches {
		add(m.batchKeys(b))
	}
	d := m.Encoder.cfg.Hidden / m.Encoder.cfg.Heads
	for _, s := range seqs {
		if m.Encoder.Attention() == AttentionInt8 {
			kinds := m.Encoder.attnKinds()
			qk, err := selector.U8S8KernelKey(s, d, s, kinds[0], 1)
			if err != nil {
				return nil, err
			}
			pv, err := selector.U8S8KernelKey(s, s, d, kinds[1], 1)
			if err != nil {
				return nil, err
			}
			add([]linKey{{key: qk}, {key: pv}})
			continue
		}
		if m.Encoder.Attention() == AttentionBF16 {
			add([]linKey{{key: selector.BF16KernelKey(s, d, s, 1)}, {key: selector.BF16KernelKey(s, s, d, 1)}})
			continue
		}
		add([]linKey{{key: selector.F32KernelKey(s, d, s, 1)}, {key: selector.F32KernelKey(s, s, d, 1)}})
	}
	add(m.Encoder.disKeys(min(o.MaxLength, o.MaxTokens)))
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i].key, keys[j].key
		if a.M != b.M {
			return a.M < b.M
		}
		return a.String() < b.String()
	})
	return keys, nil
}

// linKey is the key of one linear's call and the linear's Prepare (nil
// for attention's products, which pack per call).
type linKey struct {
	key  selector.Key
	prep func(selector.Key) error
}

// rowKeys are the keys of a pass of rows rows (batch x length) that
// depend on the rows alone: the encoder's linears and a token-level head.
// They mirror Model.layer and int8Pass.layer; the warm-up tests hold them to
// what a forward pass asks.
func (m *TaskModel) rowKeys(rows int) ([]linKey, error) {
	e := m.Encoder
	keys, err := e.pass.rowKeys(rows, e.cfg, e.threads)
	if err != nil {
		return nil, err
	}
	if e.proj != nil {
		keys = append(keys, e.proj.linKey(rows, e.threads))
	}
	if m.Task == TaskQuestionAnswering && m.qa != nil {
		keys = append(keys, m.qa.linKey(rows, e.threads))
	}
	if m.Task == TaskTokenClassification && len(m.head) > 0 {
		keys = append(keys, m.head[0].linKey(rows, e.threads))
	}
	return keys, nil
}

// rowKeys are the keys of the FP32 or BF16 layers' linears (Model.layer).
func (p *floatPass) rowKeys(rows int, c Config, th int) ([]linKey, error) {
	var keys []linKey
	for _, ly := range p.layers {
		keys = append(keys,
			linKey{ly.qkv.key(rows, &kernels.Epilogue{Bias: ly.qkvBias}, th), ly.qkv.Prepare},
			linKey{ly.o.key(rows, &kernels.Epilogue{Bias: ly.oBias, Residual: placeholder}, th), ly.o.Prepare},
			linKey{ly.ffn1.key(rows, &kernels.Epilogue{Bias: ly.ffn1Bias, Act: c.Activation}, th), ly.ffn1.Prepare},
			linKey{ly.ffn2.key(rows, &kernels.Epilogue{Bias: ly.ffn2Bias, Residual: placeholder}, th), ly.ffn2.Prepare})
	}
	return keys, nil
}

// rowKeys are the keys of the INT8 layers' linears (int8Pass.layer).
func (p *int8Pass) rowKeys(rows int, c Config, th int) ([]linKey, error) {
	static := p.mode == smoothquant.Static
	f32 := kernels.Out{F32: placeholder}
	var keys []linKey
	for _, ly := range p.layers {
		qkv, o, f1, f2 := ly.lin[linQKV], ly.lin[linO], ly.lin[linFFN1], ly.lin[linFFN2]
		f1Out, outScale, outZP := f32, float32(0), int32(0)
		if static && f1.int8() && f2.int8() && f2.pre == nil {
			f1Out = kernels.Out{U8: []uint8{}}
			outScale, outZP = f2.q.ActScale, f2.q.ActZeroPoint
		}
		for _, q := range []struct {
			l        *qlin
			act      kernels.Activation
			res      []float32
			out      kernels.Out
			outScale float32
			outZP    int32
		}{
			{qkv, kernels.ActNone, nil, f32, 0, 0},
			{o, kernels.ActNone, placeholder, f32, 0, 0},
			{f1, c.Activation, nil, f1Out, outScale, outZP},
			{f2, kernels.ActNone, placeholder, f32, 0, 0},
		} {
			k, err := q.l.key(p.mode, rows, q.act, q.res, q.out, q.outScale, q.outZP, th)
			if err != nil {
				return nil, fmt.Errorf("encoder: warmup: %w", err)
			}
			prep := q.l.f32Prepare
			if q.l.int8() {
				prep = q.l.lin.Prepare
			}
			keys = append(keys, linKey{k, prep})
		}
	}
	return keys, nil
}

// f32Prepare is Prepare of a fallback linear.
func (l *qlin) f32Prepare(k selector.Key) error { return l.f32.Prepare(k) }

// placeholder stands for a residual or destination in a key: only whether
// it is set matters.
var placeholder = []float32{}

// key is the key of runQ's call of l on rows rows.
func (l *qlin) key(mode smoothquant.Mode, rows int, act kernels.Activation, res []float32, out kernels.Out,
	outScale float32, outZP int32, threads int) (selector.Key, error) {
	if !l.int8() {
		return selector.F32Key(rows, l.q.K, l.q.N, &kernels.Epilogue{Bias: l.q.Bias, Act: act, Residual: res}, threads), nil
	}
	ep := l.epilogue(mode, &qin{scales: make([]float32, 1)}, 1)
	ep.Act, ep.Residual = act, res
	ep.OutScale, ep.OutZeroPoint = outScale, outZP
	return selector.U8S8Key(rows, l.q.K, l.q.N, ep, out, threads)
}

// batchKeys are the keys of a pass of batch sequences that depend on the
// batch alone: the pooler and the classifier, on one row per sequence.
func (m *TaskModel) batchKeys(batch int) []linKey {
	th := m.Encoder.threads
	var keys []linKey
	if m.pooler != nil {
		keys = append(keys, m.pooler.linKey(batch, th))
	}
	if m.Task == TaskSequenceClassification {
		for _, d := range m.head {
			keys = append(keys, d.linKey(batch, th))
		}
	}
	return keys
}

// linKey is the key of Apply on rows rows.
func (d *Dense) linKey(rows, threads int) linKey {
	ep := &kernels.Epilogue{Bias: d.bias, Act: d.act.epilogueAct()}
	return linKey{selector.F32Key(rows, d.K, d.N, ep, threads), d.lin.Prepare}
}

// ownsKey reports whether key is one of the model's: a key of a forward
// pass of some batch and length (any M).
func (m *TaskModel) ownsKey(key selector.Key) bool {
	if key.Op == selector.OpF32Kernel || key.Op == selector.OpBF16Kernel || key.Op == selector.OpU8S8Kernel {
		d := selector.BucketM(m.Encoder.cfg.Hidden / m.Encoder.cfg.Heads)
		if key.Op == selector.OpBF16Kernel && m.Encoder.Attention() != AttentionBF16 {
			return false
		}
		if key.Op == selector.OpU8S8Kernel {
			kinds := m.Encoder.attnKinds()
			if m.Encoder.Attention() != AttentionInt8 || (key.Epilogue != kinds[0] && key.Epilogue != kinds[1]) {
				return false
			}
		}
		return key.Threads == 1 && ((key.K == d && key.N == key.M) || (key.N == d && key.K == key.M) ||
			m.Encoder.dis != nil && key.Op == selector.OpF32Kernel && key.K == d)
	}
	for _, lk := range m.Encoder.disKeys(0) {
		if lk.key == key {
			return true
		}
	}
	rk, err := m.rowKeys(1)
	if err != nil {
		return false
	}
	for _, lk := range append(rk, m.batchKeys(1)...) {
		k := lk.key
		k.M = key.M
		if k == key {
			return true
		}
	}
	return false
}

// importTuningRecord hands the tuning record in dir, if any, to sel. A
// record that is corrupt or of another CPU or build is a note of the
// selector's (Options.Warn), never an error: the keys are then tuned here.
func importTuningRecord(sel *selector.Selector, dir string) {
	_, _ = sel.ImportRecord(filepath.Join(dir, TuningRecordFile))
}

// SaveTuningRecord writes the tuning record of the model into dir: the
// choices of its keys its selector holds, as the section of this binary,
// next to the sections of other builds and CPUs that dir's record (or the
// record of the folder the model came from) already holds. Save calls it;
// `int8bert tune --model DIR` calls it after a warm-up. A model without
// any tuned key leaves dir's record as it is.
func (m *TaskModel) SaveTuningRecord(dir string) error {
	// The gate: packing reads the weights, which Close unmaps.
	if err := m.enter(); err != nil {
		return err
	}
	defer m.leave()
	dst := filepath.Join(dir, TuningRecordFile)
	if m.dir != "" {
		src := filepath.Join(m.dir, TuningRecordFile)
		if same, _ := sameFile(src, dst); !same && fileExists(src) && !fileExists(dst) {
			// The other sections travel too; a corrupt record does not.
			if f, err := selector.LoadCacheFile(src); err == nil {
				if err := f.Save(dst); err != nil {
					return fmt.Errorf("encoder: save: tuning record: %w", err)
				}
			}
		}
	}
	if _, err := m.Encoder.Selector().ExportRecord(dst, m.ownsKey); err != nil {
		return fmt.Errorf("encoder: save: tuning record: %w", err)
	}
	return nil
}
