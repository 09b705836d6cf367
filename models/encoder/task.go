package encoder

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/selector"
)

// Task is what a checkpoint's head computes.
type Task int

// The heads a checkpoint can carry.
const (
	// TaskBase: last hidden state, and the pooler output where the model
	// has a pooler.
	TaskBase Task = iota
	// TaskSequenceClassification: logits per sequence.
	TaskSequenceClassification
	// TaskQuestionAnswering: start and end logits per token.
	TaskQuestionAnswering
	// TaskMaskedLM: logits over the vocabulary per token (fill-mask,
	// SPLADE sparse embeddings).
	TaskMaskedLM
	// TaskTokenClassification: logits per token (NER).
	TaskTokenClassification
	// TaskReplacedTokenDetection: one logit per token, ELECTRA's
	// discriminator (ElectraForPreTraining): positive where the token
	// looks replaced.
	TaskReplacedTokenDetection
)

// String names the task as Hugging Face's class suffix does.
func (t Task) String() string {
	switch t {
	case TaskSequenceClassification:
		return "ForSequenceClassification"
	case TaskQuestionAnswering:
		return "ForQuestionAnswering"
	case TaskMaskedLM:
		return "ForMaskedLM"
	case TaskTokenClassification:
		return "ForTokenClassification"
	case TaskReplacedTokenDetection:
		return "ForPreTraining"
	}
	return "Model"
}

// Head names the task's head in words for messages ("a sequence
// classification head", "no head").
func (t Task) Head() string {
	switch t {
	case TaskSequenceClassification:
		return "a sequence classification head"
	case TaskQuestionAnswering:
		return "a question answering head"
	case TaskMaskedLM:
		return "a masked language modeling head"
	case TaskTokenClassification:
		return "a token classification head"
	case TaskReplacedTokenDetection:
		return "a replaced-token detection head"
	}
	return "no head"
}

// DenseSpec names one dense layer of a head.
type DenseSpec struct {
	Weight, Bias string
	Act          HeadAct
}

// DiscriminatorSpec names a replaced-token detection head (ELECTRA's
// discriminator_predictions): Dense [Hidden][Hidden] with the config's
// hidden_act (its Act is ignored), then Prediction [1][Hidden], one logit
// per token.
type DiscriminatorSpec struct {
	Dense, Prediction DenseSpec
}

// Family describes one model family to the shared loader: how its
// config.json maps onto Config, its tensor names, and its heads.
type Family struct {
	// Name is the family ("bert", "distilbert", "xlm-roberta"), as the
	// INT8 artifact's recipe records it; ModelTypes are the config.json
	// model_type values it accepts.
	Name       string
	ModelTypes []string
	// DisplayName is the family's name in messages ("BERT", "DistilBERT",
	// "XLM-RoBERTa"); "" means Name.
	DisplayName string
	// Classes are the prefixes of its Hugging Face class names ("Bert" of
	// BertModel, BertForSequenceClassification, ...), which config.json's
	// architectures list.
	Classes []string
	// Prefix is the base model's prefix inside task checkpoints
	// ("bert.", "distilbert.", "roberta.").
	Prefix string
	// Config maps config.json onto Config.
	Config func(c *checkpoint.Config) (Config, error)
	// Names gives the encoder's tensor names under a prefix.
	Names func(prefix string) Names
	// Pooler is the pooler's dense layer (under the prefix), if the family
	// has one; PoolerForClassification says the classifier reads the
	// pooler output (BERT) rather than the first token (DistilBERT, XLM-R).
	Pooler                  *DenseSpec
	PoolerForClassification bool
	// Classifier is the sequence classification head, applied in order.
	Classifier []DenseSpec
	// QA is the question answering layer (two outputs: start, end).
	QA DenseSpec
	// MaskedLM is the masked language modeling head; nil if the family
	// has none.
	MaskedLM *MaskedLMSpec
	// TokenClassifier is the token classification layer (one output per
	// label, on every token); its Weight is "" where the family has none.
	// Its tensors may share the names of the sequence classifier's (BERT's
	// "classifier"): config.json's architectures tell the two apart.
	TokenClassifier DenseSpec
	// Discriminator is the replaced-token detection head of the family's
	// pre-training checkpoints; nil where it has none.
	Discriminator *DiscriminatorSpec
	// Ignored are buffers that may be present and are not weights
	// (position_ids), relative to the prefix.
	Ignored []string
}

