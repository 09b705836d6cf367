#!/bin/sh
# The project's test command (README, .ci/run): installs what is missing, then
# vets and tests everything with oneDNN under the race detector, and again
# with CGO_ENABLED=0 to prove the native fallback builds and passes.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
export PKG_CONFIG_PATH="$PWD/.build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The linter's version is pinned here, outside go.mod: it is a tool, not a
# dependency of the module.
STATICCHECK=v0.8.2
# oneDNN's OpenMP threads must not spin while Go's test goroutines run.
export OMP_WAIT_POLICY=passive

if [ "$(go env CGO_ENABLED)" != 1 ]; then
	echo "test: cgo is off (CGO_ENABLED=0 or no C compiler); the oneDNN tests would not run" >&2
	exit 1
fi

echo "== generated kernels match their generators (scripts/check-generate.sh)"
scripts/check-generate.sh
echo "== go vet ./... (with oneDNN)"
go vet ./...
echo "== staticcheck ./... (honnef.co/go/tools $STATICCHECK)"
go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK" ./...
echo "== go test -race -short ./... (with oneDNN; -short leaves out the whole-dataset accuracy runs)"
go test -race -short -timeout 30m ./...
echo "== go test ./... (with oneDNN, everything)"
go test -timeout 30m ./...
echo "== go vet, go test ./... with CGO_ENABLED=0 (native kernels only)"
CGO_ENABLED=0 go vet ./...
CGO_ENABLED=0 go test -timeout 30m ./...
# The lower CPU tiers, forced, so that a tier no machine here has today
# stays tested (docs/DESIGN.md section 5.1): AVX2 only (AVX-512 and
# AVX-VNNI off, oneDNN capped at AVX2, where its INT8 would saturate and
# is refused), then AVX-VNNI without AVX-512, then AVX-512 without VNNI.
# On a CPU that lacks a tier the stage runs on what it has; a test that
# cannot run says so by name.
echo "== go test ./kernels/... ./dnnl ./selector with the AVX2 tier forced (INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2)"
INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2 go test -count=1 -timeout 30m ./kernels/... ./dnnl ./selector
echo "== go test -short ./smoothquant ./models/... ./bench and the CLI's bench, tune, info and demo tests with the AVX2 tier forced"
INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2 go test -count=1 -short -timeout 30m ./smoothquant ./models/... ./bench
INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2 go test -count=1 -short -timeout 30m -run 'Bench|Tune|Info|Demo' ./cmd/int8bert
echo "== the INT8 accuracy runs (SST-2 dev, the outlier stress test) with the AVX2 tier forced (its linears are exact, so these figures are every tier's with FP32 attention; the AVX-512 VNNI runs above add INT8 attention)"
tierlog=$(mktemp)
if ! INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2 go test -count=1 -timeout 30m -run 'TestSST2Int8$|TestOutlierStress' -v \
	./models/bert ./models/distilbert ./models/xlmr ./bench >"$tierlog" 2>&1; then
	cat "$tierlog"
	rm -f "$tierlog"
	exit 1
fi
grep -E '^(--- |ok|FAIL)|accuracy|e2e SQNR dB' "$tierlog" || true
rm -f "$tierlog"
# The AVX-VNNI tier (Alder Lake, Sierra Forest; Zen 5 with AVX-512 off):
# the VEX VPDPBUSD ymm kernel, oneDNN capped at avx2_vnni (exact INT8).
echo "== go test ./kernels/... ./selector with the AVX-VNNI tier forced (INT8BERT_CPU_DISABLE=avx512 DNNL_MAX_CPU_ISA=AVX2_VNNI)"
INT8BERT_CPU_DISABLE=avx512 DNNL_MAX_CPU_ISA=AVX2_VNNI go test -count=1 -timeout 30m ./kernels/... ./selector
echo "== go test ./kernels/... ./dnnl ./selector with VNNI off (INT8BERT_CPU_DISABLE=avx512vnni,avxvnni DNNL_MAX_CPU_ISA=AVX512_CORE)"
INT8BERT_CPU_DISABLE=avx512vnni,avxvnni DNNL_MAX_CPU_ISA=AVX512_CORE go test -count=1 -timeout 30m ./kernels/... ./dnnl ./selector
echo "== CGO_ENABLED=0 go vet ./... for linux/arm64, darwin/arm64 and windows/amd64 (the plain-Go twins build everywhere)"
for target in linux/arm64 darwin/arm64 windows/amd64; do
	echo "-- $target"
	CGO_ENABLED=0 GOOS="${target%/*}" GOARCH="${target#*/}" go vet ./...
done
echo "== go build -tags nodnnl ./... and -tags noasm ./... (plain-Go kernel twins)"
go build -tags nodnnl ./...
go build -tags noasm ./...
go test -tags noasm ./kernels/...
# The container image (docker/Dockerfile) built with podman and run: info,
# quantize, classify, health, serve over loopback. It says SKIP by name on a
# machine that cannot run podman (scripts/docker-test.sh).
if [ "${INT8BERT_SKIP_DOCKER:-}" = 1 ]; then
	echo "== docker image test (scripts/docker-test.sh): SKIPPED (INT8BERT_SKIP_DOCKER=1)"
else
	echo "== docker image test (scripts/docker-test.sh: podman build -f docker/Dockerfile, then info, quantize, serve in the image)"
	scripts/docker-test.sh
fi
echo "== all tests passed"
