package serve

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/int8bert/int8bert/models"
)

// model is one served model.
type model struct {
	name, source string
	p            *models.Pipeline
	pool         models.Pooling
	poolFrom     string // where the pooling came from
	// prompt is prefixed to the texts of a request without a prompt_name
	// (Config.DefaultPromptName, DefaultPrompt); nil: none.
	prompt *string
}

// task is the model's task as TEI's /info says it: "embedding",
// "classifier", "reranker" (a classifier with one label) or our
// "question-answering" and "token-classification".
func (m *model) task() string {
	switch m.p.Task() {
	case models.TaskSequenceClassification:
		if len(m.p.Labels()) == 1 {
			return "reranker"
		}
		return "classifier"
	case models.TaskQuestionAnswering:
		return "question-answering"
	case models.TaskTokenClassification:
		return "token-classification"
	}
	// A masked-LM model is an embedding model to TEI: SPLADE with
	// --pooling splade, else pooled as any other.
	return "embedding"
}

// loadModel opens spec with o and finds its pooling.
func loadModel(ctx context.Context, spec ModelSpec, o models.Options, pooling string) (*model, error) {
	p, err := models.Load(ctx, spec.Source, o)
	if err != nil {
		return nil, fmt.Errorf("serve: model %s (%s): %w", spec.Name, spec.Source, err)
	}
	if p.Tok == nil {
		p.Close()
		return nil, fmt.Errorf("serve: model %s (%s) has no tokenizer (tokenizer.json, vocab.txt, vocab.json with merges.txt, spm.model or sentencepiece.bpe.model): the server takes texts: %w", spec.Name, spec.Source, models.ErrConfig)
	}
	m := &model{name: spec.Name, source: spec.Source, p: p}
	m.pool, m.poolFrom = p.Pooling()
	if pooling != "" {
		pl, err := models.ParseTEIPooling(pooling)
		if err != nil {
			p.Close()
			return nil, err
		}
		m.pool, m.poolFrom = pl, "--pooling"
		if pl == models.PoolSplade {
			// TEI's rule: splade pooling on a ForMaskedLM model makes
			// it a SPLADE model (/embed_sparse); on any other, start-up
			// fails.
			if p.Task() != models.TaskMaskedLM {
				p.Close()
				return nil, fmt.Errorf("serve: model %s (%s): Splade pooling is not supported: model is not a ForMaskedLM model (it is %s): %w",
					spec.Name, spec.Source, p.Describe(), models.ErrConfig)
			}
			return m, nil
		}
	}
	if _, err := p.EmbeddingDim(m.pool); err != nil {
		if p.Task() == models.TaskBase {
			p.Close()
			return nil, fmt.Errorf("serve: model %s (%s): %w", spec.Name, spec.Source, err)
		}
		// A classifier's /embed is ours, not TEI's, which ignores
		// --pooling for a classifier: keep the model's own.
		if o.Logger != nil {
			o.Logger.Warn("--pooling does not fit this classifier's embeddings; /embed keeps its own pooling", "model", spec.Name, "err", err)
		}
		m.pool, m.poolFrom = p.Pooling()
	}
	return m, nil
}

// id2label is the classifier's labels as TEI's /info gives them.
func (m *model) id2label() (map[string]string, map[string]int) {
	if m.p.Task() != models.TaskSequenceClassification {
		return nil, nil
	}
	id, label := map[string]string{}, map[string]int{}
	for i, l := range m.p.Labels() {
		id[strconv.Itoa(i)] = l
		label[l] = i
	}
	return id, label
}

// modelNames lists the served models' names, sorted.
func modelNames(ms []*model) []string {
	var n []string
	for _, m := range ms {
		n = append(n, m.name)
	}
	sort.Strings(n)
	return n
}

// routes are the POST routes that answer m by its task, from the same
// checks the handlers make (pick's need functions, needEmbedder and
// splade): what /info's "routes" lists for a client, such as bench
// serve's mixed load, to send m only what it serves. /tokenize and
// /decode answer every model.
func (m *model) routes() []string {
	var r []string
	add := func(route string, ok bool) {
		if ok {
			r = append(r, route)
		}
	}
	task := m.task()
	add("/predict", needClassifier(m) == "")
	add("/rerank", needReranker(m) == "")
	add("/zero-shot", needNLI(m) == "")
	add("/qa", needQA(m) == "")
	add("/ner", needTokenClassifier(m) == "")
	embedding := task == "embedding" && needEmbedder(m) == nil
	for _, route := range []string{"/embed", "/embed_all", "/similarity", "/v1/embeddings", "/embeddings"} {
		add(route, embedding)
	}
	add("/embed_sparse", m.splade())
	add("/fill-mask", needMaskedLM(m) == "" && m.maskToken() != "")
	// /vertex sends an instance to /predict, /rerank, /qa or /embed by
	// the model's task (vertexRoute).
	add("/vertex", task == "classifier" || task == "reranker" || embedding)
	return append(r, "/tokenize", "/decode")
}

// maskToken is the text of m's mask token, "" when its tokenizer has
// none or it has no masked-LM head.
func (m *model) maskToken() string {
	if m.p.Tok == nil || needMaskedLM(m) != "" {
		return ""
	}
	id := m.p.Tok.Special().MASK
	if id < 0 {
		return ""
	}
	return m.p.Tok.Token(id)
}
