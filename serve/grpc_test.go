package serve

import (
	"context"
	"github.com/int8bert/int8bert/models"
	"io"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/serve/teipb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// newGRPCServer is newServer with the gRPC API served on 127.0.0.1:0 and
// a client connection to it.
func newGRPCServer(t *testing.T, c Config) (*Server, *httptest.Server, *grpc.ClientConn) {
	t.Helper()
	s, ts := newServer(t, c)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.ServeGRPC(l) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		s.Close()
		assert.NoError(t, <-served, "ServeGRPC returns nil after Shutdown")
	})
	return s, ts, conn
}

// grpcCtx bounds a test's calls: a guard against a hang, not a timing
// (30 s ran out under -race on a loaded 2-vCPU machine).
func grpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func codeOf(err error) codes.Code { return status.Code(err) }

var grpcTexts = []string{"a charming and affecting journey", "the plot is thin", "w5 w6", "ok"}

// TestGRPCSameAsHTTP: Embed, Predict, PredictPair, Tokenize, Decode and
// Info answer what /embed, /predict, /tokenize, /decode and /info answer
// for the same inputs, the vectors and scores bit for bit (one input a
// call, so each runs in a batch of its own either way).
func TestGRPCSameAsHTTP(t *testing.T) {
	_, ts, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	ctx := grpcCtx(t)
	embed, predict, tok := teipb.NewEmbedClient(conn), teipb.NewPredictClient(conn), teipb.NewTokenizeClient(conn)
	f := false
	dims := uint32(16)
	for _, text := range grpcTexts {
		code, b := postJSON(t, ts, "/embed", map[string]any{"inputs": text})
		require.Equal(t, 200, code, "%s", b)
		var hdr metadata.MD
		got, err := embed.Embed(ctx, &teipb.EmbedRequest{Inputs: text}, grpc.Header(&hdr))
		require.NoError(t, err)
		assert.Equal(t, decode[[][]float32](t, b)[0], got.Embeddings, "Embed %q", text)
		assert.NotZero(t, got.Metadata.ComputeTokens)
		assert.Equal(t, uint32(len([]rune(text))), got.Metadata.ComputeChars)
		assert.Equal(t, []string{"cpu+optimized"}, hdr.Get("x-compute-type"), "TEI's headers")
		assert.NotEmpty(t, hdr.Get("x-inference-time"))

		code, b = postJSON(t, ts, "/embed", map[string]any{"inputs": text, "normalize": false, "dimensions": 16})
		require.Equal(t, 200, code, "%s", b)
		got, err = embed.Embed(ctx, &teipb.EmbedRequest{Inputs: text, Normalize: &f, Dimensions: &dims})
		require.NoError(t, err)
		assert.Equal(t, decode[[][]float32](t, b)[0], got.Embeddings, "Embed %q normalize false, dimensions 16", text)

		code, b = postJSON(t, ts, "/predict", map[string]any{"inputs": text, "raw_scores": true})
		require.Equal(t, 200, code, "%s", b)
		want := decode[[]prediction](t, b)
		p, err := predict.Predict(ctx, &teipb.PredictRequest{Inputs: text, RawScores: true})
		require.NoError(t, err)
		require.Len(t, p.Predictions, len(want))
		for k := range want {
			assert.Equal(t, want[k].Label, p.Predictions[k].Label)
			assert.Equal(t, want[k].Score, p.Predictions[k].Score, "Predict %q", text)
		}

		code, b = postJSON(t, ts, "/predict", map[string]any{"inputs": []string{text, "w7"}})
		require.Equal(t, 200, code, "%s", b)
		want = decode[[]prediction](t, b)
		p, err = predict.PredictPair(ctx, &teipb.PredictPairRequest{Inputs: []string{text, "w7"}})
		require.NoError(t, err)
		for k := range want {
			assert.Equal(t, want[k].Score, p.Predictions[k].Score, "PredictPair %q", text)
		}

		for _, add := range []bool{true, false} {
			code, b = postJSON(t, ts, "/tokenize", map[string]any{"inputs": text, "add_special_tokens": add})
			require.Equal(t, 200, code, "%s", b)
			wantToks := decode[[][]simpleToken](t, b)[0]
			toks, err := tok.Tokenize(ctx, &teipb.EncodeRequest{Inputs: text, AddSpecialTokens: add})
			require.NoError(t, err)
			require.Len(t, toks.Tokens, len(wantToks))
			ids := make([]uint32, len(wantToks))
			for k, w := range wantToks {
				g := toks.Tokens[k]
				ids[k] = g.Id
				assert.Equal(t, w.ID, int32(g.Id))
				assert.Equal(t, w.Text, g.Text)
				assert.Equal(t, w.Special, g.Special)
				if w.Start != nil {
					require.NotNil(t, g.Start)
					assert.Equal(t, *w.Start, int(*g.Start))
					assert.Equal(t, *w.Stop, int(*g.Stop))
				} else {
					assert.Nil(t, g.Start)
				}
			}
			for _, skip := range []bool{true, false} {
				code, b = postJSON(t, ts, "/decode", map[string]any{"ids": ids, "skip_special_tokens": skip})
				require.Equal(t, 200, code, "%s", b)
				d, err := tok.Decode(ctx, &teipb.DecodeRequest{Ids: ids, SkipSpecialTokens: skip})
				require.NoError(t, err)
				assert.Equal(t, decode[[]string](t, b)[0], d.Text)
			}
		}
	}

	code, b, _ := get(t, ts, "GET", "/info")
	require.Equal(t, 200, code)
	info := decode[infoBody](t, b)
	gi, err := teipb.NewInfoClient(conn).Info(ctx, &teipb.InfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, teipb.ModelType_MODEL_TYPE_CLASSIFIER, gi.ModelType)
	assert.Equal(t, info.ModelID, gi.ModelId)
	assert.Equal(t, uint32(info.MaxInputLength), gi.MaxInputLength)
	assert.Equal(t, uint32(info.MaxClientBatchSize), gi.MaxClientBatchSize)
}

