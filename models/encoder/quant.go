package encoder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// Precision is the arithmetic of an encoder's linear layers.
type Precision int

// The precisions. The zero value means "as the model folder holds it" in
// Options (models.Precision has the same values).
const (
	PrecisionAsStored Precision = iota
	// PrecisionFP32: float32 everywhere.
	PrecisionFP32
	// PrecisionInt8Static: SmoothQuant W8A8 with calibrated per-tensor
	// activation scales, the quantize steps fused into their producers.
	PrecisionInt8Static
	// PrecisionInt8Dynamic: SmoothQuant W8A8 with per-token activation
	// scales computed at run time.
	PrecisionInt8Dynamic
	// PrecisionBF16: the linear layers' weights and inputs rounded to
	// bfloat16, products accumulated in float32; embeddings, LayerNorm,
	// softmax and the heads stay FP32 (docs/DESIGN.md section 3.9). It
	// needs a CPU with AVX512-BF16 or AMX-BF16.
	PrecisionBF16
)

// String is the precision's name on the command line; a value other than
// the five constants is "Precision(N)".
func (p Precision) String() string {
	switch p {
	case PrecisionAsStored:
		return "as-stored"
	case PrecisionFP32:
		return "fp32"
	case PrecisionInt8Static:
		return "int8-static"
	case PrecisionInt8Dynamic:
		return "int8-dynamic"
	case PrecisionBF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// valid reports whether p is one of the five constants.
func (p Precision) valid() bool { return p >= PrecisionAsStored && p <= PrecisionBF16 }

// Int8 reports whether p is an INT8 precision.
func (p Precision) Int8() bool { return p == PrecisionInt8Static || p == PrecisionInt8Dynamic }

// Mode is the SmoothQuant mode of an INT8 precision.
func (p Precision) Mode() smoothquant.Mode {
	if p == PrecisionInt8Static {
		return smoothquant.Static
	}
	return smoothquant.Dynamic
}

// Precision is the precision of the model's linears.
func (m *Model) Precision() Precision { return m.pass.precision() }

// Recipe is how an INT8 model was quantized (nil for FP32).
func (m *Model) Recipe() *smoothquant.Recipe {
	if p, ok := m.pass.(*int8Pass); ok {
		return p.recipe
	}
	return nil
}

// ArtifactFile is the INT8 artifact's name in a model folder: a
// safetensors file with the int8 weights, their scales, the smoothing
// vectors, every FP32 tensor the model still needs, and the recipe in its
// metadata (smoothquant.MetadataKey).
const ArtifactFile = "model.int8.safetensors"

// QuantizeOptions control quantization.
type QuantizeOptions struct {
	// Options are SmoothQuant's (alpha, auto search, range, fallback);
	// Quantize sets Mode from its precision.
	smoothquant.Options
	// SampleRows is how many input rows of each linear the calibration
	// keeps for percentile ranges and the alpha search (0: 256).
	SampleRows int
	// Progress, when set, is called after each calibration batch and
	// each quantized layer.
	Progress func(stage string, done, total int)
	// Source names the quantized model in the recipe.
	Source string
	// Profile, when set, is the INT8 model's profile.
	Profile *Profile
	// CalibTexts and CalibHash describe the calibration data in the recipe
	// (the pipelines of package models fill them).
	CalibTexts int
	CalibHash  string
	// Consume says that the caller closes the FP32 model as soon as
	// Quantize returns (models.Load quantizing at load): its linears are
	// released once the calibration has run, so that their packed
	// weights and the INT8 model's are not held at once. The FP32 model
	// is then good for Close only, whatever Quantize returns.
	Consume bool
	// TempDir is the folder the artifact is written to while it is
	// made ("" : os.TempDir()): a temporary file, removed at once and
	// mapped, so that the artifact is never held whole in memory next to
	// the FP32 model. A folder on the disk the model is saved to (the
	// output folder) is best; where no file can be made there, the
	// artifact is encoded in memory.
	TempDir string
}

// Check reports a quantization option outside its domain, naming the
// value and the domain (the SmoothQuant ones are checked by
// smoothquant.Options.Validate when they are used).
func (q *QuantizeOptions) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("encoder: quantize options: %s: %w", fmt.Sprintf(format, args...), ErrConfig)
	}
	switch n := runtime.NumCPU(); {
	case q.Threads < 0 || q.Threads > n:
		return bad("Threads %d: want 0 (the model's threads) or 1 to %d (the CPUs this process may use)", q.Threads, n)
	case q.SampleRows < 0:
		return bad("SampleRows %d: want 0 (256) or a positive number of rows", q.SampleRows)
	}
	return nil
}

