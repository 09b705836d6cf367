// Package serve is int8bert's HTTP server: a drop-in for Hugging Face's
// text-embeddings-inference (TEI) on CPU, with its routes, request and
// response shapes and status codes (POST /embed, /predict, /rerank,
// /tokenize, the OpenAI-shaped /v1/embeddings, our /qa; GET /health,
// /info, /metrics), several models in one process, and a batcher that
// gathers the sequences of concurrent requests into passes on a pool of
// instances that share one copy of each model's weights.
//
// The request path (docs/DESIGN.md section 9): a handler admits the
// request (503 while draining, 429 past Config.MaxConcurrentRequests),
// decodes and checks its body (413 past Config.MaxBodyBytes, 422 for bad
// input), tokenizes it on its own goroutine, and queues one job holding
// the request's sequences; an idle instance takes the oldest job and the
// later jobs of the same model that fit Config.MaxBatchTokens and
// Config.MaxBatchRequests, runs them as one call of Pipeline.Run (packed
// passes: no padding is computed where the encoder packs, section 2), and
// hands each request its rows. Errors are JSON {"error", "error_type"}
// as TEI writes them.
//
// Server.Shutdown drains: /health turns 503, new requests get 503 with
// "Connection: close", every request accepted before runs to its end,
// then the instances stop and the models close. A panic in a handler or
// a pass fails that request (500), never the process.
//
// serve imports models (the front door, the instance pool), the
// packages below it except models/encoder (the engine behind the front
// door), and the Prometheus client library; only the command
// (cmd/int8bert serve, bench serve) imports serve.
package serve
