package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/deberta"
	"github.com/int8bert/int8bert/models/distilbert"
	"github.com/int8bert/int8bert/models/electra"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/mpnet"
	"github.com/int8bert/int8bert/models/xlmr"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// Options control how a model is loaded and run (Load, New). The zero
// value runs the model as its folder holds it, on the calling goroutine,
// with the process-wide selector, logging nothing. A value outside a
// field's domain is an error (wrapping ErrConfig) that names the value and
// the domain; zero always means the documented default.
type Options struct {
	// Selector runs the linear layers; nil means a process-wide selector
	// with the default tuning cache (selector.Default).
	Selector *selector.Selector
	// Threads per linear layer: 0 is the default (one: the calling
	// goroutine), else 1 to runtime.NumCPU() (more threads than CPUs
	// only slow a GEMM down, docs/DESIGN.md section 7.2).
	Threads int
	// MaxLength bounds every encoding of the pipeline in tokens (special
	// tokens included); longer single texts are truncated. 0 means the
	// max_seq_length of the folder's sentence_bert_config.json (at most
	// the model's longest sequence), else the model's longest sequence,
	// at most 512; otherwise it must leave room
	// for text after the tokenizer's special tokens and be at most the
	// model's longest sequence.
	MaxLength int
	// MaxBatchTokens bounds the work of one forward pass of a pipeline
	// call (Classify, ClassifyPairs, Embed, Answer) in tokens, rows x
	// padded length: a call's inputs are sorted by length and run in
	// micro-batches under it, so its memory is bounded by the budget, not
	// by the number of inputs. 0 means DefaultMaxBatchTokens (2048); a
	// sequence longer than the budget runs alone; negative is an error.
	MaxBatchTokens int
	// Revision of a Hugging Face model id ("" means main).
	Revision string
	// Precision to run at. The zero value (PrecisionAsStored) runs the
	// folder as it is (FP32 weights, or an INT8 artifact). An INT8
	// precision on an FP32 model quantizes it at load: int8-static needs
	// Calib or CalibInputs; int8-dynamic without either quantizes without
	// smoothing. PrecisionBF16 on an FP32 model rounds its linears'
	// weights to bfloat16 at load (a CPU with AVX512-BF16 or AMX-BF16
	// only). An INT8 artifact runs only at its own precision. A value
	// other than the five constants is an error.
	Precision Precision
	// Calib are the calibration texts of an at-load quantization
	// (tokenized with the model's tokenizer, truncated to MaxLength); given
	// when nothing is quantized (an FP32 precision, an INT8 artifact), an
	// error wrapping ErrConfig.
	Calib []string
	// CalibInputs are calibration batches as token ids, for a model
	// folder without a tokenizer; they are used after Calib's batches.
	CalibInputs []*Inputs
	// Quant controls an at-load quantization (alpha, range, fallback,
	// progress); its Source defaults to the path or id loaded. Its zero
	// value is SmoothQuant's defaults (alpha smoothquant.DefaultAlpha).
	Quant QuantizeOptions
	// Profile makes the model count where its forward passes spend their
	// time (Pipeline.Profile; of the FP32 model, Quant.Profile is the
	// quantized model's).
	Profile bool
	// Logger receives the library's notes and warnings (downloads from
	// the Hugging Face hub; the process-wide selector's notes about its
	// tuning cache and oneDNN). nil discards them: the library never
	// writes to stderr by itself.
	Logger *slog.Logger
	// Attention is the arithmetic of an INT8 or bf16 model's attention
	// (docs/DESIGN.md sections 3.9 and 3.10): AttentionAuto (the zero
	// value) is $INT8BERT_ATTENTION ("f32", "int8" or "bf16") when set,
	// else, for an INT8 model, INT8 on CPUs with AVX-512 VNNI or AMX and
	// FP32 elsewhere (where INT8 attention is slower), and bf16 for a
	// bf16 model; AttentionF32 keeps both products and the softmax in
	// FP32, as an FP32 model always runs them. AttentionBF16 is for bf16
	// models only, AttentionInt8 not for them (ErrConfig). It does not
	// change an FP32 model.
	Attention AttentionMode
	// Warmup, when set, warms the loaded pipeline up before Load returns
	// (Pipeline.Warmup with these bounds): every shape its calls will meet
	// is tuned and packed, so that no first call stalls. nil leaves the
	// tuning to the first calls (or to a tuning record next to the model).
	Warmup *WarmupOptions
	// AllowSymlinksOutside lets a model folder hold symlinks that resolve
	// outside it. By default such a folder is refused (ErrConfig and
	// checkpoint.ErrUnsafePath; docs/DESIGN.md section 6.2): a folder is
	// read as a whole, and a link out of it would feed the process any
	// file it can read. A hub cache snapshot's links into its own blobs
	// are inside.
	AllowSymlinksOutside bool
}