// Calibration holds the observers of every linear's input.
type Calibration struct {
	// Obs[layer][linear] (QKV, O, FFN1, FFN2).
	Obs [][numLin]*smoothquant.Observer
	// Rows is the number of real (unpadded) tokens seen.
	Rows int
}

// Calibrate runs the FP32 model on batches and records the inputs of every
// linear (real tokens only). A done ctx stops it between layers.
func (m *Model) Calibrate(ctx context.Context, batches []*Inputs, sampleRows int, progress func(string, int, int)) (*Calibration, error) {
	if err := m.g.enter(); err != nil {
		return nil, err
	}
	defer m.g.leave()
	if p := m.Precision(); p != PrecisionFP32 {
		return nil, fmt.Errorf("encoder: calibration needs an FP32 model, this one is %s: %w", p, ErrConfig)
	}
	if len(batches) == 0 {
		return nil, fmt.Errorf("encoder: no calibration data: %w", smoothquant.ErrCalibration)
	}
	if sampleRows <= 0 {
		sampleRows = 256
	}
	c := &Calibration{Obs: make([][numLin]*smoothquant.Observer, m.pass.numLayers())}
	dims := linDims(m.cfg)
	for li := range c.Obs {
		for w := 0; w < numLin; w++ {
			c.Obs[li][w] = smoothquant.NewObserver(dims[w][1], sampleRows, uint64(li*numLin+w+1))
		}
	}
	if p, ok := m.pass.(*floatPass); ok {
		// Row counts fall from batch to batch (longest first): a linear
		// whose kernel changes panel width replaces its form.
		p.setSingleForm(true)
		defer p.setSingleForm(false)
	}
	var buf []float32
	obs := func(li, which int, x []float32, k int, mask []int32) error {
		rows := x
		if mask != nil {
			buf = buf[:0]
			for i, mk := range mask {
				if mk != 0 {
					buf = append(buf, x[i*k:(i+1)*k]...)
				}
			}
			rows = buf
		}
		if len(rows) == 0 {
			return nil
		}
		if err := c.Obs[li][which].Observe(rows, len(rows)/k, k); err != nil {
			return fmt.Errorf("layer %d %s input: %w", li, linNames[which], err)
		}
		return nil
	}
	for bi, in := range batches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := m.forward(ctx, in, false, obs, nil); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// A NaN or infinity met on the way (a LayerNorm refuses it
			// before any observer sees it) is bad calibration data too.
			if errors.Is(err, kernels.ErrNonFinite) && !errors.Is(err, smoothquant.ErrCalibration) {
				err = fmt.Errorf("%w: %w", err, smoothquant.ErrCalibration)
			}
			return nil, fmt.Errorf("encoder: calibration batch %d: %w", bi, err)
		}
		c.Rows += in.RealTokens()
		// The batches run longest first, so a linear's row count falls
		// from one to the next and the selector may pick a kernel of
		// another panel width: release the forms this batch did not run
		// on, so that a linear holds one or two, not every width met.
		m.pass.trim(false)
		if progress != nil {
			progress("calibrate", bi+1, len(batches))
		}
	}
	return c, nil
}

// releaseLinears is floatPass.releaseLinears (QuantizeOptions.Consume).
func (m *Model) releaseLinears() {
	if p, ok := m.pass.(*floatPass); ok {
		p.releaseLinears()
	}
}

// linearWeights reads the FP32 weights of layer li's linears again from
// the model's source (see readLinears).
func (m *Model) linearWeights(li int) (w, b [numLin][]float32, err error) {
	return readLinears(NewLoader(m.src), m.names.Layer(li), m.cfg)
}

