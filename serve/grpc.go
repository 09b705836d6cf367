package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/serve/teipb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// TEI's gRPC API (package tei.v1 of TEI v1.9.3's proto/tei.proto, its
// router/src/grpc/server.rs), served beside the HTTP routes by the same
// Server: the same models, scheduler, permits and metrics, through the
// same functions as the HTTP handlers (docs/DESIGN.md section 9.8). Each
// RPC builds the HTTP route's request from its message and calls what
// the route calls, so that a gRPC Embed and an HTTP /embed of the same
// input give the same vector.

// grpcServices are the tei.v1 services, for the API key's guard and the
// health service.
const (
	grpcInfo     = "tei.v1.Info"
	grpcEmbed    = "tei.v1.Embed"
	grpcPredict  = "tei.v1.Predict"
	grpcRerank   = "tei.v1.Rerank"
	grpcTokenize = "tei.v1.Tokenize"
)

// newGRPC builds the gRPC server: tei.v1's services, the standard health
// service and reflection; with an API key, the tei.v1 services want
// "authorization: Bearer <key>", as TEI's interceptor (health and
// reflection stay open).
func (s *Server) newGRPC() (*grpc.Server, *health.Server) {
	gs := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.grpcAuth(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.grpcAuth(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}))
	g := &teiGRPC{s: s}
	teipb.RegisterInfoServer(gs, grpcInfoServer{teiGRPC: g})
	teipb.RegisterEmbedServer(gs, grpcEmbedServer{teiGRPC: g})
	teipb.RegisterPredictServer(gs, grpcPredictServer{teiGRPC: g})
	teipb.RegisterRerankServer(gs, grpcRerankServer{teiGRPC: g})
	teipb.RegisterTokenizeServer(gs, grpcTokenizeServer{teiGRPC: g})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	// As TEI: Info and Tokenize serve whatever the model; Embed, Predict
	// and Rerank as the default model's type serves them.
	serving := map[string]bool{grpcInfo: true, grpcTokenize: true}
	switch s.models[0].task() {
	case "classifier":
		serving[grpcPredict] = true
	case "reranker":
		serving[grpcPredict], serving[grpcRerank] = true, true
	case "question-answering":
	default:
		serving[grpcEmbed] = true
	}
	for _, name := range []string{grpcInfo, grpcEmbed, grpcPredict, grpcRerank, grpcTokenize} {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if serving[name] {
			st = healthpb.HealthCheckResponse_SERVING
		}
		hs.SetServingStatus(name, st)
	}
	return gs, hs
}

// ServeGRPC serves TEI's gRPC API (tei.v1, health, reflection) on l until
// Shutdown, which stops it gracefully with the HTTP server; it returns
// nil then.
func (s *Server) ServeGRPC(l net.Listener) error { return s.gs.Serve(l) }

// stopGRPC stops the gRPC server: gracefully (the calls in flight run to
// their end) until ctx is done, then at once.
func (s *Server) stopGRPC(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		s.gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.gs.Stop()
		<-done
	}
}

// grpcAuth is TEI's API-key interceptor on the tei.v1 services.
func (s *Server) grpcAuth(ctx context.Context, method string) error {
	if s.cfg.APIKey == "" || !strings.HasPrefix(method, "/tei.v1.") {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get("authorization")
	if len(got) == 1 && subtle.ConstantTimeCompare([]byte(got[0]), []byte("Bearer "+s.cfg.APIKey)) == 1 {
		return nil
	}
	s.met.requests.WithLabelValues("grpc"+method, "401").Inc()
	return status.Error(codes.Unauthenticated, "No valid auth token")
}

// grpcCode is the gRPC code of an error the HTTP routes answer, as TEI's
// From<ErrorResponse> for Status maps its error types.
func grpcCode(err error) (codes.Code, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, context.Canceled):
		return codes.Canceled, err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, err.Error()
	case errors.Is(err, models.ErrClosed):
		return codes.Unavailable, "the model is closed: the server is shutting down"
	default:
		return codes.FailedPrecondition, err.Error() // TEI's Backend
	}
	if ae.status == http.StatusGatewayTimeout { // --request-timeout
		return codes.DeadlineExceeded, ae.msg
	}
	switch ae.typ {
	case errValidation, errEmpty:
		return codes.InvalidArgument, ae.msg
	case errOverloaded:
		return codes.ResourceExhausted, ae.msg
	case errUnhealthy:
		return codes.Unavailable, ae.msg
	}
	return codes.FailedPrecondition, ae.msg // Backend, Tokenizer
}

