package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// "question-answering".
func (m *model) task() string {
	switch m.p.Task() {
	case models.TaskSequenceClassification:
		if len(m.p.Labels()) == 1 {
			return "reranker"
		}
		return "classifier"
	case models.TaskQuestionAnswering:
		return "question-answering"
	}
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
		return nil, fmt.Errorf("serve: model %s (%s) has no tokenizer (tokenizer.json): the server takes texts: %w", spec.Name, spec.Source, models.ErrConfig)
	}
	m := &model{name: spec.Name, source: spec.Source, p: p}
	m.pool, m.poolFrom = models.PoolMean, "default (--pooling)"
	if pooling == "cls" {
		m.pool = models.PoolCLS
	}
	if dir, err := models.ResolveModel(ctx, spec.Source, o.Revision); err == nil {
		if pl, from, ok := sentenceTransformersPooling(dir); ok {
			m.pool, m.poolFrom = pl, from
		}
	}
	return m, nil
}

// sentenceTransformersPooling reads the pooling of a sentence-transformers
// folder (modules.json naming a Pooling module whose config.json sets
// pooling_mode_cls_token or pooling_mode_mean_tokens).
func sentenceTransformersPooling(dir string) (models.Pooling, string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "modules.json"))
	if err != nil {
		return 0, "", false
	}
	var mods []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	}
	if json.Unmarshal(b, &mods) != nil {
		return 0, "", false
	}
	for _, md := range mods {
		if md.Type != "sentence_transformers.models.Pooling" {
			continue
		}
		f := filepath.Join(dir, md.Path, "config.json")
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, "", false
		}
		var c struct {
			CLS  bool `json:"pooling_mode_cls_token"`
			Mean bool `json:"pooling_mode_mean_tokens"`
		}
		if json.Unmarshal(b, &c) != nil {
			return 0, "", false
		}
		switch {
		case c.CLS:
			return models.PoolCLS, f, true
		case c.Mean:
			return models.PoolMean, f, true
		}
	}
	return 0, "", false
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
