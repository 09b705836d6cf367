package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/tokenizer"
)

// pick is the model a request names ("" is the first), able to serve
// route when need is set.
func (s *Server) pick(name, route string, need func(*model) string) (*model, error) {
	m := s.models[0]
	if name != "" {
		var ok bool
		if m, ok = s.byName[name]; !ok {
			return nil, invalid("model %q is not served here; the models are %s", name, quoted(modelNames(s.models)))
		}
	}
	if need != nil {
		if why := need(m); why != "" {
			// TEI: 424 Backend, counted as te_request_failure{err="model_type"}.
			return nil, labelled("model_type", &apiError{http.StatusFailedDependency, errBackend, fmt.Sprintf("%s: model %q is %s: %s", route, m.name, m.p.Describe(), why)})
		}
	}
	return m, nil
}

func needClassifier(m *model) string {
	if m.p.Task() != models.TaskSequenceClassification {
		return "this route needs a sequence classification model"
	}
	return ""
}

func needReranker(m *model) string {
	if m.p.Task() != models.TaskSequenceClassification || len(m.p.Labels()) != 1 {
		return "this route needs a reranker (a sequence classifier with one label, a cross-encoder)"
	}
	return ""
}

func needMaskedLM(m *model) string {
	if m.p.Task() != models.TaskMaskedLM {
		return "this route needs a masked language model (ForMaskedLM)"
	}
	return ""
}

func needQA(m *model) string {
	if m.p.Task() != models.TaskQuestionAnswering {
		return "this route needs a question answering model"
	}
	return ""
}

// setPrompt sets m's default prompt from c (DefaultPromptName or
// DefaultPrompt): a name the model's prompts lack is an error.
func (m *model) setPrompt(c *Config) error {
	switch {
	case c.DefaultPromptName != "":
		text, err := m.p.Prompt(c.DefaultPromptName)
		if err != nil {
			return fmt.Errorf("serve: model %s (%s): default prompt name (--default-prompt-name): %w", m.name, m.source, err)
		}
		m.prompt = &text
	case c.DefaultPrompt != "":
		text := c.DefaultPrompt
		m.prompt = &text
	}
	return nil
}

// encoding is how a request's inputs are tokenized: TEI's truncate,
// truncation_direction and prompt (nil: none).
type encoding struct {
	truncate bool
	dir      models.TruncationDirection
	prompt   *string
}

// encoding resolves a request's fields for m: truncate (absent: the
// server's AutoTruncate), the direction, and prompt_name (absent: the
// server's default prompt, as TEI's tokenization workers apply it).
func (s *Server) encoding(m *model, truncate *bool, dir direction, promptName *string) (encoding, error) {
	e := encoding{truncate: boolOr(truncate, s.cfg.AutoTruncate), dir: dir.d, prompt: m.prompt}
	if promptName != nil {
		text, err := m.p.Prompt(*promptName)
		if err != nil {
			// TEI's tokenization refuses it, counted as its failure.
			return e, labelled("tokenization", invalid("prompt_name: %v", err))
		}
		e.prompt = &text
	}
	return e, nil
}

// batchedWith takes a permit per input (permits), tokenizes a request's
// inputs as e says on the calling goroutine (at most TokenizationWorkers
// requests at once), queues them as one job, and waits for the instance
// that runs it; fill gets each row.
// It counts the inputs in TEI's te_embed_* or te_predict_* and gives the
// request's timings to its TEI headers.
func (s *Server) batchedWith(ctx context.Context, m *model, inputs []sequence, e encoding,
	fill func(i int, b *models.Batch, r int) error) (tokens int, err error) {
	if err := s.permits.take(len(inputs)); err != nil {
		return 0, err
	}
	defer s.permits.give(len(inputs))
	start := time.Now()
	st := statsOf(ctx)
	fam := s.met.te.family(st, m)
	n := float64(len(inputs))
	fam.count.Add(n)
	s.sched.expect()
	seqs, err := s.encodeWith(ctx, m, inputs, e)
	if err != nil {
		s.sched.drop()
		return 0, countedAs("tokenization", err) // as TEI counts any error of its tokenization
	}
	for _, q := range seqs {
		tokens += q.Len()
	}
	j := &job{ctx: ctx, m: m, seqs: seqs, fill: fill}
	tokenized := time.Now()
	if err := s.sched.submit(j, true); err != nil {
		var ae *apiError
		if errors.As(err, &ae) || ctx.Err() != nil {
			return 0, err
		}
		// The backend failed: TEI counts each input as
		// te_request_failure{err="inference"} and answers 424.
		s.met.te.requestFailure.WithLabelValues("inference").Add(n)
		s.cfg.Logger.Error("serve: inference failed", "model", m.name, "error", err)
		return 0, labelled("", &apiError{http.StatusFailedDependency, errBackend, err.Error()})
	}
	tok := tokenized.Sub(start)
	fam.success.Add(n)
	total := time.Since(start).Seconds()
	for range inputs {
		fam.duration.Observe(total)
		fam.tokenization.Observe(tok.Seconds())
		fam.queue.Observe(j.queued.Seconds())
		fam.inference.Observe(j.inferred.Seconds())
	}
	if st != nil {
		st.add(inputs, tokens, tok, j.queued, j.inferred)
	}
	return tokens, nil
}