// httpStatus is the HTTP status of an answered error, for the metrics a
// gRPC call counts as its route would.
func httpStatus(err error) int {
	var ae *apiError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &ae):
		return ae.status
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return 499
	case errors.Is(err, models.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusFailedDependency
}

// teiGRPC implements tei.v1's services on a Server.
type teiGRPC struct{ s *Server }

// call runs one RPC (or one message of a stream) as wrap runs an HTTP
// route: refused while draining, counted in the same metrics (route
// "grpc/<service>/<method>", TEI's te_request_*), a panic answered as
// Internal; f's error is answered with its gRPC code. It returns the
// request's stats, whose times go in the response's Metadata.
func (g *teiGRPC) call(ctx context.Context, name string, admitted bool, f func(ctx context.Context) error) (st *reqStats, err error) {
	s := g.s
	start := time.Now()
	route := "grpc/" + name
	st = &reqStats{start: start, route: grpcRoute(name)}
	ctx = context.WithValue(ctx, statsKey{}, st)
	var herr error
	defer func() {
		if p := recover(); p != nil {
			s.met.panics.Inc()
			s.cfg.Logger.Error("serve: panic in a gRPC call", "method", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			herr = &apiError{500, errBackend, fmt.Sprintf("internal error: %v", p)}
			err = status.Error(codes.Internal, herr.Error())
		}
		code := httpStatus(herr)
		s.met.te.done(st, code, herr)
		s.met.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		s.met.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}()
	if admitted {
		if s.draining.Load() {
			herr = &apiError{503, errUnhealthy, "the server is shutting down"}
			return st, status.Error(codes.Unavailable, herr.Error())
		}
		s.met.inFlight.Inc()
		defer s.met.inFlight.Dec()
		if d := s.cfg.RequestTimeout; d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, d, errRequestTimeout)
			defer cancel()
		}
	}
	if herr = f(ctx); herr != nil {
		herr = s.timedOut(ctx, herr)
		c, msg := grpcCode(herr)
		if c == codes.FailedPrecondition && failureLabel(herr) != "model_type" {
			s.cfg.Logger.Error("serve: gRPC call failed", "method", name, "code", c.String(), "error", msg)
		}
		return st, status.Error(c, msg)
	}
	if st.timed && ctx.Value(streamKey{}) == nil {
		h := http.Header{}
		st.setHeaders(h)
		md := metadata.MD{}
		for k, v := range h {
			md[strings.ToLower(k)] = v
		}
		grpc.SetHeader(ctx, md) // TEI's x-* headers
	}
	return st, nil
}

// streamKey marks the context of a stream's message: its times are in
// its Metadata, and the stream's one set of headers carries none.
type streamKey struct{}

// grpcRoute is the HTTP route whose TEI metrics family an RPC counts in
// (te_embed_* for the Embed service, else by the model's type).
func grpcRoute(name string) string {
	if strings.HasPrefix(name, "Embed/") {
		return "/embed"
	}
	return "/" + strings.ToLower(name)
}

// meta is TEI's Metadata message of a request's stats.
func meta(st *reqStats) *teipb.Metadata {
	st.mu.Lock()
	defer st.mu.Unlock()
	return &teipb.Metadata{ComputeChars: uint32(st.chars), ComputeTokens: uint32(st.tokens),
		TotalTimeNs: uint64(time.Since(st.start)), TokenizationTimeNs: uint64(st.tokenization),
		QueueTimeNs: uint64(st.queue), InferenceTimeNs: uint64(st.inference)}
}

// serveStream answers a stream of requests, each as its unary RPC (call),
// in the order they came, up to parallel of them in flight at
// once so that they batch together; the first failure (in order) ends
// the stream with its status, as TEI's streams end.
func serveStream[Req, Res any](parallel int, ctx context.Context, recv func() (*Req, error), send func(*Res) error,
	call func(context.Context, *Req) (*Res, error)) error {
	ctx, cancel := context.WithCancel(context.WithValue(ctx, streamKey{}, true))
	defer cancel()
	type result struct {
		res *Res
		err error
	}
	order := make(chan chan result, parallel)
	recvErr := make(chan error, 1)
	go func() {
		defer close(order)
		for {
			req, err := recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					recvErr <- err
				}
				return
			}
			c := make(chan result, 1)
			select {
			case order <- c:
			case <-ctx.Done():
				return
			}
			go func() {
				r, err := call(ctx, req)
				c <- result{r, err}
			}()
		}
	}()
	for c := range order {
		var r result
		select {
		case r = <-c:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if r.err != nil {
			return r.err
		}
		if err := send(r.res); err != nil {
			return err
		}
	}
	select {
	case err := <-recvErr:
		return err
	default:
		return nil
	}
}

