package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// The files of a sentence-transformers model folder that Load reads
// (docs/USAGE.md, "sentence-transformers folders").
const (
	// ModulesFile lists the modules: Transformer (the encoder), Pooling,
	// Dense, Normalize.
	ModulesFile = "modules.json"
	// PoolingConfigFile is the Pooling module's config where there is no
	// modules.json (TEI reads it there).
	PoolingConfigFile = "1_Pooling/config.json"
)

// stConfigNames are sentence_bert_config.json and its older names, in
// the order sentence-transformers (models/Transformer.py) and TEI
// (core/src/download.rs) look for them.
var stConfigNames = []string{"sentence_bert_config.json", "sentence_roberta_config.json", "sentence_distilbert_config.json",
	"sentence_camembert_config.json", "sentence_albert_config.json", "sentence_xlm-roberta_config.json", "sentence_xlnet_config.json"}

// The module types of modules.json.
const (
	stTransformer = "sentence_transformers.models.Transformer"
	stPooling     = "sentence_transformers.models.Pooling"
	stDense       = "sentence_transformers.models.Dense"
	stNormalize   = "sentence_transformers.models.Normalize"
)

// sentence is what a sentence-transformers folder says about the
// embeddings: the pooling, the modules after it, the tokenizer's input.
type sentence struct {
	// pool is the model's own pooling (PoolDefault: none, for a family
	// TEI has no default for), from where poolFrom says.
	pool     Pooling
	poolFrom string
	// includePrompt is the Pooling module's include_prompt (true when
	// absent).
	includePrompt bool
	// after are the modules after the pooling, in order: Dense layers
	// and Normalize.
	after []stModule
	// maxSeq is sentence_bert_config.json's max_seq_length (0: none),
	// lower its do_lower_case; config the file read ("" for none).
	maxSeq    int
	lowercase bool
	config    string
}

// stModule is a Dense module, or Normalize when dense is nil.
type stModule struct {
	dense *dense
}

// dense is a sentence-transformers Dense module: y = act(W x + b), at FP32.
type dense struct {
	path    string
	in, out int
	w       []float32 // [out][in]
	b       []float32 // nil without bias
	act     string    // the activation's class name
	f       func(float64) float64
}

// activations are the Dense activations computed here, by the class name
// sentence-transformers saves (torch's fullname).
var activations = map[string]func(float64) float64{
	"torch.nn.modules.activation.Tanh":    math.Tanh,
	"torch.nn.modules.linear.Identity":    func(x float64) float64 { return x },
	"torch.nn.modules.activation.ReLU":    func(x float64) float64 { return max(x, 0) },
	"torch.nn.modules.activation.Sigmoid": func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"torch.nn.modules.activation.GELU":    func(x float64) float64 { return x / 2 * (1 + math.Erf(x/math.Sqrt2)) },
	"torch.nn.modules.activation.SiLU":    func(x float64) float64 { return x / (1 + math.Exp(-x)) },
}

// defaultSentence is the embeddings of a model without a
// sentence-transformers folder: TEI's fallback pooling, which is CLS for
// a model_type naming BERT (router/src/lib.rs; every family here does),
// and none for the others.
func defaultSentence(fam *encoder.Family) *sentence {
	s := &sentence{includePrompt: true}
	if fam == nil {
		return s
	}
	for _, t := range fam.ModelTypes {
		if strings.Contains(strings.ToLower(t), "bert") {
			s.pool, s.poolFrom = PoolCLS, "default (no pooling configuration; TEI's default for BERT-type models)"
		}
	}
	return s
}

// readSentence reads dir's sentence-transformers files for a model of
// family fam with hidden size hidden: modules.json and the modules it
// names (or, without it, 1_Pooling/config.json as TEI reads it), and
// sentence_bert_config.json. A file that is there but malformed, or
// names what is not computed here, is an error wrapping ErrConfig.
func readSentence(dir string, fam *encoder.Family, hidden int) (*sentence, error) {
	s := defaultSentence(fam)
	if err := s.readModules(dir, hidden); err != nil {
		return nil, fmt.Errorf("models: %s: %w", dir, err)
	}
	if err := s.readSTConfig(dir); err != nil {
		return nil, fmt.Errorf("models: %s: %w", dir, err)
	}
	return s, nil
}