// layerTensorNames are the FP32 tensors of layer li that the artifact
// replaces with its int8 linears.
func (m *Model) layerTensorNames(li int) []string {
	n := m.names.Layer(li)
	out := []string{n.Q, n.QBias, n.K, n.KBias, n.V, n.VBias, n.O, n.OBias, n.FFN1, n.FFN1Bias, n.FFN2, n.FFN2Bias}
	if m.dis != nil && !m.cfg.Dis.Shared {
		// Replaced by the position projections (disentangled.tables).
		out = append(out, n.PosQ, n.PosQBias, n.PosK, n.PosKBias)
	}
	return out
}

// quantizeLayers quantizes every linear of the FP32 model from its
// calibration; the result is the artifact's int8 tensors and the recipe's
// layers. The O projection's smoothing is folded into V's output channels
// (exact: attention's context is linear in V), so its input needs no
// per-channel multiply.
func (m *Model) quantizeLayers(ctx context.Context, cal *Calibration, o QuantizeOptions) (map[string]checkpoint.Tensor, []smoothquant.LayerRecipe, error) {
	h := m.cfg.Hidden
	dims := linDims(m.cfg)
	tensors := map[string]checkpoint.Tensor{}
	var recipes []smoothquant.LayerRecipe
	layers := m.pass.numLayers()
	for li := range layers {
		// The alpha search of a layer can take seconds: a done ctx stops
		// the quantization between layers.
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		w, b, err := m.linearWeights(li)
		if err != nil {
			return nil, nil, err
		}
		// w and b are copies: the source's pages of this layer are not
		// read again.
		dropResident(m.src)
		spec := func(which int) smoothquant.LinearSpec {
			sp := smoothquant.LinearSpec{Name: qlinPrefix(li, which), N: dims[which][0], K: dims[which][1], W: w[which], Bias: b[which]}
			if cal.Obs != nil {
				sp.Obs = cal.Obs[li][which]
			}
			return sp
		}
		var ql [numLin]*smoothquant.QLinear
		if cal.Obs == nil {
			// Dynamic mode without calibration data: no smoothing, weights
			// per output channel, nothing to measure an SQNR on.
			for which := range ql {
				sp := spec(which)
				q, scale := smoothquant.QuantizeWeights(sp.W, sp.N, sp.K, nil)
				ql[which] = &smoothquant.QLinear{Name: sp.Name, N: sp.N, K: sp.K, W: q, WScale: scale,
					Bias: append([]float32(nil), sp.Bias...)}
				for name, t := range ql[which].Tensors(qlinPrefix(li, which)) {
					tensors[name] = t
				}
				recipes = append(recipes, smoothquant.LayerRecipe{Name: strings.TrimSuffix(qlinPrefix(li, which), ".")})
			}
			continue
		}
		// O first: its smoothing moves into V.
		if ql[linO], err = smoothquant.QuantizeLinear(spec(linO), o.Options); err != nil {
			return nil, nil, fmt.Errorf("encoder: layer %d o: %w", li, err)
		}
		folded := !ql[linO].Fallback && ql[linO].Smooth != nil
		if folded {
			// V's rows are output channels 2H..3H of the fused QKV.
			for j, s := range ql[linO].Smooth {
				inv := 1 / s
				row := w[linQKV][(2*h+j)*h : (2*h+j+1)*h]
				for c := range row {
					row[c] *= inv
				}
				b[linQKV][2*h+j] *= inv
			}
		}
		specs := [numLin]smoothquant.LinearSpec{linQKV: spec(linQKV), linFFN1: spec(linFFN1), linFFN2: spec(linFFN2)}
		// In static mode FFN2's input is requantized by FFN1's epilogue,
		// which has a per-tensor scale only: no per-channel smoothing.
		specs[linFFN2].NoSmooth = o.Mode == smoothquant.Static
		for _, which := range []int{linQKV, linFFN1, linFFN2} {
			if ql[which], err = smoothquant.QuantizeLinear(specs[which], o.Options); err != nil {
				return nil, nil, fmt.Errorf("encoder: layer %d %s: %w", li, linNames[which], err)
			}
		}
		for which, q := range ql {
			for name, t := range q.Tensors(qlinPrefix(li, which)) {
				tensors[name] = t
			}
			recipes = append(recipes, smoothquant.LayerRecipe{Name: strings.TrimSuffix(qlinPrefix(li, which), "."), Alpha: q.Alpha,
				SQNR: q.SQNR, Fallback: q.Fallback, Folded: which == linO && folded})
		}
		// The layer's observers (their reservoirs of rows) are spent.
		cal.Obs[li] = [numLin]*smoothquant.Observer{}
		if o.Progress != nil {
			o.Progress("quantize", li+1, layers)
		}
	}
	return tensors, recipes, nil
}