// TestGRPCStreams: EmbedStream, PredictStream and TokenizeStream answer
// each message, in the order sent (the messages run at once and may
// share a batch, so the vectors are compared within float tolerance).
func TestGRPCStreams(t *testing.T) {
	_, ts, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	ctx := grpcCtx(t)
	var texts []string
	for range 4 {
		texts = append(texts, grpcTexts...)
	}
	st, err := teipb.NewEmbedClient(conn).EmbedStream(ctx)
	require.NoError(t, err)
	go func() {
		for _, text := range texts {
			st.Send(&teipb.EmbedRequest{Inputs: text})
		}
		st.CloseSend()
	}()
	for i, text := range texts {
		got, err := st.Recv()
		require.NoError(t, err, "message %d", i)
		code, b := postJSON(t, ts, "/embed", map[string]any{"inputs": text})
		require.Equal(t, 200, code)
		want := decode[[][]float32](t, b)[0]
		require.Len(t, got.Embeddings, len(want))
		assert.InDeltaSlice(t, want, got.Embeddings, 1e-4, "message %d (%q) in order", i, text)
	}
	_, err = st.Recv()
	assert.ErrorIs(t, err, io.EOF)

	ps, err := teipb.NewPredictClient(conn).PredictStream(ctx)
	require.NoError(t, err)
	for _, text := range grpcTexts {
		require.NoError(t, ps.Send(&teipb.PredictRequest{Inputs: text}))
	}
	require.NoError(t, ps.CloseSend())
	for _, text := range grpcTexts {
		got, err := ps.Recv()
		require.NoError(t, err)
		_, b := postJSON(t, ts, "/predict", map[string]any{"inputs": text})
		want := decode[[]prediction](t, b)
		assert.Equal(t, want[0].Label, got.Predictions[0].Label, "%q", text)
		assert.InDelta(t, want[0].Score, got.Predictions[0].Score, 1e-4)
	}

	// A failing message ends the stream with its status.
	tsm, err := teipb.NewTokenizeClient(conn).TokenizeStream(ctx)
	require.NoError(t, err)
	require.NoError(t, tsm.Send(&teipb.EncodeRequest{Inputs: "w5", AddSpecialTokens: true}))
	require.NoError(t, tsm.Send(&teipb.EncodeRequest{Inputs: ""}))
	require.NoError(t, tsm.CloseSend())
	got, err := tsm.Recv()
	require.NoError(t, err)
	assert.NotEmpty(t, got.Tokens)
	_, err = tsm.Recv()
	assert.Equal(t, codes.InvalidArgument, codeOf(err), "%v", err)
}

