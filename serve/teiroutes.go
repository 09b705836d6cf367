package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/int8bert/int8bert/models"
)

// TEI's further routes, as its router (server.rs v1.9.3) routes them:
// /embed_all, /embed_sparse, /similarity, /decode, /vertex, POST / and
// /invocations by the model's task, GET / and /ping, and the OpenAPI
// document (docs/USAGE.md, "Routes").

// encodingFields are the fields TEI's embedding requests share besides
// their inputs (EmbedAllRequest, EmbedSparseRequest and
// SimilarityParameters), read and honoured as /embed's: truncate (absent:
// the server's auto-truncate), truncation_direction, prompt_name (absent:
// the server's default prompt).
type encodingFields struct {
	Truncate   *bool     `json:"truncate"`
	Direction  direction `json:"truncation_direction"`
	PromptName *string   `json:"prompt_name"`
}

// encoding resolves f for m, as /embed's fields (Server.encoding).
func (s *Server) encodingOf(m *model, f encodingFields) (encoding, error) {
	return s.encoding(m, f.Truncate, f.Direction, f.PromptName)
}

// needEmbedder is TEI's refusal of an embedding route on a classifier:
// 424 (Backend).
func needEmbedder(m *model) *apiError {
	if m.p.Task() == models.TaskSequenceClassification {
		return &apiError{http.StatusFailedDependency, errBackend, fmt.Sprintf("Model is not an embedding model: model %q is %s", m.name, m.p.Describe())}
	}
	return nil
}

// embedAllRequest is TEI's EmbedAllRequest, and its EmbedSparseRequest,
// which has the same fields.
type embedAllRequest struct {
	Inputs inputs `json:"inputs"`
	encodingFields
	Model string `json:"model"`
}

// readEmbedAll reads and checks an /embed_all or /embed_sparse request.
func (s *Server) readEmbedAll(w http.ResponseWriter, r *http.Request, route string) (*embedAllRequest, *model, error) {
	var req embedAllRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return nil, nil, e
	}
	m, err := s.checkEmbedAll(r.Context(), &req, route)
	return &req, m, err
}

// checkEmbedAll checks an /embed_all or /embed_sparse request (or
// gRPC's) and picks its model.
func (s *Server) checkEmbedAll(ctx context.Context, req *embedAllRequest, route string) (*model, error) {
	m, err := s.pick(req.Model, route, nil)
	if err != nil {
		return nil, err
	}
	teMethodOf(ctx, req.Inputs.single)
	if e := req.Inputs.check("inputs", s.cfg.MaxClientBatchSize); e != nil {
		return nil, e
	}
	return m, nil
}

// embedAll is TEI's /embed_all: the last hidden state of every token of
// each input, special tokens included, unpooled and not normalised.
func (s *Server) embedAll(w http.ResponseWriter, r *http.Request) error {
	req, m, err := s.readEmbedAll(w, r, "/embed_all")
	if err != nil {
		return err
	}
	out, err := s.tokenEmbeddings(r.Context(), m, req)
	if err != nil {
		return err
	}
	return writeJSON(w, out)
}