// AttentionMode is the arithmetic of an INT8 or bf16 model's attention
// (Options.Attention; docs/DESIGN.md section 3.10).
type AttentionMode int

// The attention modes.
const (
	// AttentionAuto is $INT8BERT_ATTENTION (EnvAttention) when set, else
	// AttentionInt8 where it pays (AVX-512 VNNI or AMX) and AttentionF32
	// elsewhere.
	AttentionAuto = AttentionMode(encoder.AttentionAuto)
	// AttentionF32 runs Q K^T, the softmax and P V in FP32 (what an FP32
	// model always runs).
	AttentionF32 = AttentionMode(encoder.AttentionF32)
	// AttentionInt8 runs Q K^T and P V on the u8 x s8 kernels.
	AttentionInt8 = AttentionMode(encoder.AttentionInt8)
	// AttentionBF16 runs a bf16 model's Q K^T and P V on the BF16
	// kernels (the softmax in FP32): a bf16 model's default.
	AttentionBF16 = AttentionMode(encoder.AttentionBF16)
)

// EnvAttention names the environment variable AttentionAuto reads: "f32",
// "int8" or "bf16" ("" or unset: INT8 models as the CPU makes it pay, bf16
// models in bf16).
const EnvAttention = encoder.EnvAttention

// String is the mode as EnvAttention spells it ("auto" for AttentionAuto).
func (a AttentionMode) String() string { return encoder.AttentionMode(a).String() }

// engine is the part of o the encoder builds and runs the model with.
func (o *Options) engine() encoder.Options {
	eo := encoder.Options{Selector: o.Selector, Threads: o.Threads, Precision: encoder.Precision(o.Precision),
		Logger: o.Logger, Attention: encoder.AttentionMode(o.Attention)}
	if o.Profile {
		eo.Profile = &encoder.Profile{}
	}
	return eo
}

// discard is the logger of Options without one.
var discard = slog.New(slog.DiscardHandler)

// logger is o.Logger, or one that discards.
func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return discard
}

// Check reports an option outside its domain, naming the value and the
// domain (Load checks them first): the engine's (encoder.Options.Check:
// threads, precision, attention), MaxLength's and Quant's.
func (o *Options) Check() error {
	eo := encoder.Options{Threads: o.Threads, Precision: encoder.Precision(o.Precision), Attention: encoder.AttentionMode(o.Attention)}
	if err := eo.Check(); err != nil {
		return err
	}
	if o.MaxLength < 0 {
		return fmt.Errorf("models: options: MaxLength %d: want 0 (the model's longest sequence, at most 512) or a positive number of tokens: %w",
			o.MaxLength, ErrConfig)
	}
	return o.Quant.check()
}