// TestGRPCErrors: bad input answers TEI's codes, never a panic: empty
// input InvalidArgument, a route the model cannot serve
// FailedPrecondition (TEI's Backend), as server.rs maps its error types.
func TestGRPCErrors(t *testing.T) {
	_, _, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxClientBatchSize: 2})
	ctx := grpcCtx(t)
	embed, predict, rerank, tok := teipb.NewEmbedClient(conn), teipb.NewPredictClient(conn), teipb.NewRerankClient(conn), teipb.NewTokenizeClient(conn)
	zero := uint32(0)
	bad := map[string]error{}
	_, bad["Embed empty"] = embed.Embed(ctx, &teipb.EmbedRequest{})
	_, bad["Embed dimensions 0"] = embed.Embed(ctx, &teipb.EmbedRequest{Inputs: "w5", Dimensions: &zero})
	_, bad["Embed prompt"] = embed.Embed(ctx, &teipb.EmbedRequest{Inputs: "w5", PromptName: new(string)})
	_, bad["Predict empty"] = predict.Predict(ctx, &teipb.PredictRequest{})
	_, bad["PredictPair three"] = predict.PredictPair(ctx, &teipb.PredictPairRequest{Inputs: []string{"a", "b", "c"}})
	_, bad["PredictPair none"] = predict.PredictPair(ctx, &teipb.PredictPairRequest{})
	_, bad["Rerank empty"] = rerank.Rerank(ctx, &teipb.RerankRequest{Query: "q"})
	_, bad["Tokenize empty"] = tok.Tokenize(ctx, &teipb.EncodeRequest{})
	_, bad["Decode empty"] = tok.Decode(ctx, &teipb.DecodeRequest{})
	for name, err := range bad {
		assert.Equal(t, codes.InvalidArgument, codeOf(err), "%s: %v", name, err)
	}
	_, err := embed.EmbedSparse(ctx, &teipb.EmbedSparseRequest{Inputs: "w5"})
	assert.Equal(t, codes.FailedPrecondition, codeOf(err), "no SPLADE head: %v", err)
	_, err = embed.EmbedAll(ctx, &teipb.EmbedAllRequest{Inputs: "w5"})
	assert.Equal(t, codes.FailedPrecondition, codeOf(err), "a classifier: %v", err)
	_, err = rerank.Rerank(ctx, &teipb.RerankRequest{Query: "q", Texts: []string{"a"}})
	assert.Equal(t, codes.FailedPrecondition, codeOf(err), "not a reranker: %v", err)
	rs, err := rerank.RerankStream(ctx)
	require.NoError(t, err)
	_, err = rs.CloseAndRecv()
	assert.Equal(t, codes.InvalidArgument, codeOf(err), "an empty RerankStream: %v", err)
}

// TestGRPCRerank: Rerank and RerankStream rank as /rerank.
func TestGRPCRerank(t *testing.T) {
	rr := encodertest.WordFolder(t, sharedModel(t, "golden/heads/xlm-roberta-crossencoder"), true)
	_, ts, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "rr", Source: rr}}})
	ctx := grpcCtx(t)
	texts := []string{"w6", "w7 w8", "w5"}
	code, b := postJSON(t, ts, "/rerank", map[string]any{"query": "w5", "texts": texts, "return_text": true})
	require.Equal(t, 200, code, "%s", b)
	want := decode[[]rank](t, b)
	got, err := teipb.NewRerankClient(conn).Rerank(ctx, &teipb.RerankRequest{Query: "w5", Texts: texts, ReturnText: true})
	require.NoError(t, err)
	require.Len(t, got.Ranks, len(want))
	for k := range want {
		assert.Equal(t, uint32(want[k].Index), got.Ranks[k].Index)
		assert.Equal(t, want[k].Score, got.Ranks[k].Score)
		assert.Equal(t, *want[k].Text, got.Ranks[k].GetText())
	}
	rs, err := teipb.NewRerankClient(conn).RerankStream(ctx)
	require.NoError(t, err)
	for _, text := range texts {
		require.NoError(t, rs.Send(&teipb.RerankStreamRequest{Query: "w5", Text: text}))
	}
	res, err := rs.CloseAndRecv()
	require.NoError(t, err)
	for k := range want {
		assert.Equal(t, uint32(want[k].Index), res.Ranks[k].Index)
		assert.InDelta(t, want[k].Score, res.Ranks[k].Score, 1e-5)
		assert.Nil(t, res.Ranks[k].Text)
	}
}

