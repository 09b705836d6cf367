package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/int8bert/int8bert/models"
)

// nerRequest is our /ner: a text or a list of texts, and the Hugging Face
// token-classification pipeline's aggregation_strategy, ignore_labels
// (absent: ["O"]) and stride (absent: texts truncated).
type nerRequest struct {
	Inputs              json.RawMessage `json:"inputs"`
	AggregationStrategy string          `json:"aggregation_strategy"`
	IgnoreLabels        *[]string       `json:"ignore_labels"`
	Stride              *int            `json:"stride"`
	Model               string          `json:"model"`
}

// zeroShotRequest is our /zero-shot: a text or a list of texts, and the
// zero-shot-classification pipeline's candidate_labels (a list, or a
// comma-separated string), hypothesis_template and multi_label.
type zeroShotRequest struct {
	Inputs             json.RawMessage `json:"inputs"`
	CandidateLabels    json.RawMessage `json:"candidate_labels"`
	HypothesisTemplate string          `json:"hypothesis_template"`
	MultiLabel         bool            `json:"multi_label"`
	Model              string          `json:"model"`
}

// textOrTexts reads inputs that are one text (one is true) or a list of
// them; absent or empty is a validation error.
func textOrTexts(raw json.RawMessage) (texts []string, one bool, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		texts, one = []string{s}, true
	} else if err := json.Unmarshal(raw, &texts); err != nil {
		return nil, false, invalid("`inputs` must be a string or a list of strings")
	}
	if len(texts) == 0 {
		return nil, false, invalid("`inputs` is required and cannot be empty")
	}
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, false, invalid("`inputs` %d is empty", i)
		}
	}
	return texts, one, nil
}

func needTokenClassifier(m *model) string {
	if m.p.Task() != models.TaskTokenClassification {
		return "this route needs a token classification model"
	}
	return ""
}

func needNLI(m *model) string {
	if m.p.Task() != models.TaskSequenceClassification || m.p.EntailmentID() < 0 {
		return "this route needs an NLI sequence classifier (a label of id2label starting with \"entail\")"
	}
	return ""
}

// ner is POST /ner: Pipeline.TokenClassify; a text gets its list of
// entities, a list of texts a list of them, as the pipeline answers.
func (s *Server) ner(w http.ResponseWriter, r *http.Request) error {
	var req nerRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	m, err := s.pick(req.Model, "/ner", needTokenClassifier)
	if err != nil {
		return err
	}
	texts, one, err := textOrTexts(req.Inputs)
	if err != nil {
		return err
	}
	a, err := models.ParseAggregationStrategy(req.AggregationStrategy)
	if err != nil {
		return invalid("%v", err)
	}
	o := models.TokenClassifyOptions{AggregationStrategy: a, Stride: req.Stride}
	if req.IgnoreLabels != nil {
		o.IgnoreLabels = append([]string{}, *req.IgnoreLabels...)
	}
	var res [][]models.Entity
	err = s.runTexts(r, m, len(texts), func() error {
		var err error
		res, err = m.p.TokenClassify(r.Context(), texts, o)
		return err
	})
	if err != nil {
		return err
	}
	if one {
		return writeJSON(w, res[0])
	}
	return writeJSON(w, res)
}

// zeroShot is POST /zero-shot: Pipeline.ZeroShot; a text gets one
// {sequence, labels, scores}, a list of texts a list of them.
func (s *Server) zeroShot(w http.ResponseWriter, r *http.Request) error {
	var req zeroShotRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	m, err := s.pick(req.Model, "/zero-shot", needNLI)
	if err != nil {
		return err
	}
	texts, one, err := textOrTexts(req.Inputs)
	if err != nil {
		return err
	}
	var labels []string
	var s1 string
	switch {
	case len(req.CandidateLabels) == 0:
	case json.Unmarshal(req.CandidateLabels, &s1) == nil:
		labels = models.ParseCandidateLabels(s1)
	case json.Unmarshal(req.CandidateLabels, &labels) != nil:
		return invalid("`candidate_labels` must be a list of strings or a comma-separated string")
	}
	if len(labels) == 0 {
		return invalid("`candidate_labels` is required and cannot be empty")
	}
	o := models.ZeroShotOptions{CandidateLabels: labels, HypothesisTemplate: req.HypothesisTemplate, MultiLabel: req.MultiLabel}
	var res []models.ZeroShotResult
	err = s.runTexts(r, m, len(texts)*len(labels), func() error {
		var err error
		res, err = m.p.ZeroShot(r.Context(), texts, o)
		return err
	})
	if err != nil {
		return err
	}
	if one {
		return writeJSON(w, res[0])
	}
	return writeJSON(w, res)
}

// runTexts runs do on the scheduler holding n permits (one a sequence),
// a library ErrInput answered as a validation error.
func (s *Server) runTexts(r *http.Request, m *model, n int, do func() error) error {
	if err := s.permits.take(n); err != nil {
		return err
	}
	defer s.permits.give(n)
	return s.sched.submit(&job{ctx: r.Context(), m: m, run: func() error {
		err := do()
		if errors.Is(err, models.ErrInput) {
			return invalid("%v", err)
		}
		return err
	}}, false)
}
