package serve

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series, on a registry of its own
// (so that two servers in one process, as in tests, do not collide).
type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec   // route, status
	duration    *prometheus.HistogramVec // route
	queue       prometheus.Histogram
	tokenize    prometheus.Histogram
	inference   prometheus.Histogram
	batchSize   prometheus.Histogram
	batchTokens prometheus.Histogram
	realTokens  prometheus.Counter
	computed    prometheus.Counter
	// savedTokens counts the tokens not computed because their requests
	// had gone: dropped from the queue, or left a pass between layers
	// (docs/DESIGN.md section 9.1).
	savedTokens  prometheus.Counter
	queueLength  prometheus.Gauge
	inFlight     prometheus.Gauge
	panics       prometheus.Counter
	inputsTokens prometheus.Histogram
	te           *teMetrics // TEI's te_* series (ops.go)
}

// Durations from 100 us to ~100 s.
var durationBuckets = prometheus.ExponentialBuckets(1e-4, 2, 21)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "int8bert_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "int8bert_request_duration_seconds", Help: "Time from a request's arrival to its response, by route.",
		Buckets: durationBuckets}, []string{"route"})
	m.queue = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "int8bert_queue_duration_seconds", Help: "Time a job waited for an instance.", Buckets: durationBuckets})
	m.tokenize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "int8bert_tokenization_duration_seconds", Help: "Time to tokenize one request.", Buckets: durationBuckets})
	m.inference = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "int8bert_inference_duration_seconds", Help: "Time an instance spent on one batch.", Buckets: durationBuckets})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "int8bert_batch_size", Help: "Sequences per batch an instance ran.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)})
	m.batchTokens = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "int8bert_batch_tokens", Help: "Tokens computed per forward pass, padding included.", Buckets: prometheus.ExponentialBuckets(8, 2, 12)})
	m.inputsTokens = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "int8bert_input_tokens", Help: "Tokens per input sequence.", Buckets: prometheus.ExponentialBuckets(4, 2, 8)})
	m.realTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "int8bert_tokens_total", Help: "Tokens of the inputs run (no padding)."})
	m.computed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "int8bert_computed_tokens_total", Help: "Tokens the forward passes computed, padding included."})
	m.savedTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "int8bert_cancelled_tokens_saved_total", Help: "Tokens not computed because their requests had gone (client gone, --request-timeout): dropped from the queue, or their rows left the pass between layers (in whole passes' worth)."})
	m.queueLength = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "int8bert_queue_length", Help: "Jobs waiting for an instance."})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "int8bert_in_flight_requests", Help: "Requests admitted and not yet answered."})
	m.panics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "int8bert_panics_total", Help: "Panics recovered in handlers and batches (there should be none)."})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.queue, m.tokenize, m.inference, m.batchSize,
		m.batchTokens, m.inputsTokens, m.realTokens, m.computed, m.savedTokens, m.queueLength, m.inFlight, m.panics,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.te = newTEMetrics(m.reg)
	return m
}
