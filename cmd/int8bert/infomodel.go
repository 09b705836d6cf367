package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// modelReport is what "int8bert info --model DIR -json" prints.
type modelReport struct {
	Model string `json:"model"`
	// Family is the display name ("XLM-RoBERTa"), FamilyID the recipe's
	// ("xlm-roberta").
	Family       string   `json:"family"`
	FamilyID     string   `json:"family_id"`
	Architecture string   `json:"architecture"`
	Task         string   `json:"task"`
	Labels       []string `json:"labels,omitempty"`
	Precision    string   `json:"precision"`
	Layers       int      `json:"layers"`
	Hidden       int      `json:"hidden"`
	Heads        int      `json:"heads"`
	Intermediate int      `json:"intermediate"`
	Vocab        int      `json:"vocab"`
	MaxSeq       int      `json:"max_seq"`
	Tokenizer    bool     `json:"tokenizer"`
	// Sentence is what the folder's sentence-transformers files set (the
	// pooling of embeddings and where it came from, the modules after it).
	Sentence models.SentenceConfig `json:"sentence"`
	// Recipe is the INT8 artifact's, nil for FP32 weights.
	Recipe *recipeSummary `json:"recipe,omitempty"`
	Tuning tuningState    `json:"tuning"`
	// Int8Here is the INT8 tier of this host: what an INT8 precision of
	// this model runs on here. The artifact is the same on every tier.
	Int8Here selector.Int8Tier `json:"int8_here"`
	// Resident is the loaded model's memory by kind (before any pass:
	// an int8 linear holds its compact weights until its first).
	Resident models.ResidentBytes `json:"resident_bytes"`
}

// recipeSummary is an artifact's recipe with its per-linear alphas and
// SQNRs summed up.
type recipeSummary struct {
	Mode         string  `json:"mode"`
	Alpha        string  `json:"alpha"`
	Range        string  `json:"range"`
	Percentile   float64 `json:"percentile,omitempty"`
	FallbackSQNR float64 `json:"fallback_sqnr_db,omitempty"`
	CalibTexts   int     `json:"calib_texts"`
	CalibRows    int     `json:"calib_rows"`
	CalibHash    string  `json:"calib_sha256"`
	Source       string  `json:"source"`
	Created      string  `json:"created"`
	Linears      int     `json:"linears"`
	// Alphas counts the linears per alpha.
	Alphas map[string]int `json:"alphas"`
	// Fallback counts the linears kept in FP32, Folded the O projections
	// whose smoothing is folded into V.
	Fallback int `json:"fallback"`
	Folded   int `json:"folded"`
	// MinSQNR and MedianSQNR are over the quantized linears (dB; null
	// when all are exact).
	MinSQNR    *float64          `json:"min_sqnr_db"`
	MedianSQNR *float64          `json:"median_sqnr_db"`
	Versions   map[string]string `json:"versions,omitempty"`
}

// tuningState says what the tuning cache holds for the model's linear
// layers.
type tuningState struct {
	// Cache is the cache file ("" when the cache is off).
	Cache string `json:"cache"`
	// State is "off", "missing", "unreadable", "ignored" or "valid".
	State string `json:"state"`
	// Why says why a cache is unreadable or ignored.
	Why string `json:"why,omitempty"`
	// Op is the operation of the model's linears (u8s8 or f32), Shapes
	// their K x N shapes, Entries the cached choices for them, and
	// MBuckets the row-count buckets they cover.
	Op       string   `json:"op"`
	Shapes   []string `json:"shapes"`
	Entries  int      `json:"entries"`
	MBuckets []int    `json:"m_buckets,omitempty"`
	// Attention is the arithmetic the model's attention runs in, AttnOp
	// the selector operation of its two products.
	Attention string `json:"attention"`
	AttnOp    string `json:"attention_op"`
	// Kernels are the cached choices of every linear and of attention's
	// products, by part and row class (one thread).
	Kernels []kernelChoice `json:"kernels,omitempty"`
}

// kernelChoice is one cached choice: the part of the model ("qkv", "o",
// "ffn1", "ffn2", "attention scores", "attention context", or "attention
// scores, context" where the sequence class equals the head size and the
// two float products share a key), the key's
// row class (M: the sequence length class for attention), epilogue kind,
// and the candidate chosen with its ISA.
type kernelChoice struct {
	Part     string  `json:"part"`
	M        int     `json:"m"`
	Epilogue string  `json:"epilogue"`
	Kernel   string  `json:"kernel"`
	ISA      cpu.ISA `json:"isa"`
}