// TaskModel is an encoder with its head, loaded from a checkpoint. It is
// safe for concurrent use; Close waits for the calls in flight, and any
// call after it returns ErrClosed.
type TaskModel struct {
	Family  *Family
	Task    Task
	Encoder *Model
	// Labels are the class names by index (sequence and token
	// classification): config.json's id2label, LABEL_i where it names none.
	Labels []string
	// ProblemType is config.json's problem_type ("", or one of
	// ProblemRegression, ProblemSingleLabelClassification,
	// ProblemMultiLabelClassification); with the number of labels it picks
	// the scores' function (DefaultFunction).
	ProblemType string

	pooler *Dense
	head   []*Dense
	qa     *Dense
	mlm    *mlmHead
	// closer releases the weights' source (a checkpoint or an artifact).
	closer io.Closer
	cfg    *checkpoint.Config
	src    Source
	prefix string
	// dir is the folder the model was loaded from ("" for weights from
	// memory); artifact is an INT8 model's artifact when it was made by
	// Quantize (a removed temporary file, mapped, or a buffer), for Save.
	dir      string
	artifact *checkpoint.Safetensors
	// g admits calls until Close (lifecycle.go).
	g gate
}

// TaskOutput holds a forward pass's outputs under Hugging Face's names.
type TaskOutput struct {
	*Output
	// PoolerOutput is [Batch][Hidden] where the model has a pooler.
	PoolerOutput []float32
	// Logits is [Batch][labels] (sequence classification), or one row of
	// labels per row of Last (token classification: [Batch][Seq][labels]
	// padded, [sum(Lens)][labels] packed).
	Logits []float32
	// StartLogits and EndLogits are one per row of Last ([Batch][Seq]
	// padded, [sum(Lens)] packed: Output.Rows finds a sequence's).
	StartLogits, EndLogits []float32
	// A masked-LM head's logits are one row of Vocab values per row of
	// Last, in Logits, from Forward; a pipeline's passes leave them out
	// and score the rows they need (MaskedLMLogits, Splade). A
	// replaced-token detection head's are one value per row of Last, in
	// Logits, from Forward alone.
}

// Display is the family's name in messages: DisplayName, else Name.
func (f *Family) Display() string {
	if f.DisplayName != "" {
		return f.DisplayName
	}
	return f.Name
}

// Describe names a model of the family with task t for a user:
// "XLM-RoBERTa with a sequence classification head (XLMRobertaForSequenceClassification)".
func (f *Family) Describe(t Task) string {
	return fmt.Sprintf("%s with %s (%s%s)", f.Display(), t.Head(), f.Classes[0], t)
}

// tasks are the heads a checkpoint can carry, in Task order.
var tasks = []Task{TaskBase, TaskSequenceClassification, TaskQuestionAnswering, TaskMaskedLM, TaskTokenClassification,
	TaskReplacedTokenDetection}

// hasTask reports whether the family can carry the head of task t.
func (f *Family) hasTask(t Task) bool {
	switch t {
	case TaskMaskedLM:
		return f.MaskedLM != nil
	case TaskTokenClassification:
		return f.TokenClassifier.Weight != ""
	case TaskReplacedTokenDetection:
		return f.Discriminator != nil
	}
	return true
}

// Architectures are the Hugging Face class names of the family that the
// loaders open (config.json's architectures), one per class prefix and
// task: BertModel, BertForSequenceClassification, BertForQuestionAnswering.
func (f *Family) Architectures() []string {
	var out []string
	for _, c := range f.Classes {
		for _, t := range tasks {
			if f.hasTask(t) {
				out = append(out, c+t.String())
			}
		}
	}
	return out
}

// HasModelType reports whether the family accepts config.json's model_type t.
func (f *Family) HasModelType(t string) bool {
	for _, m := range f.ModelTypes {
		if m == t {
			return true
		}
	}
	return false
}