// ResolveModel turns a folder or a Hugging Face model id into a local
// folder holding config.json, the weights and the tokenizer, downloading
// what the hub cache lacks (never with HF_HUB_OFFLINE=1). What looks like
// a path (LooksLikePath) is never looked up on the hub: a missing folder
// is an error wrapping both ErrConfig and fs.ErrNotExist.
func ResolveModel(ctx context.Context, pathOrID, revision string) (string, error) {
	return resolveModel(ctx, pathOrID, revision, discard)
}

// LooksLikePath reports whether s names a local file or folder rather than
// a Hugging Face model id ("name" or "org/name"): it exists, it is empty,
// starts with ".", "/" or "~", holds a backslash or more than one "/",
// ends with "/", or its first element is an existing folder
// ("assets/sst2-xlmr-mini" run from elsewhere than the repository root
// is a missing folder, not a hub id).
func LooksLikePath(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") ||
		strings.HasSuffix(s, "/") || strings.Contains(s, "\\") || strings.Count(s, "/") > 1 || filepath.IsAbs(s) {
		return true
	}
	if _, err := os.Stat(s); err == nil {
		return true
	}
	if first, _, ok := strings.Cut(s, "/"); ok {
		if st, err := os.Stat(first); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// Resolve checks the options and resolves pathOrID as ResolveModel does,
// at o.Revision, logging downloads to o.Logger.
func (o *Options) Resolve(ctx context.Context, pathOrID string) (string, error) {
	if err := o.Check(); err != nil {
		return "", err
	}
	dir, err := resolveModel(ctx, pathOrID, o.Revision, o.logger())
	if err != nil || o.AllowSymlinksOutside {
		return dir, err
	}
	if err := checkpoint.CheckSymlinks(dir); err != nil {
		return "", fmt.Errorf("models: %w: %w", err, ErrConfig)
	}
	return dir, nil
}

// resolveModel is ResolveModel, logging downloads to log.
func resolveModel(ctx context.Context, pathOrID, revision string, log *slog.Logger) (string, error) {
	st, err := os.Stat(pathOrID)
	switch {
	case err == nil && st.IsDir():
		return pathOrID, nil
	case err == nil:
		return "", encoder.Errorf(ErrConfig, "models: %s is a file, not a model folder; give the folder that holds config.json and the weights",
			pathOrID)
	case LooksLikePath(pathOrID):
		if pathOrID == "" {
			return "", encoder.Errorf(ErrConfig, "models: no model given; give a model folder or a Hugging Face model id (owner/name)")
		}
		return "", &encoder.Error{
			Msg:  fmt.Sprintf("models: no such model folder %s; check the path (a Hugging Face model id is owner/name, looked up on the hub)", pathOrID),
			Errs: []error{ErrConfig, fs.ErrNotExist},
		}
	}
	hub := checkpoint.NewHub()
	hub.Progress = nil // the library writes nothing to stderr
	started := map[string]bool{}
	var mu sync.Mutex
	hub.OnProgress = func(file string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if !started[file] {
			started[file] = true
			log.Info("downloading from the Hugging Face hub", "model", pathOrID, "file", file, "bytes", total)
		}
		if total >= 0 && done == total {
			log.Info("downloaded", "model", pathOrID, "file", file, "bytes", done)
		}
	}
	dir, err := hub.ResolveModel(ctx, pathOrID, revision)
	if err != nil {
		return "", fmt.Errorf("models: %q is not a folder, and as a Hugging Face model id: %w", pathOrID, err)
	}
	if _, err := hub.Resolve(ctx, pathOrID, revision, "tokenizer.json"); err != nil {
		if !errors.Is(err, checkpoint.ErrNotFound) {
			return "", fmt.Errorf("models: %s: tokenizer.json: %w", pathOrID, err)
		}
		// Without tokenizer.json: vocab.txt, else a byte-level BPE
		// vocab.json with merges.txt (and added_tokens.json where the
		// repository has one), else a SentencePiece model (converted at
		// load, tokenizer.FromSentencePiece).
		var found error
		name := ""
		for _, name = range []string{"vocab.txt", "vocab.json", "spm.model", "sentencepiece.bpe.model"} {
			_, found = hub.Resolve(ctx, pathOrID, revision, name)
			if found == nil && name == "vocab.json" {
				// Only with merges.txt, as tokenizer.Find takes it.
				_, found = hub.Resolve(ctx, pathOrID, revision, "merges.txt")
			}
			if found == nil || !errors.Is(found, checkpoint.ErrNotFound) {
				break
			}
		}
		if found != nil {
			return "", fmt.Errorf("models: %s: no tokenizer.json, and vocab.txt, vocab.json with merges.txt, spm.model or sentencepiece.bpe.model: %w", pathOrID, found)
		}
		if name == "vocab.json" {
			if _, err := hub.Resolve(ctx, pathOrID, revision, "added_tokens.json"); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
				return "", fmt.Errorf("models: %s: added_tokens.json: %w", pathOrID, err)
			}
		}
		if _, err := hub.Resolve(ctx, pathOrID, revision, "tokenizer_config.json"); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			return "", fmt.Errorf("models: %s: tokenizer_config.json: %w", pathOrID, err)
		}
	}
	if err := resolveSentence(ctx, hub, pathOrID, revision); err != nil {
		return "", err
	}
	return dir, nil
}