// runInfoModel implements "int8bert info --model DIR": the model as Load
// reads it, without running it.
func runInfoModel(ctx context.Context, model string, asJSON bool, stdout, stderr io.Writer) error {
	log := newLogger(stderr)
	p, sel, err := openModel(ctx, model, models.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("info: %w", err)
	}
	defer sel.Close()
	defer p.Close()
	m := p
	cfg := m.Config()
	r := modelReport{Model: model, Family: m.FamilyDisplay(), FamilyID: m.Family(),
		Architecture: m.Architecture(), Task: m.Task().Head(), Labels: m.Labels(),
		Precision: m.Precision().String(), Layers: cfg.Layers, Hidden: cfg.Hidden, Heads: cfg.Heads,
		Intermediate: cfg.Intermediate, Vocab: cfg.Vocab, MaxSeq: cfg.MaxSeq(), Tokenizer: p.Tok != nil,
		Sentence: p.Sentence(), Resident: p.ResidentBytes()}
	if rec := m.Recipe(); rec != nil {
		r.Recipe = summarize(rec)
	}
	op := selector.OpF32
	switch {
	case m.Precision().Int8():
		op = selector.OpU8S8
	case m.Precision() == models.PrecisionBF16:
		op = selector.OpBF16
	}
	r.Tuning = tuning(sel, op, cfg, m.Attention())
	r.Int8Here = selector.DescribeInt8(sel.Features())
	if asJSON {
		return writeJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "model:     %s\n", r.Model)
	fmt.Fprintf(stdout, "family:    %s (%s)\n", r.Family, r.FamilyID)
	task := fmt.Sprintf("%s: %s", r.Architecture, r.Task)
	if len(r.Labels) > 0 {
		task += fmt.Sprintf(", labels %s", strings.Join(r.Labels, ", "))
	}
	fmt.Fprintf(stdout, "task:      %s\n", task)
	fmt.Fprintf(stdout, "precision: %s\n", r.Precision)
	tok := "tokenizer"
	if !r.Tokenizer {
		tok = "no tokenizer (token ids only)"
	}
	fmt.Fprintf(stdout, "shape:     %d layers, hidden %d, %d heads, FFN %d, vocabulary %d, at most %d tokens; %s\n",
		r.Layers, r.Hidden, r.Heads, r.Intermediate, r.Vocab, r.MaxSeq, tok)
	st := r.Sentence
	emb := fmt.Sprintf("pooling %v (%s), %d values", st.Pooling, st.PoolingFrom, st.Dim)
	if st.Pooling == models.PoolDefault {
		// No sentence-transformers pooling and no BERT-type default: TEI
		// asks for --pooling on such a model, and so does embed.
		emb = fmt.Sprintf("no pooling of its own (no sentence-transformers pooling configuration, and %s is not a BERT-type model, for which TEI would default to cls): embed and serve need --pooling", r.Family)
	}
	if len(st.Modules) > 0 {
		emb += ", then " + strings.Join(st.Modules, ", ")
	}
	if st.Config != "" {
		emb += fmt.Sprintf("; %s: max_seq_length %d, do_lower_case %v", st.Config, st.MaxSeqLength, st.DoLowerCase)
	}
	fmt.Fprintf(stdout, "embedding: %s\n", emb)
	if s := r.Recipe; s != nil {
		fmt.Fprintf(stdout, "recipe:    mode %s, alpha %s (%s), range %s\n", s.Mode, s.Alpha, alphaText(s.Alphas), rangeText(s))
		fmt.Fprintf(stdout, "           %d linears: %d kept in FP32, %d with smoothing folded into V; SQNR min %s, median %s dB\n",
			s.Linears, s.Fallback, s.Folded, dbText(s.MinSQNR), dbText(s.MedianSQNR))
		fmt.Fprintf(stdout, "           calibration: %d texts, %d tokens, sha256 %s\n", s.CalibTexts, s.CalibRows, orDash(s.CalibHash))
		fmt.Fprintf(stdout, "           made from %s on %s\n", orDash(s.Source), s.Created)
	} else {
		fmt.Fprintln(stdout, "recipe:    none (FP32 weights; an INT8 precision quantizes them at load)")
	}
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	rb := r.Resident
	fmt.Fprintf(stdout, "resident:  %s as loaded: packed weights %s, other weights %s, scratch %s, tokenizer %s, tuning %s\n",
		mb(rb.Total), mb(rb.PackedWeights), mb(rb.OtherWeights), mb(rb.Scratch), mb(rb.Tokenizer), mb(rb.Tuning))
	fmt.Fprintf(stdout, "int8 here: %s tier: %s (one INT8 artifact serves every tier: it holds full-range u8 x s8 and each tier's kernels are exact on it)\n",
		r.Int8Here.Tier, r.Int8Here.Scheme)
	t := r.Tuning
	switch t.State {
	case "off":
		fmt.Fprintf(stdout, "tuning:    cache off (%s=off): every process tunes each shape on its first call\n", selector.EnvCache)
	case "missing":
		fmt.Fprintf(stdout, "tuning:    no cache yet at %s: each shape is tuned on its first call (int8bert tune fills the cache)\n", t.Cache)
	case "unreadable", "ignored":
		fmt.Fprintf(stdout, "tuning:    cache %s %s: %s\n", t.Cache, t.State, t.Why)
	default:
		fmt.Fprintf(stdout, "tuning:    cache %s: %d choices for the model's %s linears (%s), row buckets %s\n",
			t.Cache, t.Entries, t.Op, strings.Join(t.Shapes, ", "), intsText(t.MBuckets))
		writeKernels(stdout, t)
	}
	return nil
}