// TaskOf returns the task of architecture arch (a Hugging Face class name)
// of the family; ok is false when arch is not one of Architectures.
func (f *Family) TaskOf(arch string) (t Task, ok bool) {
	for _, c := range f.Classes {
		for _, t := range tasks {
			if f.hasTask(t) && arch == c+t.String() {
				return t, true
			}
		}
	}
	return 0, false
}

// declaredTask is the task config.json's architectures name for family
// fam (ok false when it lists none), or an error when it names an
// architecture the family does not support.
func declaredTask(cfg *checkpoint.Config, fam *Family) (t Task, ok bool, err error) {
	if len(cfg.Architectures) == 0 {
		return 0, false, nil
	}
	arch := cfg.Architectures[0]
	if t, ok := fam.TaskOf(arch); ok {
		return t, true, nil
	}
	return 0, false, fmt.Errorf("architecture %s (model_type %q) is not supported; %s supports %s: %w",
		arch, cfg.ModelType, fam.Display(), strings.Join(fam.Architectures(), ", "), ErrConfig)
}

// LoadTask opens the local checkpoint folder dir (config.json and
// weights, or an INT8 artifact) as a model of family fam, working out the
// task from the tensors present, which must be the head config.json's
// architectures name: a missing or unexpected tensor, or an unsupported
// config value, is an error naming it. models.Load is the front door: it
// resolves hub ids, picks the family and adds the tokenizer.
func LoadTask(dir string, fam *Family, o Options) (*TaskModel, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	cfg, err := checkpoint.LoadConfig(dir)
	if err != nil {
		return nil, ConfigFileError("encoder", dir, err)
	}
	// Without a model_type, the architecture must be the family's.
	if cfg.ModelType != "" && !fam.HasModelType(cfg.ModelType) {
		return nil, fmt.Errorf("encoder: %s: model_type %q is not %s (%v): %w", dir, cfg.ModelType, fam.Display(), fam.ModelTypes, ErrConfig)
	}
	want, declared, err := declaredTask(cfg, fam)
	if err != nil {
		return nil, fmt.Errorf("encoder: %s: %w", dir, err)
	}
	if cfg.ModelType == "" && !declared {
		return nil, fmt.Errorf("encoder: %s: config.json names neither a model_type nor architectures (%s takes model_type %v): %w",
			dir, fam.Display(), fam.ModelTypes, ErrConfig)
	}
	ec, err := fam.Config(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoder: %s: %w", dir, err)
	}
	sel, err := o.selectorOf()
	if err != nil {
		return nil, err
	}
	importTuningRecord(sel, dir)
	var m *TaskModel
	if art := filepath.Join(dir, ArtifactFile); fileExists(art) {
		st, err := checkpoint.OpenSafetensors(art)
		if err != nil {
			return nil, weightsError(dir, err)
		}
		if m, err = buildTaskInt8(st, st, cfg, ec, fam, sel, o); err != nil {
			st.Close()
			return nil, fmt.Errorf("encoder: %s: %w", art, err)
		}
		// The linears hold copies of their weights: the file's pages
		// leave the resident set, and those read again (embedding
		// rows, LayerNorms) come back as they are read.
		dropResident(st)
	} else {
		ck, err := checkpoint.Open(dir)
		if err != nil {
			return nil, weightsError(dir, err)
		}
		if m, err = buildTask(ck, ck, cfg, ec, fam, sel, o, nil); err != nil {
			ck.Close()
			return nil, fmt.Errorf("encoder: %s: %w", dir, err)
		}
		dropResident(ck)
	}
	// A pre-training checkpoint without its head is the encoder, as
	// AutoModel opens it.
	if declared && m.Task != want && !(want == TaskReplacedTokenDetection && m.Task == TaskBase) {
		m.Close()
		return nil, fmt.Errorf("encoder: %s: config.json names %s, and the weights hold the head of %s%s: %w",
			dir, cfg.Architectures[0], fam.Classes[0], m.Task, ErrConfig)
	}
	m.dir = dir
	return m, nil
}