// families is the registry: every family Load opens, by config.json's
// model_type (Family.ModelTypes) and architectures (Family.Classes).
var families = []*encoder.Family{bert.Family, distilbert.Family, xlmr.Family, xlmr.RoBERTa, xlmr.CamemBERT, electra.Family, mpnet.Family, deberta.Family}

// Load opens a model from a folder or a Hugging Face model id (config.json,
// the weights, and the tokenizer when there is one), at o.Precision. The
// family comes from config.json's model_type (or, without one, its
// architectures) and the task from its architectures (BertModel,
// BertForSequenceClassification, BertForQuestionAnswering, and the
// DistilBert, XLMRoberta, Roberta, Camembert, Electra and MPNet ones), checked against the heads the
// weights hold; a config without architectures gets the task of its
// weights. An unsupported model_type or architecture is an error wrapping
// ErrConfig that lists what is supported; an option outside its domain is
// an error wrapping ErrConfig that names the value and the domain
// (Options.Check); a missing folder or file also wraps fs.ErrNotExist,
// and a path (LooksLikePath) is never looked up on the Hugging Face hub.
// The pipeline is safe for concurrent use; Close releases it.
func Load(ctx context.Context, pathOrID string, o Options) (*Pipeline, error) {
	dir, err := o.Resolve(ctx, pathOrID)
	if err != nil {
		return nil, err
	}
	cfg, err := checkpoint.LoadConfig(dir)
	if err != nil {
		return nil, encoder.ConfigFileError("models", dir, err)
	}
	fam, err := familyOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", pathOrID, err)
	}
	if o.Quant.Source == "" {
		o.Quant.Source = pathOrID
	}
	return load(ctx, pathOrID, dir, fam, o)
}

// load opens the resolved folder dir as a pipeline of family fam.
func load(ctx context.Context, pathOrID, dir string, fam *encoder.Family, o Options) (*Pipeline, error) {
	p, err := loadPipeline(dir, fam, o, o.engine())
	if err != nil {
		return nil, err
	}
	stored := p.Precision()
	switch {
	case (o.Precision == PrecisionAsStored || o.Precision == stored) && (len(o.Calib) > 0 || len(o.CalibInputs) > 0):
		p.Close()
		return nil, fmt.Errorf("models: %s: calibration (Options.Calib, Options.CalibInputs) is given, but %s runs as stored (%s) and nothing is quantized; "+
			"set Precision to int8-static or int8-dynamic on an FP32 model, or give no calibration: %w", pathOrID, pathOrID, stored, ErrConfig)
	case o.Precision == PrecisionAsStored || o.Precision == stored:
		return warmedUp(ctx, p, o.Warmup)
	case stored.Int8():
		p.Close()
		return nil, fmt.Errorf("models: %s holds an %s model, which cannot run as %s (load the FP32 model to quantize it differently): %w",
			pathOrID, stored, o.Precision, ErrConfig)
	case o.Precision == PrecisionInt8Static && len(o.Calib) == 0 && len(o.CalibInputs) == 0:
		p.Close()
		return nil, fmt.Errorf("models: int8-static on the FP32 model %s needs calibration texts (Options.Calib) or token batches (Options.CalibInputs): %w",
			pathOrID, smoothquant.ErrCalibration)
	}
	q, err := p.quantize(ctx, o.Calib, o.CalibInputs, o.Precision, o.Quant, true)
	p.Close()
	if err != nil {
		return nil, err
	}
	return warmedUp(ctx, q, o.Warmup)
}