// tokenEmbeddings computes /embed_all's answer to a checked request (and
// gRPC's EmbedAll's).
func (s *Server) tokenEmbeddings(ctx context.Context, m *model, req *embedAllRequest) ([][][]float32, error) {
	if e := needEmbedder(m); e != nil {
		return nil, e
	}
	enc, err := s.encodingOf(m, req.encodingFields)
	if err != nil {
		return nil, err
	}
	out := make([][][]float32, len(req.Inputs.list))
	_, err = s.batchedWith(ctx, m, req.Inputs.list, enc,
		func(i int, b *models.Batch, row int) (err error) {
			out[i], err = b.TokenEmbeddings(row)
			return err
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// embedSparse is TEI's /embed_sparse: each input's SPLADE vector as its
// non-zero values, [[{"index": i, "value": v}, ...], ...], on a model
// served with splade pooling (a masked-LM model and --pooling splade);
// any other model gets TEI's 424.
func (s *Server) embedSparse(w http.ResponseWriter, r *http.Request) error {
	req, m, err := s.readEmbedAll(w, r, "/embed_sparse")
	if err != nil {
		return err
	}
	out, err := s.sparseEmbeddings(r.Context(), m, req)
	if err != nil {
		return err
	}
	return writeJSON(w, out)
}

// sparseEmbeddings computes /embed_sparse's answer to a checked request
// (and gRPC's EmbedSparse's).
func (s *Server) sparseEmbeddings(ctx context.Context, m *model, req *embedAllRequest) ([][]models.SparseValue, error) {
	if !m.splade() {
		return nil, noSparse(m)
	}
	enc, err := s.encodingOf(m, req.encodingFields)
	if err != nil {
		return nil, err
	}
	out := make([][]models.SparseValue, len(req.Inputs.list))
	_, err = s.batchedWith(ctx, m, req.Inputs.list, enc,
		func(i int, b *models.Batch, row int) (err error) {
			out[i], err = b.Sparse(row)
			return err
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// splade reports whether m is served as a SPLADE model (TEI's is_splade).
func (m *model) splade() bool {
	return m.pool == models.PoolSplade && m.p.Task() == models.TaskMaskedLM
}

// noSparse is TEI's answer to /embed_sparse (and gRPC's EmbedSparse) on
// a model without a SPLADE head: 424 Backend.
func noSparse(m *model) error {
	return &apiError{http.StatusFailedDependency, errBackend,
		fmt.Sprintf("Model is not an embedding model with SPLADE pooling: model %q pools with %s", m.name, m.pool)}
}

type similarityRequest struct {
	Inputs *struct {
		SourceSentence *string   `json:"source_sentence"`
		Sentences      *[]string `json:"sentences"`
	} `json:"inputs"`
	Parameters *encodingFields `json:"parameters"`
	Model      string          `json:"model"`
}

// similarity is TEI's /similarity: the cosine similarity of the source
// sentence's embedding to each sentence's (pooled, not normalised).
func (s *Server) similarity(w http.ResponseWriter, r *http.Request) error {
	var req similarityRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	m, err := s.pick(req.Model, "/similarity", nil)
	if err != nil {
		return err
	}
	switch in := req.Inputs; {
	case in == nil:
		return invalid("`inputs` is required: {\"source_sentence\": string, \"sentences\": [string, ...]}")
	case in.SourceSentence == nil:
		return invalid("`inputs.source_sentence` is required: a string")
	case in.Sentences == nil:
		return invalid("`inputs.sentences` is required: a list of strings")
	case len(*in.Sentences) == 0:
		return emptyInput("validation", "`inputs.sentences` cannot be empty")
	case len(*in.Sentences)+1 > s.cfg.MaxClientBatchSize:
		return invalid("batch size %d > maximum allowed batch size %d (--max-client-batch-size)", len(*in.Sentences)+1, s.cfg.MaxClientBatchSize)
	}
	par := encodingFields{}
	if req.Parameters != nil {
		par = *req.Parameters
	}
	if e := needEmbedder(m); e != nil {
		return e
	}
	enc, err := s.encodingOf(m, par)
	if err != nil {
		return err
	}
	inputs := append([]string{*req.Inputs.SourceSentence}, *req.Inputs.Sentences...)
	vecs := make([][]float32, len(inputs))
	_, err = s.batchedWith(r.Context(), m, singles(inputs), enc,
		func(i int, b *models.Batch, row int) (err error) {
			vecs[i], err = b.Embedding(row, m.pool, false)
			return err
		})
	if err != nil {
		return err
	}
	sims := make([]float32, len(inputs)-1)
	for i := range sims {
		sims[i] = cosineSimilarity(vecs[0], vecs[i+1])
	}
	return writeJSON(w, sims)
}

// cosineSimilarity is 1 minus the cosine distance, as TEI computes it
// (simsimd's distance: 0 for two zero vectors, 1 for one).
func cosineSimilarity(a, b []float32) float32 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	switch {
	case aa == 0 && bb == 0:
		return 1
	case aa == 0 || bb == 0:
		return 0
	}
	return float32(ab / math.Sqrt(aa*bb))
}

// idLists is TEI's InputIds: a list of token ids, or a list of such
// lists.
type idLists struct {
	list   [][]int32
	single bool
	set    bool
}

func (l *idLists) UnmarshalJSON(b []byte) error {
	if l.set = !isNull(b); !l.set {
		return nil // absent
	}
	var one []uint32
	if err := json.Unmarshal(b, &one); err == nil {
		l.list, l.single = [][]int32{toInt32(one)}, true
		return nil
	}
	var many [][]uint32
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a list of token ids [int, ...] or a list of such lists (ids are 0 to 4294967295)")
	}
	l.list = make([][]int32, len(many))
	for i, ids := range many {
		l.list[i] = toInt32(ids)
	}
	return nil
}

// toInt32 maps ids to the tokenizer's int32; one past its range cannot
// be a token and stays out of range (-1).
func toInt32(ids []uint32) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = -1
		if id <= math.MaxInt32 {
			out[i] = int32(id)
		}
	}
	return out
}

type decodeRequest struct {
	IDs               idLists `json:"ids"`
	SkipSpecialTokens *bool   `json:"skip_special_tokens"`
	Model             string  `json:"model"`
}

// decodeIDs is TEI's /decode: each list of ids back into text, without
// the special tokens unless skip_special_tokens is false (TEI's default
// is true); ids outside the vocabulary are left out, as the tokenizers
// library's decode does.
func (s *Server) decodeIDs(w http.ResponseWriter, r *http.Request) error {
	var req decodeRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	out, err := s.decodeLists(&req)
	if err != nil {
		return err
	}
	return writeJSON(w, out)
}

// decodeLists computes /decode's answer to req (and gRPC's Decode's):
// the text of each list of ids.
func (s *Server) decodeLists(req *decodeRequest) ([]string, error) {
	m, err := s.pick(req.Model, "/decode", nil)
	if err != nil {
		return nil, err
	}
	switch {
	case !req.IDs.set:
		return nil, invalid("`ids` is required: a list of token ids or a list of such lists")
	case !req.IDs.single && len(req.IDs.list) > s.cfg.MaxClientBatchSize:
		return nil, invalid("batch size %d > maximum allowed batch size %d (--max-client-batch-size)", len(req.IDs.list), s.cfg.MaxClientBatchSize)
	}
	skip := boolOr(req.SkipSpecialTokens, true)
	out := make([]string, len(req.IDs.list))
	for i, ids := range req.IDs.list {
		if len(ids) == 0 {
			return nil, emptyInput("validation", "`input_ids` cannot be empty")
		}
		text, err := m.p.Tok.Decode(ids, skip)
		if err != nil {
			return nil, &apiError{http.StatusUnprocessableEntity, errTokenizer, err.Error()}
		}
		out[i] = text
	}
	return out, nil
}

// taskRoute is the handler TEI routes POST / and /invocations to for the
// default model's task: /predict for a classifier, /rerank for a
// reranker, /similarity for an embedding model when TASK is
// "sentence-similarity", /embed for the others (and our /qa for a
// question answering model).
func (s *Server) taskRoute(taskEnv string) func(w http.ResponseWriter, r *http.Request) error {
	switch s.models[0].task() {
	case "classifier":
		return s.predict
	case "reranker":
		return s.rerank
	case "question-answering":
		return s.qa
	}
	if s.models[0].splade() {
		return s.embedSparse // TEI: a model with splade pooling
	}
	if taskEnv == "sentence-similarity" {
		return s.similarity
	}
	return s.embed
}

type vertexRequest struct {
	Instances *[]json.RawMessage `json:"instances"`
}

// bufferWriter is the response of one /vertex instance.
type bufferWriter struct {
	h    http.Header
	body bytes.Buffer
}

func (b *bufferWriter) Header() http.Header {
	if b.h == nil {
		b.h = http.Header{}
	}
	return b.h
}
func (b *bufferWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferWriter) WriteHeader(int)             {}

// vertex is TEI's /vertex (Vertex AI's {"instances": [...]}): an instance
// that reads as a rerank request goes to /rerank; the others go where
// the model's task routes them (/predict for a classifier or reranker,
// /embed for an embedding model, our /qa for a question answering one).
// The instances run at once; the answer is {"predictions": [...]} in
// their order, or the first instance's error.
func (s *Server) vertex(w http.ResponseWriter, r *http.Request) error {
	var req vertexRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	if req.Instances == nil {
		return invalid("`instances` is required: a list of requests")
	}
	inst := *req.Instances
	preds := make([]json.RawMessage, len(inst))
	errs := make([]error, len(inst))
	var wg sync.WaitGroup
	for i, raw := range inst {
		h, err := s.vertexRoute(raw)
		if err != nil {
			return inInstance(i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := r.Clone(r.Context())
			sub.Body, sub.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
			var bw bufferWriter
			if errs[i] = h(&bw, sub); errs[i] == nil {
				preds[i] = bytes.TrimSpace(bw.body.Bytes())
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return inInstance(i, err)
		}
	}
	return writeJSON(w, map[string][]json.RawMessage{"predictions": preds})
}

// inInstance says which /vertex instance a refusal is about; a 429
// keeps its Retry-After, and an error that is not a refusal (a backend
// failure) is left as it is.
func inInstance(i int, err error) error {
	var ae *apiError
	var ov *overloaded
	if !errors.As(err, &ae) || errors.As(err, &ov) {
		return err
	}
	return &apiError{ae.status, ae.typ, fmt.Sprintf("instances[%d]: %s", i, ae.msg)}
}

// vertexRoute is the handler of one /vertex instance.
func (s *Server) vertexRoute(raw json.RawMessage) (func(w http.ResponseWriter, r *http.Request) error, error) {
	var rr struct {
		Query *string         `json:"query"`
		Texts json.RawMessage `json:"texts"`
		Model string          `json:"model"`
	}
	if err := json.Unmarshal(raw, &rr); err != nil {
		if _, ok := err.(*json.SyntaxError); ok {
			return nil, invalid("instance: invalid JSON: %v", err)
		}
	}
	var list []string
	if rr.Query != nil && json.Unmarshal(rr.Texts, &list) == nil && list != nil {
		return s.rerank, nil
	}
	m := s.models[0]
	if n, ok := s.byName[rr.Model]; ok {
		m = n
	}
	switch m.task() {
	case "classifier", "reranker":
		return s.predict, nil
	case "question-answering":
		return s.qa, nil
	}
	return s.embed, nil
}

// noRoute answers a path no route has: 405 with Allow for a known path,
// 404 otherwise; both list the routes.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) error {
	routes := routeList()
	if m, ok := routeMethods[r.URL.Path]; ok {
		w.Header().Set("Allow", m)
		return &apiError{http.StatusMethodNotAllowed, errValidation, fmt.Sprintf("%s %s: use %s (%s)", r.Method, r.URL.Path, m, routes)}
	}
	return &apiError{http.StatusNotFound, errValidation, fmt.Sprintf("no route %s %s: %s", r.Method, r.URL.Path, routes)}
}

// routeList is routeMethods in a sentence.
func routeList() string {
	var get, post []string
	for p, m := range routeMethods {
		if strings.Contains(m, "POST") {
			post = append(post, p)
		}
		if strings.Contains(m, "GET") {
			get = append(get, p)
		}
	}
	sort.Strings(get)
	sort.Strings(post)
	return "the routes are POST " + strings.Join(post, ", ") + " and GET " + strings.Join(get, ", ")
}