// encodeWith tokenizes inputs for m as e says. A prompt with a pair of
// texts is refused, as TEI refuses it; token ids are decoded and
// tokenized again, as TEI does: with a prompt (an empty one included)
// prefixed (models.Pipeline.EncodeIDsAsText), without one with their
// special tokens kept and none added (EncodeIDsRetokenized).
func (s *Server) encodeWith(ctx context.Context, m *model, inputs []sequence, e encoding) ([]models.Sequence, error) {
	select {
	case s.tokens <- struct{}{}:
		defer func() { <-s.tokens }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	start := time.Now()
	defer func() { s.met.tokenize.Observe(time.Since(start).Seconds()) }()
	seqs := make([]models.Sequence, len(inputs))
	eo := models.EncodeOptions{Truncate: e.truncate, Direction: e.dir}
	if e.prompt != nil {
		eo.Prompt = *e.prompt
	}
	for i, in := range inputs {
		what := "input"
		if len(inputs) > 1 {
			what = fmt.Sprintf("input %d", i)
		}
		// TEI refuses an empty input (a text "", a pair of two, no token
		// ids) with 400 Empty before its character limit, counted as a
		// tokenization failure.
		if (in.ids == nil && in.a == "" && (in.b == nil || *in.b == "")) || (in.ids != nil && len(in.ids) == 0) {
			// TEI's message (core/src/tokenization.rs), with the item's
			// index in a batch.
			if len(inputs) > 1 {
				return nil, emptyInput("tokenization", "`inputs` cannot be empty: item %d", i)
			}
			return nil, emptyInput("tokenization", "`inputs` cannot be empty")
		}
		in, err := limitChars(in, m.p.MaxLength(), e.truncate)
		if err != nil {
			return nil, err
		}
		var q models.Sequence
		switch {
		case e.prompt != nil && in.b != nil:
			return nil, invalid("%s: a prompt (prompt_name, or the server's default prompt) cannot be set with a pair of texts", what)
		case in.ids != nil && e.prompt != nil:
			q, err = m.p.EncodeIDsAsText(in.ids, eo) // an empty prompt too, as TEI
		case in.ids != nil:
			q, err = m.p.EncodeIDsRetokenized(in.ids, eo) // as TEI: decoded, then tokenized again
		default:
			q, err = m.p.Encode(in.a, in.b, eo)
		}
		if err != nil {
			var long *models.TooLongError
			if errors.As(err, &long) {
				return nil, labelled("tokenization", invalid("%s must have at most %d tokens (the model's maximum input length); given: %d; set \"truncate\": true to cut it", what, long.Max, long.Tokens))
			}
			if errors.Is(err, models.ErrInput) {
				return nil, &apiError{http.StatusUnprocessableEntity, errTokenizer, fmt.Sprintf("%s: %v", what, err)}
			}
			return nil, err
		}
		s.met.inputsTokens.Observe(float64(q.Len()))
		s.met.te.inputLength.Observe(float64(q.Len()))
		seqs[i] = q
	}
	return seqs, nil
}

// teiCharsPerToken is TEI's MAX_CHAR_MULTIPLIER: before it is tokenized,
// an input of more characters (token ids) than the maximum input length
// times this is refused, or, when it is to be truncated, cut to that many
// bytes (each text of a pair to half of them) where that is a character
// boundary, as TEI's tokenize_input does.
const teiCharsPerToken = 250

// limitChars applies TEI's character limit (teiCharsPerToken) to in.
func limitChars(in sequence, maxLength int, truncate bool) (sequence, error) {
	limit := maxLength * teiCharsPerToken
	n := len(in.ids)
	if in.ids == nil {
		b := 0
		if in.b != nil {
			b = len(*in.b)
		}
		if len(in.a)+b <= limit {
			return in, nil // no more characters than bytes
		}
		n = utf8.RuneCountInString(in.a)
		if in.b != nil {
			n += utf8.RuneCountInString(*in.b)
		}
	}
	switch {
	case n <= limit:
		return in, nil
	case !truncate:
		return in, invalid("`inputs` must have at most %d characters (%d times the maximum input length); given: %d", limit, teiCharsPerToken, n)
	case in.ids != nil:
		return in, nil
	}
	cut := func(s string, l int) string {
		if l < len(s) && utf8.RuneStart(s[l]) {
			return s[:l]
		}
		return s
	}
	if in.b == nil {
		in.a = cut(in.a, limit)
		return in, nil
	}
	b := cut(*in.b, limit/2)
	in.a, in.b = cut(in.a, limit/2), &b
	return in, nil
}

func singles(l []string) []sequence {
	out := make([]sequence, len(l))
	for i, t := range l {
		out[i] = sequence{a: t}
	}
	return out
}

func (s *Server) embed(w http.ResponseWriter, r *http.Request) error {
	var req embedRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	vecs, err := s.embedVectors(r.Context(), &req)
	if err != nil {
		return err
	}
	return writeJSON(w, vecs)
}

// embedVectors computes /embed's answer to req (and gRPC's Embed's, one
// input at a time): it checks the request, then runs its inputs through
// the batcher.
func (s *Server) embedVectors(ctx context.Context, req *embedRequest) ([][]float32, error) {
	m, err := s.pick(req.Model, "/embed", nil)
	if err != nil {
		return nil, err
	}
	teMethodOf(ctx, req.Inputs.single)
	if e := req.Inputs.check("inputs", s.cfg.MaxClientBatchSize); e != nil {
		return nil, e
	}
	// TEI checks dimensions before it tokenizes (a prompt_name the model
	// lacks is its tokenization's error); 0 is its counted Validation, a
	// negative number its JSON's (a usize), which is not counted.
	dims := 0
	if req.Dimensions != nil {
		switch dims = *req.Dimensions; {
		case dims == 0:
			return nil, validation("`dimensions` should be positive; given: %d", dims)
		case dims < 0:
			return nil, invalid("`dimensions` should be positive; given: %d", dims)
		}
	}
	enc, err := s.encoding(m, req.Truncate, req.Direction, req.PromptName)
	if err != nil {
		return nil, err
	}
	norm := req.Normalize.or(true)
	vecs := make([][]float32, len(req.Inputs.list))
	_, err = s.batchedWith(ctx, m, req.Inputs.list, enc,
		func(i int, b *models.Batch, row int) error {
			return embedRow(&vecs[i], b, row, m.pool, norm, dims)
		})
	if err != nil {
		return nil, err
	}
	return vecs, nil
}

// embedRow sets *v to row r's embedding, cut to dims values (0: all)
// then normalised when norm is set, as TEI's dimensions.
func embedRow(v *[]float32, b *models.Batch, r int, pool models.Pooling, norm bool, dims int) error {
	e, err := b.Embedding(r, pool, norm && dims == 0)
	if err != nil || dims == 0 {
		*v = e
		return err
	}
	if *v, err = models.ShortenEmbedding(e, dims, norm); err != nil {
		return validation("`dimensions` %d should be at most the embedding dimension, %d", dims, len(e))
	}
	return nil
}

// predictions are c's labels, best first, as TEI's /predict lists them.
func predictions(m *model, c models.Classification) []prediction {
	out := make([]prediction, len(c.Scores))
	for k, v := range c.Scores {
		out[k] = prediction{Score: v, Label: m.p.Labels()[k]}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Score > out[b].Score })
	return out
}