// readJSON unmarshals the file at path into v; ok is false when it does
// not exist.
func readJSON(path string, v any) (ok bool, err error) {
	b, err := checkpoint.ReadFileLimited(path, checkpoint.MaxConfigSize, "model folder's JSON file")
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %w", err, ErrConfig)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w: %w", path, err, ErrConfig)
	}
	return true, nil
}

// readModules reads modules.json and its modules, or 1_Pooling/config.json.
func (s *sentence) readModules(dir string, hidden int) error {
	var mods []struct {
		Idx  int    `json:"idx"`
		Name string `json:"name"`
		Path string `json:"path"`
		Type string `json:"type"`
	}
	ok, err := readJSON(filepath.Join(dir, ModulesFile), &mods)
	if err != nil {
		return err
	}
	if !ok {
		_, err := s.readPooling(filepath.Join(dir, PoolingConfigFile), hidden)
		return err
	}
	width := 0 // the width of the sentence embedding so far (0: no pooling yet)
	for i, m := range mods {
		where := fmt.Sprintf("%s: module %d (%s, %q)", ModulesFile, i, m.Type, m.Path)
		if m.Path != "" && !filepath.IsLocal(filepath.FromSlash(m.Path)) || strings.Contains(m.Path, `\`) {
			return fmt.Errorf("%s: the path must stay inside the model folder: %w: %w", where, checkpoint.ErrUnsafePath, ErrConfig)
		}
		switch m.Type {
		case stTransformer:
			if i != 0 {
				return fmt.Errorf("%s: the Transformer module comes first: %w", where, ErrConfig)
			}
		case stPooling:
			if width != 0 {
				return fmt.Errorf("%s: a second Pooling module: %w", where, ErrConfig)
			}
			f := filepath.Join(dir, m.Path, "config.json")
			found, err := s.readPooling(f, hidden)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%s: no %s (%w): %w", where, f, fs.ErrNotExist, ErrConfig)
			}
			width = s.pool.modes() * hidden
		case stDense:
			if width == 0 {
				return fmt.Errorf("%s: a Dense module before the Pooling module: %w", where, ErrConfig)
			}
			d, err := readDense(filepath.Join(dir, m.Path), width)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			width = d.out
			s.after = append(s.after, stModule{dense: d})
		case stNormalize:
			if width == 0 {
				return fmt.Errorf("%s: a Normalize module before the Pooling module: %w", where, ErrConfig)
			}
			s.after = append(s.after, stModule{})
		default:
			if strings.Contains(m.Type, "Splade") || strings.Contains(m.Type, "MLMTransformer") {
				return fmt.Errorf("%s: %w", where, errSplade)
			}
			return fmt.Errorf("%s: not supported (Transformer, Pooling, Dense and Normalize are): %w", where, ErrConfig)
		}
	}
	return nil
}

// readPooling reads a Pooling module's config.json at f (found false
// when there is none) as sentence-transformers' Pooling(**config) takes
// it: pooling_mode, when set, picks one mode; pooling_mode_mean_tokens is
// true when absent.
func (s *sentence) readPooling(f string, hidden int) (found bool, err error) {
	var c struct {
		Dim           *int    `json:"word_embedding_dimension"`
		Mode          *string `json:"pooling_mode"`
		CLS           bool    `json:"pooling_mode_cls_token"`
		Mean          *bool   `json:"pooling_mode_mean_tokens"`
		Max           bool    `json:"pooling_mode_max_tokens"`
		MeanSqrtLen   bool    `json:"pooling_mode_mean_sqrt_len_tokens"`
		WeightedMean  bool    `json:"pooling_mode_weightedmean_tokens"`
		LastToken     bool    `json:"pooling_mode_lasttoken"`
		IncludePrompt *bool   `json:"include_prompt"`
	}
	if ok, err := readJSON(f, &c); !ok || err != nil {
		return false, err
	}
	var p Pooling
	if c.Mode != nil {
		m, err := ParsePooling(*c.Mode)
		if err != nil || m.modes() != 1 || m == PoolSplade {
			return true, fmt.Errorf("%s: pooling_mode %q: want cls, lasttoken, max, mean, mean_sqrt_len_tokens or weightedmean: %w", f, *c.Mode, ErrConfig)
		}
		p = m
	} else {
		for _, b := range []struct {
			on bool
			p  Pooling
		}{{c.CLS, PoolCLS}, {c.Mean == nil || *c.Mean, PoolMean}, {c.Max, PoolMax}, {c.MeanSqrtLen, PoolMeanSqrtLen},
			{c.WeightedMean, PoolWeightedMean}, {c.LastToken, PoolLastToken}} {
			if b.on {
				p |= b.p
			}
		}
	}
	if p == PoolDefault {
		return true, fmt.Errorf("%s: no pooling_mode_* is true: %w", f, ErrConfig)
	}
	if c.Dim != nil && *c.Dim != hidden {
		return true, fmt.Errorf("%s: word_embedding_dimension %d, and the model's hidden size is %d: %w", f, *c.Dim, hidden, ErrConfig)
	}
	s.pool, s.poolFrom = p, f
	s.includePrompt = c.IncludePrompt == nil || *c.IncludePrompt
	return true, nil
}

// readDense reads the Dense module in dir, which takes in values:
// config.json, and the weights linear.weight [out][in] and linear.bias
// in model.safetensors or pytorch_model.bin.
func readDense(dir string, in int) (*dense, error) {
	var c struct {
		In   int     `json:"in_features"`
		Out  int     `json:"out_features"`
		Bias *bool   `json:"bias"`
		Act  *string `json:"activation_function"`
	}
	f := filepath.Join(dir, "config.json")
	ok, err := readJSON(f, &c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no %s (%w): %w", f, fs.ErrNotExist, ErrConfig)
	}
	if c.In <= 0 || c.Out <= 0 {
		return nil, fmt.Errorf("%s: in_features %d, out_features %d: want both positive: %w", f, c.In, c.Out, ErrConfig)
	}
	if c.In != in {
		return nil, fmt.Errorf("%s: in_features %d, and the embedding before it has %d values: %w", f, c.In, in, ErrConfig)
	}
	d := &dense{path: dir, in: c.In, out: c.Out, act: "torch.nn.modules.linear.Identity"}
	if c.Act != nil { // TEI takes a missing activation as Identity
		d.act = *c.Act
	}
	if d.f = activations[d.act]; d.f == nil {
		var names []string
		for n := range activations {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%s: activation_function %q is not supported; supported: %s: %w", f, d.act, strings.Join(names, ", "), ErrConfig)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrConfig)
	}
	defer ck.Close()
	get := func(name string, shape ...int) ([]float32, error) {
		v, sh, err := ck.Float32(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", dir, err, ErrConfig)
		}
		if !slices.Equal(sh, shape) {
			return nil, fmt.Errorf("%s: %s has shape %v, want %v (config.json): %w", dir, name, sh, shape, ErrConfig)
		}
		return slices.Clone(v), nil
	}
	if d.w, err = get("linear.weight", c.Out, c.In); err != nil {
		return nil, err
	}
	if c.Bias == nil || *c.Bias { // sentence-transformers' default is a bias
		if d.b, err = get("linear.bias", c.Out); err != nil {
			return nil, err
		}
	} else if ck.Has("linear.bias") {
		return nil, fmt.Errorf("%s: config.json says bias false, and the weights have linear.bias: %w", dir, ErrConfig)
	}
	return d, nil
}

// readSTConfig reads sentence_bert_config.json (or an older name).
func (s *sentence) readSTConfig(dir string) error {
	for _, n := range stConfigNames {
		var c struct {
			MaxSeq *int `json:"max_seq_length"`
			Lower  bool `json:"do_lower_case"`
		}
		f := filepath.Join(dir, n)
		ok, err := readJSON(f, &c)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if c.MaxSeq != nil {
			if *c.MaxSeq <= 0 {
				return fmt.Errorf("%s: max_seq_length %d: want a positive number of tokens: %w", f, *c.MaxSeq, ErrConfig)
			}
			s.maxSeq = *c.MaxSeq
		}
		s.lowercase, s.config = c.Lower, f
		return nil
	}
	return nil
}

// apply runs v (a pooled vector) through the modules after the pooling:
// Dense layers, and Normalize unless skipNormalize (TEI's way, where a
// request's normalize alone decides). It returns the result (v itself
// when there is no Dense module).
func (s *sentence) apply(v []float32, skipNormalize bool) []float32 {
	for _, m := range s.after {
		if m.dense == nil {
			if !skipNormalize {
				encoder.Normalize(v, 1, len(v))
			}
			continue
		}
		v = m.dense.forward(v)
	}
	return v
}

// forward is act(W x + b), with float64 sums.
func (d *dense) forward(x []float32) []float32 {
	y := make([]float32, d.out)
	for o := range y {
		var s float64
		if d.b != nil {
			s = float64(d.b[o])
		}
		for i, w := range d.w[o*d.in : (o+1)*d.in] {
			s += float64(w) * float64(x[i])
		}
		y[o] = float32(d.f(s))
	}
	return y
}

// width is the embedding's width after the modules when pool gives
// poolWidth values.
func (s *sentence) width(poolWidth int) int {
	for _, m := range s.after {
		if m.dense != nil {
			poolWidth = m.dense.out
		}
	}
	return poolWidth
}

// pyLower lowercases s as Python's str.lower does (sentence-transformers'
// do_lower_case): Unicode's full lowercase mapping, where U+0130 (İ)
// becomes "i̇" and a capital sigma ending a word becomes ς.
func pyLower(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.ToLower(r) != r }) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch {
		case r == 'İ':
			b.WriteString("i\u0307")
		case r == 'Σ' && finalSigma(s, i):
			b.WriteRune('ς')
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma is Unicode's Final_Sigma condition for the sigma at byte i
// of s: a cased letter before it and none after it (skipping
// case-ignorable marks).
func finalSigma(s string, i int) bool {
	cased := func(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }
	ignorable := func(r rune) bool {
		return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) || r == '\'' || r == '.' || r == ':' || r == '\u00b7' || r == '\u2019'
	}
	before := false
	for j := i; j > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if !ignorable(r) {
			before = cased(r)
			break
		}
	}
	if !before {
		return false
	}
	for _, r := range s[i+len("Σ"):] {
		if !ignorable(r) {
			return !cased(r)
		}
	}
	return true
}

// maxLength is the pipeline's MaxLength for the option o (0: the
// default) on a model of at most most tokens: o when set, else
// max_seq_length capped at most (as TEI and sentence-transformers cap
// the input), else 0 (newPipeline's default).
func (s *sentence) maxLength(o, most int) int {
	if o != 0 || s.maxSeq == 0 {
		return o
	}
	return min(s.maxSeq, most)
}

// lower is text lowercased when do_lower_case says so.
func (s *sentence) lower(text string) string {
	if s == nil || !s.lowercase {
		return text
	}
	return pyLower(text)
}

// lowerAll is texts lowercased (a copy) when do_lower_case says so.
func (s *sentence) lowerAll(texts []string) []string {
	if s == nil || !s.lowercase {
		return texts
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = pyLower(t)
	}
	return out
}

// SentenceConfig is what a model folder's sentence-transformers files set
// (Pipeline.Sentence; docs/USAGE.md, "sentence-transformers folders").
type SentenceConfig struct {
	// Pooling is the model's own pooling (what PoolDefault means), and
	// PoolingFrom the file it came from, or the default's reason.
	Pooling     Pooling `json:"pooling"`
	PoolingFrom string  `json:"pooling_from"`
	// IncludePrompt is the Pooling module's include_prompt (true when
	// it has none).
	IncludePrompt bool `json:"include_prompt"`
	// Modules are the modules after the pooling, in order:
	// "Dense(in, out, activation)" and "Normalize".
	Modules []string `json:"modules,omitempty"`
	// Normalize is whether a Normalize module is among them.
	Normalize bool `json:"normalize"`
	// Dim is the width of the model's embeddings (Hidden times the
	// pooling's modes, or the last Dense module's out_features).
	Dim int `json:"dim"`
	// MaxSeqLength and DoLowerCase are sentence_bert_config.json's (0
	// and false without it), read from Config.
	MaxSeqLength int    `json:"max_seq_length,omitempty"`
	DoLowerCase  bool   `json:"do_lower_case,omitempty"`
	Config       string `json:"config,omitempty"`
}

// Sentence is what the model folder's sentence-transformers files set:
// the pooling and where it came from, the modules after it, max length
// and lowercasing.
func (p *Pipeline) Sentence() SentenceConfig {
	s := p.st
	c := SentenceConfig{Pooling: s.pool, PoolingFrom: s.poolFrom, IncludePrompt: s.includePrompt,
		Dim: s.width(s.pool.modes() * p.m.Encoder.Config().Hidden), MaxSeqLength: s.maxSeq, DoLowerCase: s.lowercase, Config: s.config}
	for _, m := range s.after {
		if m.dense == nil {
			c.Modules, c.Normalize = append(c.Modules, "Normalize"), true
			continue
		}
		c.Modules = append(c.Modules, fmt.Sprintf("Dense(%d, %d, %s)", m.dense.in, m.dense.out, m.dense.act))
	}
	return c
}

// Pooling is the model's own pooling (what PoolDefault means: its
// sentence-transformers Pooling module, else TEI's default, CLS) and
// where it came from (the config file, or why the default).
func (p *Pipeline) Pooling() (Pooling, string) { return p.st.pool, p.st.poolFrom }

// EmbeddingDim is the width of Embed's vectors under pool (PoolDefault:
// the model's own): Hidden times pool's modes, or the last Dense
// module's out_features; a pooling Embed refuses is its error.
func (p *Pipeline) EmbeddingDim(pool Pooling) (int, error) {
	if err := p.refuseClosed("EmbeddingDim"); err != nil {
		return 0, err
	}
	pool, err := p.pooling(pool)
	if err != nil {
		return 0, err
	}
	return p.st.width(pool.modes() * p.m.Encoder.Config().Hidden), nil
}

// pooling resolves pool (PoolDefault: the model's own) and checks that
// Embed computes it and that it fits the Dense modules after it.
func (p *Pipeline) pooling(pool Pooling) (Pooling, error) {
	if pool == PoolDefault {
		pool = p.st.pool
		if pool == PoolDefault {
			return 0, fmt.Errorf("models: %s has no pooling configuration (%s), and TEI has no default pooling for it: give one: %w",
				p.Describe(), PoolingConfigFile, ErrConfig)
		}
	}
	if err := pool.check(); err != nil {
		return 0, err
	}
	h := p.m.Encoder.Config().Hidden
	for _, m := range p.st.after {
		if m.dense != nil {
			if w := pool.modes() * h; m.dense.in != w {
				return 0, fmt.Errorf("models: pooling %v gives %d values, and the model's Dense module (%s) takes %d (its pooling is %v): %w",
					pool, w, m.dense.path, m.dense.in, p.st.pool, ErrInput)
			}
			break
		}
	}
	return pool, nil
}

// embedRow is sequence r of out pooled by pool (resolved by
// p.pooling) and run through the modules after it (Normalize too
// unless skipNormalize), then L2-normalised when normalize is set.
// prompt is the number of leading tokens a prompt prefixed to the text
// took, sentence-transformers' prompt_length (the CLS token included):
// a Pooling module whose include_prompt is false leaves them out.
func (p *Pipeline) embedRow(out *encoder.Output, r int, mask []int32, pool Pooling, prompt int, skipNormalize, normalize bool) []float32 {
	h := out.Hidden
	v := make([]float32, pool.modes()*h)
	start, end := out.Rows(r)
	if p.st.includePrompt {
		prompt = 0
	}
	poolRows(v, pool, out.Last, h, start, end, prompt, mask)
	v = p.st.apply(v, skipNormalize)
	if normalize {
		encoder.Normalize(v, 1, len(v))
	}
	return v
}

// resolveSentence fetches into the hub cache the sentence-transformers
// files of the hub model id at revision that Load reads (readSentence):
// modules.json and the files of its Pooling and Dense modules (or, without
// it, 1_Pooling/config.json), and the first of sentence_bert_config.json
// and its older names. A file the repository does not have is skipped.
func resolveSentence(ctx context.Context, hub *checkpoint.Hub, id, revision string) error {
	get := func(file string) (string, bool, error) {
		p, err := hub.Resolve(ctx, id, revision, file)
		switch {
		case err == nil:
			return p, true, nil
		case errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrNotCached):
			return "", false, nil
		}
		return "", false, fmt.Errorf("models: %s: %s: %w", id, file, err)
	}
	mf, ok, err := get(ModulesFile)
	if err != nil {
		return err
	}
	if !ok {
		if _, _, err := get(PoolingConfigFile); err != nil {
			return err
		}
	} else {
		var mods []struct {
			Path string `json:"path"`
			Type string `json:"type"`
		}
		if _, err := readJSON(mf, &mods); err != nil {
			return err
		}
		for i, m := range mods {
			if m.Path != "" && !filepath.IsLocal(filepath.FromSlash(m.Path)) || strings.Contains(m.Path, `\`) {
				return fmt.Errorf("models: %s: %s: module %d (%s, %q): the path must stay inside the repository: %w: %w",
					id, ModulesFile, i, m.Type, m.Path, checkpoint.ErrUnsafePath, ErrConfig)
			}
			if m.Type != stPooling && m.Type != stDense {
				continue
			}
			if _, _, err := get(path.Join(m.Path, "config.json")); err != nil {
				return err
			}
			if m.Type == stDense {
				if _, ok, err := get(path.Join(m.Path, checkpoint.SafetensorsFile)); err != nil || ok {
					if err != nil {
						return err
					}
					continue
				}
				if _, _, err := get(path.Join(m.Path, checkpoint.PytorchFile)); err != nil {
					return err
				}
			}
		}
	}
	for _, n := range stConfigNames {
		if _, ok, err := get(n); err != nil || ok {
			return err
		}
	}
	return nil
}

// saveSentence copies the sentence-transformers files of the model
// folder src into dst (Pipeline.Save): modules.json and the files of the
// module folders it names (or 1_Pooling/config.json),
// sentence_bert_config.json and its older names, and
// config_sentence_transformers.json.
func saveSentence(src, dst string) error {
	if src == "" || src == dst {
		return nil
	}
	files := append([]string{ModulesFile, PoolingConfigFile, "config_sentence_transformers.json"}, stConfigNames...)
	var mods []struct {
		Path string `json:"path"`
	}
	if _, err := readJSON(filepath.Join(src, ModulesFile), &mods); err != nil {
		return err
	}
	for _, m := range mods {
		if m.Path == "" || !filepath.IsLocal(m.Path) {
			continue
		}
		es, err := os.ReadDir(filepath.Join(src, m.Path))
		if err != nil {
			continue // Normalize's folder, say, need not exist
		}
		for _, e := range es {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(m.Path, e.Name()))
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// promptLength is the number of leading tokens of a text prefixed with
// prompt that the pooling leaves out: when the Pooling module's
// include_prompt is false, sentence-transformers' prompt_length (the
// prompt tokenized alone, lowercased and truncated as texts are, less
// its last special token: the CLS token and the prompt's tokens); else,
// or without a prompt, 0. what names the call in errors.
func (p *Pipeline) promptLength(what, prompt string) (int, error) {
	if prompt == "" || p.st == nil || p.st.includePrompt {
		return 0, nil
	}
	tok, err := p.tokenizer(what)
	if err != nil {
		return 0, err
	}
	e, err := tok.Encode(p.st.lower(prompt), tokenizer.Options{InputsOnly: true, MaxLength: p.maxLength, Truncation: tokenizer.LongestFirst})
	if err != nil {
		return 0, fmt.Errorf("models: %s: prompt %q: %w: %w", what, prompt, err, ErrInput)
	}
	return max(e.Len()-1, 0), nil
}
