package serve

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/int8bert/int8bert/models"
)

// The OpenAI-compatible route, POST /v1/embeddings (and TEI's alias
// /embeddings), as TEI's openai_embed answers it, with OpenAI's error
// shape where the two differ (docs/USAGE.md, "Routes").

// openAIRequest is OpenAI's EmbeddingCreateParams (npm openai 7.55.0),
// TEI's OpenAICompatRequest.
type openAIRequest struct {
	Input          inputs  `json:"input"`
	Model          *string `json:"model"`
	EncodingFormat *string `json:"encoding_format"`
	Dimensions     *int    `json:"dimensions"`
	User           *string `json:"user"`
}

type openAIEmbedding struct {
	Object    string `json:"object"`
	Embedding any    `json:"embedding"`
	Index     int    `json:"index"`
}

type openAIUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type openAIResponse struct {
	Object string            `json:"object"`
	Data   []openAIEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  openAIUsage       `json:"usage"`
}

// openAIErrorBody is OpenAI's error response, which its SDKs read the
// message from: {"error": {"message", "type", "param", "code"}}.
type openAIErrorBody struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// paramError is an error (an apiError, or one that wraps one) about one
// request field, OpenAI's "param".
type paramError struct {
	err   error
	param string
}

func (e *paramError) Error() string { return e.err.Error() }
func (e *paramError) Unwrap() error { return e.err }

func invalidParam(param, format string, args ...any) error {
	return &paramError{invalid(format, args...), param}
}

// isOpenAIRoute reports the routes (by metrics name) whose errors take
// OpenAI's shape.
func isOpenAIRoute(route string) bool {
	return route == "/v1/embeddings" || route == "/embeddings" || route == "/v1"
}

// openAIError is ae (the error err resolved to) in OpenAI's shape: "type"
// is OpenAI's class of the status (invalid_request_error for a client's
// error, requests for 429, server_error from 500), "code" TEI's error
// type in lower case, "param" the field at fault when known.
func openAIError(err error, ae *apiError) openAIErrorBody {
	typ := "invalid_request_error"
	switch {
	case ae.status == http.StatusTooManyRequests:
		typ = "requests"
	case ae.status >= 500 || ae.status == http.StatusFailedDependency:
		typ = "server_error"
	}
	code := strings.ToLower(ae.typ)
	d := openAIErrorDetail{Message: ae.msg, Type: typ, Code: &code}
	var pe *paramError
	if errors.As(err, &pe) {
		d.Param = &pe.param
	}
	return openAIErrorBody{Error: d}
}

// openAIModel is the model a request's "model" picks, as TEI treats it: a
// served name picks that model, and so does a model's source (TEI's
// served name is the model id unless set); absent or empty is the
// default model;
// anything else (a hub id the server was not started with,
// "text-embedding-3-small") is answered by the default model, with a
// logged warning, as TEI does.
func (s *Server) openAIModel(name *string) *model {
	if name == nil || *name == "" {
		return s.models[0]
	}
	if m, ok := s.byName[*name]; ok {
		return m
	}
	for _, m := range s.models {
		if m.source == *name {
			return m // TEI's served name defaults to the model id
		}
	}
	s.cfg.Logger.Warn("serve: /v1/embeddings: the requested model is not served; the default model answers",
		"model", *name, "default", s.models[0].name, "served", modelNames(s.models))
	return s.models[0]
}

// float32Base64 is OpenAI's base64 encoding of an embedding: the
// little-endian float32 bytes.
func float32Base64(v []float32) string {
	buf := make([]byte, 4*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint32(buf[4*k:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(buf)
}

func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) error {
	var req openAIRequest
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		return e
	}
	teMethod(r, req.Input.single)
	if e := req.Input.check("input", s.cfg.MaxClientBatchSize); e != nil {
		return &paramError{e, "input"}
	}
	b64 := false
	if f := req.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			b64 = true
		default:
			return invalidParam("encoding_format", "encoding_format %q: want \"float\" or \"base64\"", *f)
		}
	}
	m := s.openAIModel(req.Model)
	// The width after the model's pooling and Dense modules.
	hidden, err := m.p.EmbeddingDim(m.pool)
	if err != nil {
		return err
	}
	dims := 0 // all
	if d := req.Dimensions; d != nil {
		if *d <= 0 {
			return invalidParam("dimensions", "`dimensions` should be positive; given: %d", *d)
		}
		if *d > hidden {
			return invalidParam("dimensions", "`dimensions` should be smaller than the maximum embedding dimension (%d); given: %d", hidden, *d)
		}
		dims = *d
	}
	// As TEI's openai_embed: truncated as --auto-truncate says, on the
	// right, with no prompt_name, so that the server's default prompt
	// applies (TEI's tokenization workers apply it).
	enc, err := s.encoding(m, nil, direction{}, nil)
	if err != nil {
		return err
	}
	vecs := make([][]float32, len(req.Input.list))
	tokens, err := s.batchedWith(r.Context(), m, req.Input.list, enc,
		func(i int, b *models.Batch, row int) error {
			// /embed's rows with normalize set: dimensions cut, then
			// normalise (models.ShortenEmbedding), as TEI.
			return embedRow(&vecs[i], b, row, m.pool, true, dims)
		})
	if err != nil {
		return err
	}
	resp := openAIResponse{Object: "list", Data: make([]openAIEmbedding, len(vecs)), Model: m.name,
		Usage: openAIUsage{PromptTokens: tokens, TotalTokens: tokens}}
	for i, v := range vecs {
		var e any = v
		if b64 {
			e = float32Base64(v)
		}
		resp.Data[i] = openAIEmbedding{Object: "embedding", Embedding: e, Index: i}
	}
	return writeJSON(w, resp)
}