func (s *Server) predict(w http.ResponseWriter, r *http.Request) error {
	var req predictRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	out, err := s.predictions(r.Context(), &req)
	if err != nil {
		return err
	}
	if req.Inputs.single {
		return writeJSON(w, out[0])
	}
	return writeJSON(w, out)
}

// predictions computes /predict's answer to req (and gRPC's Predict's),
// one list of predictions per input.
func (s *Server) predictions(ctx context.Context, req *predictRequest) ([][]prediction, error) {
	if !req.Inputs.set {
		return nil, invalid("`inputs` is required: a string, a pair [string, string] or a batch [[string], [string, string], ...]")
	}
	// TEI counts the request and checks its size before its Infer checks
	// the model's type: an empty list is 400 on any model.
	teMethodOf(ctx, req.Inputs.single)
	switch n := len(req.Inputs.list); {
	case n == 0:
		return nil, emptyInput("validation", "`inputs` cannot be empty")
	case n > s.cfg.MaxClientBatchSize:
		return nil, tooMany(n, s.cfg.MaxClientBatchSize)
	}
	m, err := s.pick(req.Model, "/predict", needClassifier)
	if err != nil {
		return nil, err
	}
	enc, err := s.encoding(m, req.Truncate, req.Direction, nil)
	if err != nil {
		return nil, err
	}
	o := models.ClassifyOptions{}
	if req.RawScores.v {
		o.FunctionToApply = models.FunctionNone
	}
	out := make([][]prediction, len(req.Inputs.list))
	_, err = s.batchedWith(ctx, m, req.Inputs.list, enc,
		func(i int, b *models.Batch, row int) error {
			c, err := b.Classification(row, o)
			out[i] = predictions(m, c)
			return err
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Server) rerank(w http.ResponseWriter, r *http.Request) error {
	var req rerankRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	// TEI's order: its JSON's refusals (422), an empty list (400 Empty),
	// the model's type (424), then the request is counted and its size
	// checked.
	switch {
	case req.Query == nil:
		return invalid("`query` is required")
	case req.Texts.single:
		return invalid("`texts` must be a list of strings, as TEI's Vec<String>; given one string")
	case req.Texts.set && len(req.Texts.list) == 0:
		return req.Texts.check("texts", s.cfg.MaxClientBatchSize)
	}
	m, err := s.pick(req.Model, "/rerank", needReranker)
	if err != nil {
		return err
	}
	teMethod(r, false) // TEI counts every rerank as a batch
	if e := req.Texts.check("texts", s.cfg.MaxClientBatchSize); e != nil {
		return e
	}
	pairs := make([]sequence, len(req.Texts.list))
	for i := range req.Texts.list {
		pairs[i] = sequence{a: *req.Query, b: &req.Texts.list[i]}
	}
	ranks, err := s.rank(r.Context(), m, pairs, req.Truncate, req.Direction, req.RawScores.v, req.ReturnText.v)
	if err != nil {
		return err
	}
	return writeJSON(w, ranks)
}

// rank scores pairs (a query and a text each) on the reranker m, best
// first, with the text when returnText is set: /rerank's answer once its
// request is checked, and gRPC's Rerank's.
func (s *Server) rank(ctx context.Context, m *model, pairs []sequence, truncate *bool, dir direction, raw, returnText bool) ([]rank, error) {
	o := models.ClassifyOptions{FunctionToApply: models.FunctionSigmoid}
	if raw {
		o.FunctionToApply = models.FunctionNone
	}
	enc, err := s.encoding(m, truncate, dir, nil)
	if err != nil {
		return nil, err
	}
	ranks := make([]rank, len(pairs))
	_, err = s.batchedWith(ctx, m, pairs, enc,
		func(i int, b *models.Batch, row int) error {
			c, err := b.Classification(row, o)
			if err != nil {
				return err
			}
			ranks[i] = rank{Index: i, Score: c.Scores[0]}
			if returnText {
				ranks[i].Text = pairs[i].b
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(ranks, func(a, b int) bool { return ranks[a].Score > ranks[b].Score })
	return ranks, nil
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) error {
	var req tokenizeRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	out, err := s.tokenizeTexts(r.Context(), &req)
	if err != nil {
		return err
	}
	return writeJSON(w, out)
}

// tokenizeTexts computes /tokenize's answer to req (and gRPC's
// Tokenize's): the tokens of each input.
func (s *Server) tokenizeTexts(ctx context.Context, req *tokenizeRequest) ([][]simpleToken, error) {
	m, err := s.pick(req.Model, "/tokenize", nil)
	if err != nil {
		return nil, err
	}
	if e := req.Inputs.check("inputs", s.cfg.MaxClientBatchSize); e != nil {
		return nil, e
	}
	select {
	case s.tokens <- struct{}{}:
		defer func() { <-s.tokens }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	enc, err := s.encoding(m, nil, direction{}, req.PromptName)
	if err != nil {
		return nil, err
	}
	add := req.AddSpecialTokens.or(true)
	out := make([][]simpleToken, len(req.Inputs.list))
	for i, text := range req.Inputs.list {
		if text == "" {
			return nil, emptyInput("tokenization", "input %d cannot be empty", i)
		}
		if _, err := limitChars(sequence{a: text}, m.p.MaxLength(), false); err != nil {
			return nil, countedAs("tokenization", err)
		}
		if enc.prompt != nil {
			// TEI tokenizes the prompted text, and the tokens' text and
			// offsets are those of it.
			text = *enc.prompt + text
		}
		e, err := m.p.Tok.Encode(text, tokenizer.Options{SkipSpecialTokens: !add})
		if err != nil {
			return nil, &apiError{http.StatusUnprocessableEntity, errTokenizer, fmt.Sprintf("input %d: %v", i, err)}
		}
		bytesAt := runeOffsets(text)
		toks := make([]simpleToken, e.Len())
		for k := range toks {
			t := simpleToken{ID: e.IDs[k], Special: e.SpecialTokensMask[k] == 1, Text: e.Tokens[k]}
			if !t.Special {
				lo, hi := bytesAt[e.Offsets[k][0]], bytesAt[e.Offsets[k][1]]
				t.Start, t.Stop = &lo, &hi
				t.Text = text[lo:hi]
			}
			toks[k] = t
		}
		out[i] = toks
	}
	return out, nil
}

// runeOffsets maps rune offsets of text to byte offsets (one past the end
// included).
func runeOffsets(text string) []int {
	at := make([]int, 0, utf8.RuneCountInString(text)+1)
	for i := range text {
		at = append(at, i)
	}
	return append(at, len(text))
}

func (s *Server) qa(w http.ResponseWriter, r *http.Request) error {
	var req qaRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	m, err := s.pick(req.Model, "/qa", needQA)
	if err != nil {
		return err
	}
	switch {
	case req.Question == nil || *req.Question == "":
		return invalid("`question` is required and cannot be empty")
	case req.Context == nil || *req.Context == "":
		return invalid("`context` is required and cannot be empty")
	case req.TopK < 0 || req.TopK > 100:
		return invalid("top_k %d: want 1 to 100 (0 or absent: 1)", req.TopK)
	case req.MaxAnswerLen < 0 || req.DocStride < 0:
		return invalid("max_answer_len and doc_stride cannot be negative")
	}
	if err := s.permits.take(1); err != nil {
		return err
	}
	defer s.permits.give(1)
	var answers []models.Answer
	ctx := r.Context()
	err = s.sched.submit(&job{ctx: ctx, m: m, run: func() error {
		var err error
		answers, err = m.p.Answer(ctx, *req.Question, *req.Context,
			models.QAOptions{NBest: req.TopK, MaxAnswerLength: req.MaxAnswerLen, DocStride: req.DocStride})
		if errors.Is(err, models.ErrInput) {
			// The library names its options' Go fields; the client
			// sent the request's.
			return invalid("%s", qaFieldNames.Replace(err.Error()))
		}
		return err
	}}, false)
	if err != nil {
		return err
	}
	return writeJSON(w, answers)
}

// fillMask is our /fill-mask: Hugging Face's fill-mask pipeline
// (models.Pipeline.FillMask) in its output's shape: for a text, the list
// of candidates {score, token, token_str, sequence} (a list of such
// lists when the text has several masks); for a list of texts, one such
// result each.
func (s *Server) fillMask(w http.ResponseWriter, r *http.Request) error {
	var req fillMaskRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	m, err := s.pick(req.Model, "/fill-mask", needMaskedLM)
	if err != nil {
		return err
	}
	var texts []string
	var one string
	single := json.Unmarshal(req.Inputs, &one) == nil
	switch {
	case single:
		texts = []string{one}
	case json.Unmarshal(req.Inputs, &texts) != nil:
		return invalid("`inputs` must be a text or a list of texts")
	}
	switch {
	case len(texts) == 0:
		return invalid("`inputs` cannot be empty")
	case len(texts) > s.cfg.MaxClientBatchSize && s.cfg.MaxClientBatchSize > 0:
		return invalid("batch size %d > maximum allowed batch size %d", len(texts), s.cfg.MaxClientBatchSize)
	case req.TopK < 0:
		return invalid("top_k %d cannot be negative (0 or absent: %d)", req.TopK, models.DefaultFillMaskTopK)
	}
	if err := s.permits.take(len(texts)); err != nil {
		return err
	}
	defer s.permits.give(len(texts))
	var res []models.FillMaskResult
	ctx := r.Context()
	err = s.sched.submit(&job{ctx: ctx, m: m, run: func() error {
		var err error
		res, err = m.p.FillMask(ctx, texts, models.FillMaskOptions{TopK: req.TopK, Targets: req.Targets})
		if errors.Is(err, models.ErrInput) {
			// The library names its options' Go fields; the client
			// sent the request's.
			return invalid("%s", qaFieldNames.Replace(err.Error()))
		}
		return err
	}}, false)
	if err != nil {
		return err
	}
	if single {
		return writeJSON(w, res[0].HF())
	}
	out := make([]any, len(res))
	for i, x := range res {
		out[i] = x.HF()
	}
	return writeJSON(w, out)
}

// qaFieldNames are QAOptions' fields as /qa's request names them.
var qaFieldNames = strings.NewReplacer("NBest", "top_k", "MaxAnswerLength", "max_answer_len", "DocStride", "doc_stride")