// Versions are the versions a recipe records.
func Versions() map[string]string {
	v := map[string]string{"go": runtime.Version(), "int8bert": "devel"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range append(bi.Deps, &bi.Main) {
			if d != nil && d.Path == "github.com/int8bert/int8bert" && d.Version != "" {
				v["int8bert"] = d.Version
			}
		}
	}
	return v
}

// Quantize calibrates the FP32 model on batches (token inputs) and returns
// its INT8 twin at precision p, with the same head. The FP32 model is left
// as it was. For int8-static batches must not be empty; int8-dynamic
// without batches quantizes without smoothing (alpha 0), as no activation
// statistics exist. A done ctx stops it between calibration layers and
// batches and between quantized layers, returning ctx.Err().
func (m *TaskModel) Quantize(ctx context.Context, batches []*Inputs, p Precision, o QuantizeOptions) (*TaskModel, error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.leave()
	if !p.Int8() {
		return nil, fmt.Errorf("encoder: quantize to %s: want int8-static or int8-dynamic: %w", p, ErrConfig)
	}
	switch m.Encoder.Precision() {
	case PrecisionFP32:
	case PrecisionBF16:
		return nil, fmt.Errorf("encoder: a bf16 model cannot be quantized (its weights are rounded): quantize the FP32 model: %w", ErrConfig)
	default:
		return nil, fmt.Errorf("encoder: the model is already %s: %w", m.Encoder.Precision(), ErrConfig)
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	// The caller's values as given, before the precision sets the mode.
	if err := o.Options.Validate(); err != nil {
		return nil, err
	}
	if o.Mode != p.Mode() && o.Mode != smoothquant.Dynamic {
		return nil, fmt.Errorf("encoder: quantize options: Mode %v contradicts the precision %s; leave Mode 0, the precision sets it: %w", o.Mode, p, ErrConfig)
	}
	o.Mode = p.Mode()
	if o.Threads == 0 {
		o.Threads = m.Encoder.threads
	}
	if o.Selector == nil {
		o.Selector = m.Encoder.sel // calibration's GEMMs on the model's choices
	}
	if err := o.Options.Validate(); err != nil {
		return nil, err
	}
	var cal *Calibration
	var err error
	switch {
	case len(batches) > 0:
		if cal, err = m.Encoder.Calibrate(ctx, batches, o.SampleRows, o.Progress); err != nil {
			return nil, err
		}
	case p == PrecisionInt8Static:
		return nil, fmt.Errorf("encoder: int8-static needs calibration data: %w", smoothquant.ErrCalibration)
	default:
		// Dynamic without data: no smoothing (quantizeLayers).
		o.Alpha, o.AlphaSet, o.Auto = 0, true, false
		cal = &Calibration{}
	}
	if o.Consume {
		// quantizeLayers reads the FP32 weights from the source again,
		// a layer at a time.
		m.Encoder.releaseLinears()
	}
	tensors, layers, err := m.Encoder.quantizeLayers(ctx, cal, o)
	if err != nil {
		return nil, err
	}
	calRows := cal.Rows
	cal = nil // the observers' samples
	// Every other tensor (embeddings, LayerNorms, heads) stays FP32.
	skip := map[string]bool{}
	for li := range m.Encoder.pass.numLayers() {
		for _, n := range m.Encoder.layerTensorNames(li) {
			skip[n] = true
		}
	}
	for _, ig := range m.Family.Ignored {
		skip[m.prefix+ig] = true
	}
	// The embedding tables the model holds are written from its own
	// slices: read again from a source that makes them (random weights,
	// a torch file) they would be a second copy of the largest tensors.
	// (The loader checked their shapes against the config; the artifact
	// holds F32 either way.)
	type heldTensor struct {
		v     []float32
		shape []int
	}
	held := map[string]heldTensor{}
	if e, h := m.Encoder, m.Encoder.cfg.EmbeddingWidth(); e.names.WordEmb != "" {
		held[e.names.WordEmb] = heldTensor{e.wordEmb, []int{e.cfg.Vocab, h}}
		if e.posEmb != nil {
			held[e.names.PosEmb] = heldTensor{e.posEmb, []int{e.cfg.MaxPositions, h}}
		}
		if e.typeEmb != nil {
			held[e.names.TypeEmb] = heldTensor{e.typeEmb, []int{e.cfg.TypeVocab, h}}
		}
	}
	for _, n := range m.src.Names() {
		if skip[n] {
			continue
		}
		if t, ok := held[n]; ok && len(t.v) == t.shape[0]*t.shape[1] {
			tensors[n] = checkpoint.Float32TensorView(t.shape, t.v)
			continue
		}
		t, err := float32Tensor(m.src, n)
		if err != nil {
			return nil, fmt.Errorf("encoder: tensor %s: %w", n, err)
		}
		tensors[n] = t
	}
	if d := m.Encoder.dis; d != nil {
		// The position projections, made from the FP32 weights: the
		// INT8 model reads them rather than projecting again.
		for n, v := range d.tables() {
			tensors[n] = checkpoint.Float32TensorView([]int{2 * m.Encoder.cfg.Dis.Span, m.Encoder.cfg.Hidden}, v)
		}
	}
	alpha := strconv.FormatFloat(o.FixedAlpha(), 'g', -1, 64)
	if o.Auto {
		alpha = "auto"
	}
	rng := o.Range
	if rng == "" {
		rng = smoothquant.RangeMax
	}
	r := &smoothquant.Recipe{Format: smoothquant.RecipeFormat, Mode: o.Mode.String(), Alpha: alpha, Range: rng,
		Percentile: o.Percentile, FallbackSQNR: o.FallbackSQNR, CalibTexts: o.CalibTexts, CalibHash: o.CalibHash,
		Family: m.Family.Name, ModelType: m.cfg.ModelType, Task: m.Task.String(), Source: o.Source,
		Versions: Versions(), Layers: layers, Created: time.Now().UTC()}
	if len(batches) > 0 {
		r.CalibRows = calRows
	}
	meta, err := r.Encode()
	if err != nil {
		return nil, err
	}
	st, err := writeArtifact(o.TempDir, tensors, map[string]string{smoothquant.MetadataKey: meta, "format": "int8bert"})
	if err != nil {
		return nil, err
	}
	// The artifact holds them now: the int8 tensors' copies go before
	// the INT8 model copies its weights from st, and the FP32 ones,
	// read from the source's mapping, leave the resident set.
	tensors = nil
	dropResident(m.src)
	ec := m.Encoder.cfg
	q, err := buildTaskInt8(st, st, m.cfg, ec, m.Family, m.Encoder.sel, Options{Threads: m.Encoder.threads, Profile: o.Profile, Attention: m.Encoder.attnMode})
	if err != nil {
		st.Close()
		return nil, err
	}
	// Its weights are copied (packed): the artifact's pages go too, and
	// what is read again (embedding rows, LayerNorms) faults back in.
	dropResident(st)
	q.artifact, q.dir = st, m.dir
	return q, nil
}

// float32Tensor is the tensor name of src as an F32 tensor to write: the
// source's own bytes where it holds F32 (a read-only mapping, not
// copied), else its float32 values (a view of them on a little-endian
// host, a little-endian copy elsewhere).
func float32Tensor(src Source, name string) (checkpoint.Tensor, error) {
	if r, ok := src.(interface {
		Raw(string) (checkpoint.TensorInfo, []byte, error)
	}); ok && littleEndian {
		info, b, err := r.Raw(name)
		if err == nil && info.Dtype == checkpoint.F32 {
			return checkpoint.Tensor{Dtype: checkpoint.F32, Shape: slices.Clone(info.Shape), Data: b}, nil
		}
	}
	v, shape, err := src.Float32(name)
	if err != nil {
		return checkpoint.Tensor{}, err
	}
	// A view, not a copy: the artifact's encoding copies it, and a
	// second copy of a 250k-token embedding table is 768 MB at once.
	return checkpoint.Float32TensorView(shape, v), nil
}

// littleEndian says whether this machine stores a float32 as the
// safetensors format does.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// dropResident releases the mapped pages of src (checkpoint's
// DropResident) where it maps a file: weights already copied (packed,
// quantized) are not held twice; what is read again faults back in.
func dropResident(src any) {
	if d, ok := src.(interface{ DropResident() error }); ok {
		_ = d.DropResident() // advice only
	}
}

// int8Source is what an INT8 model is read from: a parsed artifact.
type int8Source interface {
	Source
	Int8(name string) ([]int8, []int, error)
	Metadata() map[string]string
}

// buildTaskInt8 reads an INT8 model and its head from the artifact st.
func buildTaskInt8(st int8Source, closer io.Closer, cfg *checkpoint.Config, ec Config, fam *Family,
	sel *selector.Selector, o Options) (*TaskModel, error) {
	meta := st.Metadata()[smoothquant.MetadataKey]
	if meta == "" {
		return nil, fmt.Errorf("encoder: not an int8bert artifact (no %q metadata): %w", smoothquant.MetadataKey, ErrConfig)
	}
	r, err := smoothquant.DecodeRecipe(meta)
	if err != nil {
		return nil, err
	}
	mode, err := smoothquant.ParseMode(r.Mode)
	if err != nil {
		return nil, err
	}
	if r.Family != "" && r.Family != fam.Name {
		return nil, fmt.Errorf("encoder: the artifact was made for the %s family, not %s (%s): %w", r.Family, fam.Display(), fam.Name, ErrConfig)
	}
	if want := ec.Layers * numLin; len(r.Layers) != want {
		return nil, fmt.Errorf("encoder: the artifact's recipe lists %d linears, the config's %d layers have %d: %w",
			len(r.Layers), ec.Layers, want, ErrConfig)
	}
	newEnc := func(l *Loader, prefix string) (*Model, error) {
		names := fam.Names(prefix)
		p := &int8Pass{mode: mode, recipe: r}
		m, err := newBase(ec, l, names, sel, o, p)
		if err != nil {
			return nil, err
		}
		p.attn8 = m.attnMode == AttentionInt8
		h, dims := ec.Hidden, linDims(ec)
		for li := 0; li < ec.Layers; li++ {
			n := names.Layer(li)
			var ly qlayer
			get := func(dst *[]float32, name string, shape ...int) {
				if err == nil {
					*dst, err = l.Get(name, shape...)
				}
			}
			get(&ly.attnLN, n.AttnLN, h)
			get(&ly.attnLNBias, n.AttnLNBias, h)
			get(&ly.outLN, n.OutLN, h)
			get(&ly.outLNBias, n.OutLNBias, h)
			for which := 0; which < numLin && err == nil; which++ {
				prefix := qlinPrefix(li, which)
				var q *smoothquant.QLinear
				if q, err = smoothquant.LoadQLinear(st, prefix, dims[which][0], dims[which][1], mode); err != nil {
					break
				}
				lr := r.Layers[li*numLin+which]
				q.Alpha, q.SQNR = lr.Alpha, lr.SQNR
				for _, name := range l.src.Names() {
					if strings.HasPrefix(name, prefix) {
						l.MarkUsed(name)
					}
				}
				ly.lin[which], err = newQlin(sel, q, which == linO && lr.Folded)
			}
			p.layers = append(p.layers, ly)
			if err != nil {
				m.Close()
				return nil, fmt.Errorf("encoder: layer %d: %w", li, err)
			}
		}
		return m, nil
	}
	return buildTask(st, closer, cfg, ec, fam, sel, o, newEnc)
}