// writeKernels prints the cached kernel choices of t, one line per part
// and epilogue kind, consecutive row classes with the same kernel as one
// range ("m1-8 gemmVNNI_4x64").
func writeKernels(w io.Writer, t tuningState) {
	fmt.Fprintf(w, "attention: %s (%s)\n", t.Attention, t.AttnOp)
	if len(t.Kernels) == 0 {
		fmt.Fprintln(w, "kernels:   none cached for one thread yet (tuned on first use, or by int8bert tune --model)")
		return
	}
	label := "kernels:  "
	for i := 0; i < len(t.Kernels); {
		j := i
		for j < len(t.Kernels) && t.Kernels[j].Part == t.Kernels[i].Part && t.Kernels[j].Epilogue == t.Kernels[i].Epilogue {
			j++
		}
		var runs []string
		for a := i; a < j; {
			b := a
			for b+1 < j && t.Kernels[b+1].Kernel == t.Kernels[a].Kernel {
				b++
			}
			m := fmt.Sprintf("m%d", t.Kernels[a].M)
			if b > a {
				m += fmt.Sprintf("-%d", t.Kernels[b].M)
			}
			runs = append(runs, m+" "+t.Kernels[a].Kernel)
			a = b + 1
		}
		fmt.Fprintf(w, "%s %s (%s): %s\n", label, t.Kernels[i].Part, t.Kernels[i].Epilogue, strings.Join(runs, ", "))
		label = "          "
		i = j
	}
}

// summarize sums up a recipe.
func summarize(r *smoothquant.Recipe) *recipeSummary {
	s := &recipeSummary{Mode: r.Mode, Alpha: r.Alpha, Range: r.Range, Percentile: r.Percentile, FallbackSQNR: r.FallbackSQNR,
		CalibTexts: r.CalibTexts, CalibRows: r.CalibRows, CalibHash: r.CalibHash, Source: r.Source,
		Created: r.Created.Format("2006-01-02 15:04:05 MST"), Linears: len(r.Layers), Alphas: map[string]int{}, Versions: r.Versions}
	if s.Range == "" {
		s.Range = smoothquant.RangeMax
	}
	var sqnr []float64
	for _, l := range r.Layers {
		s.Alphas[fmt.Sprintf("%g", l.Alpha)]++
		if l.Fallback {
			s.Fallback++
		}
		if l.Folded {
			s.Folded++
		}
		if !l.Fallback && !math.IsInf(l.SQNR, 1) && !math.IsNaN(l.SQNR) {
			sqnr = append(sqnr, l.SQNR)
		}
	}
	if len(sqnr) > 0 {
		sort.Float64s(sqnr)
		lo, med := sqnr[0], sqnr[len(sqnr)/2]
		s.MinSQNR, s.MedianSQNR = &lo, &med
	}
	return s
}