// truncateOf is a message's truncate: true cuts; false, which proto3
// cannot tell from absent, leaves it to the server's --auto-truncate.
func truncateOf(t bool) *bool {
	if t {
		return &t
	}
	return nil
}

// directionOf is a message's truncation direction.
func directionOf(d teipb.TruncationDirection) direction {
	if d == teipb.TruncationDirection_TRUNCATION_DIRECTION_LEFT {
		return direction{models.TruncateLeft}
	}
	return direction{models.TruncateRight}
}

// one is a message's single text input.
func one(text string) inputs {
	return inputs{list: []sequence{{a: text}}, single: true, set: true}
}

// Info.

type grpcInfoServer struct {
	teipb.UnimplementedInfoServer
	*teiGRPC
}

func (g grpcInfoServer) Info(ctx context.Context, _ *teipb.InfoRequest) (*teipb.InfoResponse, error) {
	b := g.s.infoBody()
	r := &teipb.InfoResponse{Version: b.Version, Sha: b.SHA, DockerLabel: b.DockerLabel, ModelId: b.ModelID,
		ModelSha: b.ModelSHA, ModelDtype: b.ModelDType, MaxConcurrentRequests: uint32(b.MaxConcurrentRequests),
		MaxInputLength: uint32(b.MaxInputLength), MaxBatchTokens: uint32(b.MaxBatchTokens),
		MaxClientBatchSize: uint32(b.MaxClientBatchSize), TokenizationWorkers: uint32(b.TokenizationWorkers)}
	if n := b.MaxBatchRequests; n != nil {
		v := uint32(*n)
		r.MaxBatchRequests = &v
	}
	switch g.s.models[0].task() {
	case "classifier":
		r.ModelType = teipb.ModelType_MODEL_TYPE_CLASSIFIER
	case "reranker":
		r.ModelType = teipb.ModelType_MODEL_TYPE_RERANKER
	default:
		r.ModelType = teipb.ModelType_MODEL_TYPE_EMBEDDING
	}
	return r, nil
}

// Embed.

type grpcEmbedServer struct {
	teipb.UnimplementedEmbedServer
	*teiGRPC
}