// TestGRPCAPIKey: with --api-key every tei.v1 RPC wants "authorization:
// Bearer <key>" (else Unauthenticated, as TEI's interceptor); health and
// reflection stay open, as in TEI.
func TestGRPCAPIKey(t *testing.T) {
	_, _, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, APIKey: "s3cret"})
	base := grpcCtx(t)
	calls := map[string]func(ctx context.Context) error{
		"Info": func(ctx context.Context) error {
			_, err := teipb.NewInfoClient(conn).Info(ctx, &teipb.InfoRequest{})
			return err
		},
		"Embed": func(ctx context.Context) error {
			_, err := teipb.NewEmbedClient(conn).Embed(ctx, &teipb.EmbedRequest{Inputs: "w5"})
			return err
		},
		"EmbedAll": func(ctx context.Context) error {
			_, err := teipb.NewEmbedClient(conn).EmbedAll(ctx, &teipb.EmbedAllRequest{})
			return err
		},
		"EmbedSparse": func(ctx context.Context) error {
			_, err := teipb.NewEmbedClient(conn).EmbedSparse(ctx, &teipb.EmbedSparseRequest{})
			return err
		},
		"Predict": func(ctx context.Context) error {
			_, err := teipb.NewPredictClient(conn).Predict(ctx, &teipb.PredictRequest{Inputs: "w5"})
			return err
		},
		"PredictPair": func(ctx context.Context) error {
			_, err := teipb.NewPredictClient(conn).PredictPair(ctx, &teipb.PredictPairRequest{Inputs: []string{"w5"}})
			return err
		},
		"Rerank": func(ctx context.Context) error {
			_, err := teipb.NewRerankClient(conn).Rerank(ctx, &teipb.RerankRequest{})
			return err
		},
		"Tokenize": func(ctx context.Context) error {
			_, err := teipb.NewTokenizeClient(conn).Tokenize(ctx, &teipb.EncodeRequest{Inputs: "w5"})
			return err
		},
		"Decode": func(ctx context.Context) error {
			_, err := teipb.NewTokenizeClient(conn).Decode(ctx, &teipb.DecodeRequest{Ids: []uint32{5}})
			return err
		},
		"EmbedStream": func(ctx context.Context) error {
			st, err := teipb.NewEmbedClient(conn).EmbedStream(ctx)
			if err != nil {
				return err
			}
			st.Send(&teipb.EmbedRequest{Inputs: "w5"})
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
		"EmbedAllStream": func(ctx context.Context) error {
			st, err := teipb.NewEmbedClient(conn).EmbedAllStream(ctx)
			if err != nil {
				return err
			}
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
		"EmbedSparseStream": func(ctx context.Context) error {
			st, err := teipb.NewEmbedClient(conn).EmbedSparseStream(ctx)
			if err != nil {
				return err
			}
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
		"PredictStream": func(ctx context.Context) error {
			st, err := teipb.NewPredictClient(conn).PredictStream(ctx)
			if err != nil {
				return err
			}
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
		"PredictPairStream": func(ctx context.Context) error {
			st, err := teipb.NewPredictClient(conn).PredictPairStream(ctx)
			if err != nil {
				return err
			}
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
		"RerankStream": func(ctx context.Context) error {
			st, err := teipb.NewRerankClient(conn).RerankStream(ctx)
			if err != nil {
				return err
			}
			_, err = st.CloseAndRecv()
			return err
		},
		"TokenizeStream": func(ctx context.Context) error {
			st, err := teipb.NewTokenizeClient(conn).TokenizeStream(ctx)
			if err != nil {
				return err
			}
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
		"DecodeStream": func(ctx context.Context) error {
			st, err := teipb.NewTokenizeClient(conn).DecodeStream(ctx)
			if err != nil {
				return err
			}
			st.CloseSend()
			_, err = st.Recv()
			return err
		},
	}
	assert.Len(t, calls, 17, "every RPC of tei.proto")
	for name, call := range calls {
		assert.Equal(t, codes.Unauthenticated, codeOf(call(base)), "%s without a key", name)
		wrong := metadata.AppendToOutgoingContext(base, "authorization", "Bearer wrong")
		assert.Equal(t, codes.Unauthenticated, codeOf(call(wrong)), "%s with a wrong key", name)
		bare := metadata.AppendToOutgoingContext(base, "authorization", "s3cret")
		assert.Equal(t, codes.Unauthenticated, codeOf(call(bare)), "%s without Bearer", name)
		right := metadata.AppendToOutgoingContext(base, "authorization", "Bearer s3cret")
		assert.NotEqual(t, codes.Unauthenticated, codeOf(call(right)), "%s with the key", name)
	}
	right := metadata.AppendToOutgoingContext(base, "authorization", "Bearer s3cret")
	assert.NoError(t, calls["Embed"](right))

	h, err := healthpb.NewHealthClient(conn).Check(base, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "health needs no key")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)
	assert.Contains(t, listServices(t, base, conn), "tei.v1.Embed", "reflection needs no key")
}

// listServices lists the services reflection names.
func listServices(t *testing.T, ctx context.Context, conn *grpc.ClientConn) []string {
	t.Helper()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	res, err := st.Recv()
	require.NoError(t, err)
	st.CloseSend()
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

// TestGRPCHealthAndShutdown: the health service answers SERVING for the
// server and the services the model serves (TEI's: Info and Tokenize
// always, Predict for a classifier); reflection lists tei.v1's services;
// once Shutdown begins, health answers NOT_SERVING and new calls
// Unavailable, and Shutdown stops the gRPC server (ServeGRPC returns
// nil).
func TestGRPCHealthAndShutdown(t *testing.T) {
	s, _, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, DrainDelay: 2 * time.Second})
	ctx := grpcCtx(t)
	hc := healthpb.NewHealthClient(conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err, service)
		return r.Status
	}
	for _, svc := range []string{"", grpcInfo, grpcTokenize, grpcPredict} {
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, check(svc), "%q", svc)
	}
	for _, svc := range []string{grpcEmbed, grpcRerank} {
		assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(svc), "%q: TEI's health for a classifier", svc)
	}
	assert.Equal(t, []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
		grpcEmbed, grpcInfo, grpcPredict, grpcRerank, grpcTokenize}, listServices(t, ctx, conn))

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	require.Eventually(t, func() bool { return s.draining.Load() }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(""))
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(grpcPredict))
	_, err := teipb.NewPredictClient(conn).Predict(ctx, &teipb.PredictRequest{Inputs: "w5"})
	assert.Equal(t, codes.Unavailable, codeOf(err), "while draining: %v", err)
	require.NoError(t, <-done)
}

// TestGRPCEmbedSparse: EmbedSparse on a SPLADE model answers what
// /embed_sparse answers, and its stream does too.
func TestGRPCEmbedSparse(t *testing.T) {
	dir := filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")
	_, ts, conn := newGRPCServer(t, Config{Models: []ModelSpec{{Name: "splade", Source: dir}}, Pooling: "splade"})
	ctx := grpcCtx(t)
	embed := teipb.NewEmbedClient(conn)
	for _, text := range []string{"the man went to the city.", "a good song"} {
		code, b := postJSON(t, ts, "/embed_sparse", map[string]any{"inputs": text})
		require.Equal(t, 200, code, "%s", b)
		want := decode[[][]models.SparseValue](t, b)[0]
		got, err := embed.EmbedSparse(ctx, &teipb.EmbedSparseRequest{Inputs: text})
		require.NoError(t, err)
		require.Len(t, got.SparseEmbeddings, len(want))
		for k, v := range got.SparseEmbeddings {
			assert.Equal(t, uint32(want[k].Index), v.Index)
			assert.Equal(t, want[k].Value, v.Value)
		}
		assert.NotZero(t, got.Metadata.ComputeTokens)
	}
}