// tuning reads the selector's cache file and counts its choices for the
// linear layers of a model of shape cfg on operation op.
func tuning(sel *selector.Selector, op string, cfg models.Config, attn models.AttentionMode) tuningState {
	h, inter := cfg.Hidden, cfg.Intermediate
	shapes := [][2]int{{h, 3 * h}, {h, h}, {h, inter}, {inter, h}} // K x N: QKV, O, FFN1, FFN2
	parts := []string{"qkv", "o", "ffn1", "ffn2"}
	t := tuningState{Cache: sel.CachePath(), Op: op, Attention: attn.String(), AttnOp: selector.OpF32Kernel}
	switch attn {
	case models.AttentionInt8:
		t.AttnOp = selector.OpU8S8Kernel
	case models.AttentionBF16:
		t.AttnOp = selector.OpBF16Kernel
	}
	d := selector.BucketM(cfg.Hidden / max(cfg.Heads, 1))
	for _, s := range shapes {
		t.Shapes = append(t.Shapes, fmt.Sprintf("%dx%d", s[0], s[1]))
	}
	if t.Cache == "" {
		t.State = "off"
		return t
	}
	f, err := selector.LoadCacheFile(t.Cache)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.State = "missing"
		return t
	case err != nil:
		t.State, t.Why = "unreadable", err.Error()
		return t
	}
	c, why := f.Section(sel.Header())
	if c == nil {
		t.State, t.Why = "ignored", why+" (re-tuned on first use)"
		return t
	}
	t.State = "valid"
	buckets := map[int]bool{}
	for key, ch := range c.Entries {
		var kop, ep string
		var m, k, n, threads int
		if _, err := fmt.Sscanf(key, "%s m=%d k=%d n=%d ep=%s threads=%d", &kop, &m, &k, &n, &ep, &threads); err != nil {
			continue
		}
		pick := kernelChoice{M: m, Epilogue: ep, Kernel: ch.Kernel, ISA: ch.ISA}
		switch {
		case kop == t.AttnOp && threads == 1 && ((k == d && n == m) || (n == d && k == m)):
			// Q K^T is seq x d x seq, P V seq x seq x d; at seq = d the
			// two keys differ only by the INT8 epilogue (the scores'
			// zero point), and the float ones are one key.
			switch {
			case kop == selector.OpU8S8Kernel && strings.Contains(ep, "zp"):
				pick.Part = "attention scores"
			case kop == selector.OpU8S8Kernel || (n == d && k != d):
				pick.Part = "attention context"
			case m == d:
				pick.Part = "attention scores, context"
			default:
				pick.Part = "attention scores"
			}
		case kop == op:
			for i, s := range shapes {
				if s == [2]int{k, n} {
					t.Entries++
					buckets[m] = true
					if threads == 1 {
						pick.Part = parts[i]
					}
					break
				}
			}
		}
		if pick.Part != "" {
			t.Kernels = append(t.Kernels, pick)
		}
	}
	order := map[string]int{"qkv": 0, "o": 1, "ffn1": 2, "ffn2": 3, "attention scores": 4, "attention scores, context": 5, "attention context": 6}
	sort.Slice(t.Kernels, func(i, j int) bool {
		a, b := t.Kernels[i], t.Kernels[j]
		if a.Part != b.Part {
			return order[a.Part] < order[b.Part]
		}
		if a.Epilogue != b.Epilogue {
			return a.Epilogue < b.Epilogue
		}
		return a.M < b.M
	})
	for m := range buckets {
		t.MBuckets = append(t.MBuckets, m)
	}
	sort.Ints(t.MBuckets)
	return t
}

func alphaText(alphas map[string]int) string {
	var keys []string
	for k := range alphas {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s on %d", k, alphas[k]))
	}
	return "per linear: " + strings.Join(parts, ", ")
}

func rangeText(s *recipeSummary) string {
	out := s.Range
	if s.Range == smoothquant.RangePercentile {
		out += fmt.Sprintf(" %g", s.Percentile)
	}
	if s.FallbackSQNR != 0 {
		out += fmt.Sprintf(", FP32 fallback below %g dB", s.FallbackSQNR)
	}
	return out
}

func dbText(v *float64) string {
	if v == nil {
		return "exact"
	}
	return fmt.Sprintf("%.1f", *v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func intsText(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