func (g grpcEmbedServer) embed(ctx context.Context, req *teipb.EmbedRequest) (*teipb.EmbedResponse, error) {
	var vecs [][]float32
	st, err := g.call(ctx, "Embed/Embed", true, func(ctx context.Context) error {
		r := embedRequest{Inputs: one(req.Inputs), Normalize: flag{v: req.GetNormalize(), set: req.Normalize != nil},
			Truncate: truncateOf(req.Truncate), Direction: directionOf(req.TruncationDirection), PromptName: req.PromptName}
		if req.Dimensions != nil {
			d := int(*req.Dimensions)
			r.Dimensions = &d
		}
		var err error
		vecs, err = g.s.embedVectors(ctx, &r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &teipb.EmbedResponse{Embeddings: vecs[0], Metadata: meta(st)}, nil
}

func (g grpcEmbedServer) Embed(ctx context.Context, req *teipb.EmbedRequest) (*teipb.EmbedResponse, error) {
	return g.embed(ctx, req)
}

func (g grpcEmbedServer) EmbedStream(ss teipb.Embed_EmbedStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.embed)
}

func (g grpcEmbedServer) embedSparse(ctx context.Context, req *teipb.EmbedSparseRequest) (*teipb.EmbedSparseResponse, error) {
	var out [][]models.SparseValue
	st, err := g.call(ctx, "Embed/EmbedSparse", true, func(ctx context.Context) error {
		r := embedAllRequest{Inputs: one(req.Inputs), encodingFields: encodingFields{Truncate: truncateOf(req.Truncate),
			Direction: directionOf(req.TruncationDirection), PromptName: req.PromptName}}
		m, err := g.s.checkEmbedAll(ctx, &r, "/embed_sparse")
		if err != nil {
			return err
		}
		out, err = g.s.sparseEmbeddings(ctx, m, &r)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &teipb.EmbedSparseResponse{Metadata: meta(st), SparseEmbeddings: make([]*teipb.SparseValue, len(out[0]))}
	for i, v := range out[0] {
		res.SparseEmbeddings[i] = &teipb.SparseValue{Index: uint32(v.Index), Value: v.Value}
	}
	return res, nil
}

func (g grpcEmbedServer) EmbedSparse(ctx context.Context, req *teipb.EmbedSparseRequest) (*teipb.EmbedSparseResponse, error) {
	return g.embedSparse(ctx, req)
}

func (g grpcEmbedServer) EmbedSparseStream(ss teipb.Embed_EmbedSparseStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.embedSparse)
}

func (g grpcEmbedServer) embedAll(ctx context.Context, req *teipb.EmbedAllRequest) (*teipb.EmbedAllResponse, error) {
	var out [][][]float32
	st, err := g.call(ctx, "Embed/EmbedAll", true, func(ctx context.Context) error {
		r := embedAllRequest{Inputs: one(req.Inputs), encodingFields: encodingFields{Truncate: truncateOf(req.Truncate),
			Direction: directionOf(req.TruncationDirection), PromptName: req.PromptName}}
		m, err := g.s.checkEmbedAll(ctx, &r, "/embed_all")
		if err != nil {
			return err
		}
		out, err = g.s.tokenEmbeddings(ctx, m, &r)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &teipb.EmbedAllResponse{Metadata: meta(st), TokenEmbeddings: make([]*teipb.TokenEmbedding, len(out[0]))}
	for i, v := range out[0] {
		res.TokenEmbeddings[i] = &teipb.TokenEmbedding{Embeddings: v}
	}
	return res, nil
}

func (g grpcEmbedServer) EmbedAll(ctx context.Context, req *teipb.EmbedAllRequest) (*teipb.EmbedAllResponse, error) {
	return g.embedAll(ctx, req)
}

func (g grpcEmbedServer) EmbedAllStream(ss teipb.Embed_EmbedAllStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.embedAll)
}

// Predict.

type grpcPredictServer struct {
	teipb.UnimplementedPredictServer
	*teiGRPC
}

func (g grpcPredictServer) predict(ctx context.Context, name string, in sequence, truncate, raw bool, dir teipb.TruncationDirection) (*teipb.PredictResponse, error) {
	var out [][]prediction
	st, err := g.call(ctx, name, true, func(ctx context.Context) error {
		r := predictRequest{Inputs: predictInputs{list: []sequence{in}, single: true, set: true},
			Truncate: truncateOf(truncate), Direction: directionOf(dir), RawScores: flag{v: raw, set: true}}
		var err error
		out, err = g.s.predictions(ctx, &r)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &teipb.PredictResponse{Metadata: meta(st), Predictions: make([]*teipb.Prediction, len(out[0]))}
	for i, p := range out[0] {
		res.Predictions[i] = &teipb.Prediction{Score: p.Score, Label: p.Label}
	}
	return res, nil
}

func (g grpcPredictServer) single(ctx context.Context, req *teipb.PredictRequest) (*teipb.PredictResponse, error) {
	return g.predict(ctx, "Predict/Predict", sequence{a: req.Inputs}, req.Truncate, req.RawScores, req.TruncationDirection)
}

func (g grpcPredictServer) pair(ctx context.Context, req *teipb.PredictPairRequest) (*teipb.PredictResponse, error) {
	var in sequence
	switch len(req.Inputs) {
	case 1:
		in = sequence{a: req.Inputs[0]}
	case 2:
		in = sequence{a: req.Inputs[0], b: &req.Inputs[1]}
	default:
		// TEI's message and code (Validation).
		return nil, status.Errorf(codes.InvalidArgument, "`inputs` must have a single or two elements. Given: %d", len(req.Inputs))
	}
	return g.predict(ctx, "Predict/PredictPair", in, req.Truncate, req.RawScores, req.TruncationDirection)
}

func (g grpcPredictServer) Predict(ctx context.Context, req *teipb.PredictRequest) (*teipb.PredictResponse, error) {
	return g.single(ctx, req)
}

func (g grpcPredictServer) PredictPair(ctx context.Context, req *teipb.PredictPairRequest) (*teipb.PredictResponse, error) {
	return g.pair(ctx, req)
}

func (g grpcPredictServer) PredictStream(ss teipb.Predict_PredictStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.single)
}

func (g grpcPredictServer) PredictPairStream(ss teipb.Predict_PredictPairStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.pair)
}

// Rerank.

type grpcRerankServer struct {
	teipb.UnimplementedRerankServer
	*teiGRPC
}

// rerank ranks the pairs of a Rerank call or of a RerankStream's
// messages, as /rerank checks and ranks them.
func (g grpcRerankServer) rerank(ctx context.Context, name string, pairs []sequence, truncate, raw, returnText bool, dir teipb.TruncationDirection) (*teipb.RerankResponse, error) {
	var ranks []rank
	st, err := g.call(ctx, name, true, func(ctx context.Context) error {
		if len(pairs) == 0 {
			return labelled("validation", invalid("`texts` cannot be empty"))
		}
		m, err := g.s.pick("", "/rerank", needReranker)
		if err != nil {
			return err
		}
		teMethodOf(ctx, false) // TEI counts every rerank as a batch
		if len(pairs) > g.s.cfg.MaxClientBatchSize {
			return tooMany(len(pairs), g.s.cfg.MaxClientBatchSize)
		}
		ranks, err = g.s.rank(ctx, m, pairs, truncateOf(truncate), directionOf(dir), raw, returnText)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &teipb.RerankResponse{Metadata: meta(st), Ranks: make([]*teipb.Rank, len(ranks))}
	for i, r := range ranks {
		res.Ranks[i] = &teipb.Rank{Index: uint32(r.Index), Text: r.Text, Score: r.Score}
	}
	return res, nil
}

func (g grpcRerankServer) Rerank(ctx context.Context, req *teipb.RerankRequest) (*teipb.RerankResponse, error) {
	pairs := make([]sequence, len(req.Texts))
	for i := range req.Texts {
		pairs[i] = sequence{a: req.Query, b: &req.Texts[i]}
	}
	return g.rerank(ctx, "Rerank/Rerank", pairs, req.Truncate, req.RawScores, req.ReturnText, req.TruncationDirection)
}

// RerankStream ranks the pairs of all the stream's messages together;
// raw_scores, return_text, truncate and the direction are the first
// message's.
func (g grpcRerankServer) RerankStream(ss teipb.Rerank_RerankStreamServer) error {
	var pairs []sequence
	var first *teipb.RerankStreamRequest
	for {
		m, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if first == nil {
			first = m
		}
		text := m.Text
		pairs = append(pairs, sequence{a: m.Query, b: &text})
	}
	if first == nil {
		first = &teipb.RerankStreamRequest{}
	}
	res, err := g.rerank(ss.Context(), "Rerank/RerankStream", pairs, first.Truncate, first.RawScores, first.ReturnText, first.TruncationDirection)
	if err != nil {
		return err
	}
	return ss.SendAndClose(res)
}

// Tokenize.

type grpcTokenizeServer struct {
	teipb.UnimplementedTokenizeServer
	*teiGRPC
}

func (g grpcTokenizeServer) tokenize(ctx context.Context, req *teipb.EncodeRequest) (*teipb.EncodeResponse, error) {
	var out [][]simpleToken
	_, err := g.call(ctx, "Tokenize/Tokenize", false, func(ctx context.Context) error {
		r := tokenizeRequest{Inputs: texts{list: []string{req.Inputs}, single: true, set: true},
			AddSpecialTokens: flag{v: req.AddSpecialTokens, set: true}, PromptName: req.PromptName}
		var err error
		out, err = g.s.tokenizeTexts(ctx, &r)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &teipb.EncodeResponse{Tokens: make([]*teipb.SimpleToken, len(out[0]))}
	for i, t := range out[0] {
		p := &teipb.SimpleToken{Id: uint32(t.ID), Text: t.Text, Special: t.Special}
		if t.Start != nil {
			a, b := uint32(*t.Start), uint32(*t.Stop)
			p.Start, p.Stop = &a, &b
		}
		res.Tokens[i] = p
	}
	return res, nil
}

func (g grpcTokenizeServer) Tokenize(ctx context.Context, req *teipb.EncodeRequest) (*teipb.EncodeResponse, error) {
	return g.tokenize(ctx, req)
}

func (g grpcTokenizeServer) TokenizeStream(ss teipb.Tokenize_TokenizeStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.tokenize)
}

func (g grpcTokenizeServer) decode(ctx context.Context, req *teipb.DecodeRequest) (*teipb.DecodeResponse, error) {
	var out []string
	_, err := g.call(ctx, "Tokenize/Decode", false, func(ctx context.Context) error {
		r := decodeRequest{IDs: idLists{list: [][]int32{toInt32(req.Ids)}, single: true, set: true},
			SkipSpecialTokens: &req.SkipSpecialTokens}
		var err error
		out, err = g.s.decodeLists(&r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &teipb.DecodeResponse{Text: out[0]}, nil
}

func (g grpcTokenizeServer) Decode(ctx context.Context, req *teipb.DecodeRequest) (*teipb.DecodeResponse, error) {
	return g.decode(ctx, req)
}

func (g grpcTokenizeServer) DecodeStream(ss teipb.Tokenize_DecodeStreamServer) error {
	return serveStream(g.s.cfg.GRPCStreamParallel, ss.Context(), ss.Recv, ss.Send, g.decode)
}
