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
echo "== go build -tags nodnnl ./... and -tags noasm ./... (plain-Go kernel twins)"
go build -tags nodnnl ./...
go build -tags noasm ./...
go test -tags noasm ./kernels/...
echo "== all tests passed"