// warmedUp is p after Warmup with wo (nil: p as it is, its defaults'
// checks queued: precheckDefaults); a failed warm-up closes p.
func warmedUp(ctx context.Context, p *Pipeline, wo *WarmupOptions) (*Pipeline, error) {
	if wo == nil {
		p.precheckDefaults()
		return p, nil
	}
	if err := p.Warmup(ctx, *wo); err != nil {
		p.Close()
		return nil, fmt.Errorf("models: warm-up at load: %w", err)
	}
	return p, nil
}

// familyOf picks the family of a config: by model_type, else by the
// first architecture's class name.
func familyOf(cfg *checkpoint.Config) (*encoder.Family, error) {
	if cfg.ModelType != "" {
		for _, f := range families {
			if f.HasModelType(cfg.ModelType) {
				return f, nil
			}
		}
		return nil, encoder.Errorf(ErrConfig, "model_type %q (architectures %v) is not supported; supported: %s",
			cfg.ModelType, cfg.Architectures, supported())
	}
	if len(cfg.Architectures) > 0 {
		for _, f := range families {
			if _, ok := f.TaskOf(cfg.Architectures[0]); ok {
				return f, nil
			}
		}
		return nil, encoder.Errorf(ErrConfig, "config.json has no model_type, and architecture %s is not supported; supported: %s",
			cfg.Architectures[0], supported())
	}
	return nil, encoder.Errorf(ErrConfig, "config.json names neither a model_type nor architectures; add the model_type of its Hugging Face repository (supported: %s)", supported())
}

// supported lists the model types and architectures Load opens.
func supported() string {
	var types, archs []string
	for _, f := range families {
		types = append(types, f.ModelTypes...)
		archs = append(archs, f.Architectures()...)
	}
	return "model_type " + strings.Join(types, ", ") + " with architectures " + strings.Join(archs, ", ")
}

// Weights is where a model's tensors come from when they are not in a
// folder (New): every tensor's name, and each as float32 with its shape.
type Weights interface {
	// Names lists every tensor.
	Names() []string
	// Float32 returns a tensor as float32 with its shape.
	Float32(name string) ([]float32, []int, error)
}

// New builds an FP32 (or, with o.Precision PrecisionBF16, BF16) model
// from weights that are not in a folder, such as the random weights of a
// real architecture that bench times: the family comes from cfg's
// model_type (or architectures) as Load picks it, the task from the
// tensors present. It has no tokenizer (Forward runs token ids); Close
// does not close w.
func New(w Weights, cfg *checkpoint.Config, o Options) (*Pipeline, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	fam, err := familyOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	eo := o.engine()
	m, err := encoder.NewTask(w, cfg, fam, eo)
	if err != nil {
		return nil, err
	}
	p, err := newPipeline(m, nil, o.MaxLength, o.MaxBatchTokens)
	if err != nil {
		m.Close()
		return nil, err
	}
	p.prof, p.st = eo.Profile, defaultSentence(fam)
	p.precheckDefaults()
	return p, nil
}