// NewTask builds an FP32 model of family fam from weights in src, for
// weights that are not in a folder (models.New: bench's random weights of
// a real architecture); LoadTask opens folders. Close does not close src.
func NewTask(src Source, cfg *checkpoint.Config, fam *Family, o Options) (*TaskModel, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	ec, err := fam.Config(cfg)
	if err != nil {
		return nil, err
	}
	sel, err := o.selectorOf()
	if err != nil {
		return nil, err
	}
	return buildTask(src, nil, cfg, ec, fam, sel, o, nil)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// familyPrefix is the prefix of the base model's tensors in src: the
// family's ("bert.") in task checkpoints, none in base ones.
func familyPrefix(l *Loader, fam *Family) string {
	if l.Has(fam.Prefix + fam.Names("").WordEmb) {
		return fam.Prefix
	}
	return ""
}

// buildTask reads an encoder (newModel, or newEnc when set) and its head from
// src; closer (may be nil) is closed by the model's Close.
func buildTask(src Source, closer io.Closer, cfg *checkpoint.Config, ec Config, fam *Family, sel *selector.Selector, o Options,
	newEnc func(l *Loader, prefix string) (*Model, error)) (*TaskModel, error) {
	l := NewLoader(src)
	prefix := familyPrefix(l, fam)
	var enc *Model
	var err error
	if newEnc != nil {
		enc, err = newEnc(l, prefix)
	} else {
		enc, err = newModel(ec, l, fam.Names(prefix), sel, o)
	}
	if err != nil {
		return nil, err
	}
	m := &TaskModel{Family: fam, Encoder: enc, closer: closer, cfg: cfg, src: src, prefix: prefix}
	for _, ig := range fam.Ignored {
		if l.Has(prefix + ig) {
			l.MarkUsed(prefix + ig)
		}
	}
	h := ec.Hidden
	dense := func(s DenseSpec, pre string, n, k int) *Dense {
		if err != nil {
			return nil
		}
		var d *Dense
		d, err = NewDense(l, sel, pre+s.Weight, pre+s.Bias, n, k, s.Act)
		return d
	}
	if fam.Pooler != nil && l.Has(prefix+fam.Pooler.Weight) {
		m.pooler = dense(*fam.Pooler, prefix, h, h)
	}
	// A token classifier is read where config.json's architectures name
	// one: its tensors may be named as the sequence classifier's.
	wantTok := false
	if t, ok, _ := declaredTask(cfg, fam); ok && t == TaskTokenClassification {
		wantTok = true
	}
	switch {
	case wantTok && l.Has(fam.TokenClassifier.Weight):
		m.Task = TaskTokenClassification
		m.Labels = labelsOf(cfg)
		m.head = append(m.head, dense(fam.TokenClassifier, "", len(m.Labels), h))
	case l.Has(fam.QA.Weight):
		m.Task = TaskQuestionAnswering
		m.qa = dense(fam.QA, "", 2, h)
	case len(fam.Classifier) > 0 && l.Has(fam.Classifier[len(fam.Classifier)-1].Weight):
		m.Task = TaskSequenceClassification
		labels := cfg.NumLabels
		if labels <= 0 {
			labels = 2
		}
		for i, s := range fam.Classifier {
			n := h
			if i == len(fam.Classifier)-1 {
				n = labels
			}
			m.head = append(m.head, dense(s, "", n, h))
		}
		m.Labels = labelsOf(cfg)
		m.ProblemType = cfg.ProblemType
		if err == nil {
			err = checkProblemType(cfg.ProblemType)
		}
		if fam.PoolerForClassification && m.pooler == nil && err == nil {
			err = fmt.Errorf("encoder: the classifier reads the pooler, and %spooler is missing: %w", prefix, ErrConfig)
		}
	case fam.Discriminator != nil && l.Has(fam.Discriminator.Prediction.Weight):
		m.Task = TaskReplacedTokenDetection
		s := fam.Discriminator
		m.head = append(m.head, dense(DenseSpec{s.Dense.Weight, s.Dense.Bias, headActOf(ec.Activation)}, "", h, h),
			dense(s.Prediction, "", 1, h))
	case fam.MaskedLM != nil && l.Has(fam.MaskedLM.LN):
		m.Task = TaskMaskedLM
		if err == nil {
			m.mlm, err = newMLMHead(l, sel, fam, prefix, ec)
		}
	}
	if err == nil {
		if extra := l.Unexpected(); len(extra) > 0 {
			err = fmt.Errorf("encoder: unexpected tensors for %s: %s: %w", fam.Describe(m.Task), strings.Join(extra, ", "), ErrConfig)
		}
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// labelsOf is config.json's class names by index: id2label, LABEL_i
// where it names none, num_labels of them (2 when it is unset).
func labelsOf(cfg *checkpoint.Config) []string {
	n := cfg.NumLabels
	if n <= 0 {
		n = 2
	}
	labels := make([]string, n)
	for i := range labels {
		labels[i] = fmt.Sprintf("LABEL_%d", i)
		if s, ok := cfg.ID2Label[fmt.Sprint(i)]; ok {
			labels[i] = s
		}
	}
	return labels
}

// Forward runs the encoder and the head.
func (m *TaskModel) Forward(in *Inputs, keepHidden bool) (*TaskOutput, error) {
	return m.ForwardContext(context.Background(), in, keepHidden)
}

// ForwardContext is Forward that stops between layers once ctx is done,
// returning ctx.Err() (context.Canceled or context.DeadlineExceeded).
func (m *TaskModel) ForwardContext(ctx context.Context, in *Inputs, keepHidden bool) (*TaskOutput, error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.leave()
	return m.forward(ctx, in, keepHidden, nil)
}

// Dir is the folder the model was loaded from ("" for weights from
// memory).
func (m *TaskModel) Dir() string { return m.dir }

// Enter admits a call on the model that holds it over several passes (a
// pipeline's call: tokenizing, then Stream): Close waits for it, and once
// Close has begun Enter returns ErrClosed. Every successful Enter must be
// paired with a Leave.
func (m *TaskModel) Enter() error { return m.enter() }

// Leave ends a call that Enter admitted.
func (m *TaskModel) Leave() { m.leave() }

// enter admits a call on the model and its encoder (the encoder's Close,
// called on its own, must wait for it too); leave ends it.
func (m *TaskModel) enter() error {
	if err := m.g.enter(); err != nil {
		return err
	}
	if err := m.Encoder.g.enter(); err != nil {
		m.g.leave()
		return err
	}
	return nil
}

func (m *TaskModel) leave() {
	m.Encoder.g.leave()
	m.g.leave()
}

// forward is Forward for a caller that entered m; b are a pipeline call's
// buffers or nil (see Model.forward).
func (m *TaskModel) forward(ctx context.Context, in *Inputs, keepHidden bool, b *buffers) (*TaskOutput, error) {
	return m.forwardLive(ctx, in, keepHidden, b, nil)
}

// forwardLive is forward whose rows may leave the pass between layers
// (Model.forwardLive); the heads then run on the rows left, on the
// kernels chosen for the rows the pass started with.
func (m *TaskModel) forwardLive(ctx context.Context, in *Inputs, keepHidden bool, b *buffers, live *passLive) (*TaskOutput, error) {
	// The heads too are the request's (Model.forwardLive).
	m.Encoder.sel.BeginRequest()
	defer m.Encoder.sel.EndRequest()
	out, err := m.Encoder.forwardLive(ctx, in, keepHidden, nil, b, live)
	if err != nil {
		return nil, err
	}
	// asBatch and asRows are the sequences and rows whose kernels the
	// heads run on (0: their own).
	asBatch, asRows := 0, 0
	if live != nil && live.dropped {
		asBatch, asRows = live.batch0, live.rows0
	}
	r := &TaskOutput{Output: out}
	th, h := m.Encoder.Threads(), out.Hidden
	// The heads read each sequence's first token in place (row stride
	// Seq x Hidden; packed passes gather them first). Within a pipeline call their outputs go to the
	// pass's idle buffers, as Last does, so that a call of many
	// micro-batches makes no garbage per batch; a lone pass allocates.
	var spare headSpare
	if b != nil {
		spare = headSpare{b.qkv, b.f}
	}
	cls, ldc := out.Last, out.Seq*h
	if out.Offsets != nil && (m.pooler != nil || m.Task == TaskSequenceClassification) {
		// Packed (docs/DESIGN.md section 2.2): the first tokens are at
		// the sequences' offsets, no constant stride apart; gather them.
		g := spare.take(out.Batch * h)
		if g == nil {
			g = make([]float32, out.Batch*h)
		}
		for b := 0; b < out.Batch; b++ {
			copy(g[b*h:(b+1)*h], out.Last[out.Offsets[b]*h:])
		}
		cls, ldc = g, h
	}
	if m.pooler != nil {
		if r.PoolerOutput, err = m.pooler.applyAs(spare.take(out.Batch*h), out.Batch, asBatch, cls, ldc, th); err != nil {
			return nil, fmt.Errorf("encoder: pooler: %w", err)
		}
	}
	switch m.Task {
	case TaskSequenceClassification:
		x, ldx := cls, ldc
		if m.Family.PoolerForClassification {
			x, ldx = r.PoolerOutput, h
		}
		for _, d := range m.head {
			if x, err = d.applyAs(spare.take(out.Batch*d.N), out.Batch, asBatch, x, ldx, th); err != nil {
				return nil, fmt.Errorf("encoder: classifier: %w", err)
			}
			ldx = d.N
		}
		r.Logits = x
	case TaskQuestionAnswering:
		rows := out.rows()
		y, err := m.qa.applyAs(spare.take(2*rows), rows, asRows, out.Last, h, th)
		if err != nil {
			return nil, fmt.Errorf("encoder: qa head: %w", err)
		}
		r.StartLogits, r.EndLogits = make([]float32, rows), make([]float32, rows)
		for i := 0; i < rows; i++ {
			r.StartLogits[i], r.EndLogits[i] = y[2*i], y[2*i+1]
		}
	case TaskTokenClassification:
		d := m.head[0]
		if r.Logits, err = d.applyAs(spare.take(out.rows()*d.N), out.rows(), asRows, out.Last, h, th); err != nil {
			return nil, fmt.Errorf("encoder: token classifier: %w", err)
		}
	case TaskReplacedTokenDetection:
		if b != nil {
			break // a pipeline's passes embed; Forward scores
		}
		rows := out.rows()
		x, err := m.head[0].applyAs(nil, rows, asRows, out.Last, h, th)
		if err == nil {
			r.Logits, err = m.head[1].applyAs(nil, rows, asRows, x, h, th)
		}
		if err != nil {
			return nil, fmt.Errorf("encoder: discriminator head: %w", err)
		}
	case TaskMaskedLM:
		if b != nil {
			break // the pipeline scores the rows it needs
		}
		rows := out.rows()
		r.Logits = make([]float32, rows*m.mlm.decoder.N)
		if err := m.mlm.logits(r.Logits, make([]float32, rows*h), rows, out.Last, th); err != nil {
			return nil, fmt.Errorf("encoder: masked-LM head: %w", err)
		}
	}
	return r, nil
}

// headSpare hands out the idle buffers of a pass to its heads: each take
// is a slice no other take overlaps, or nil (the head allocates) once the
// buffers run out.
type headSpare [2][]float32

func (s *headSpare) take(n int) []float32 {
	for i := range s {
		if len(s[i]) >= n {
			y := s[i][:n:n]
			s[i] = s[i][n:]
			return y
		}
	}
	return nil
}

// Close waits for the calls in flight, then releases the model and
// unmaps its checkpoint or artifact; every call after it (or racing with
// it) returns ErrClosed, and a second Close returns nil. It must not be
// called from inside a call on the model (a Progress callback, say): it
// would wait for itself.
func (m *TaskModel) Close() error {
	return m.g.close(func() error {
		// The encoder first: its own Close waits for the calls made on it
		// directly, which read the mapped weights too.
		if m.Encoder != nil {
			m.Encoder.Close()
		}
		for _, d := range append([]*Dense{m.pooler, m.qa}, m.head...) {
			d.Close()
		}
		m.mlm.close()
		if m.closer != nil {
			return m.closer.Close()
		}
		return nil
	})
}
