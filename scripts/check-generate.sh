#!/bin/sh
# Regenerates the kernels' assembly and Go declarations (go generate, avo
# from the Go module proxy) and serve/teipb's gRPC code (protoc from apt,
# protoc-gen-go and protoc-gen-go-grpc from the Go module proxy, go.mod's
# tools) into the work tree and fails when they differ from what is
# committed: the committed files are the generators' output, byte for byte.
# Run from a git checkout; the trees under kernels/ and serve/teipb should
# be clean first, since the check compares against the index.
set -eu
cd "$(dirname "$0")/.."
# protoc writes its version into serve/teipb's headers: another than
# Debian 12's 3.21 would show as a diff, so say so first.
ver=$(protoc --version 2>/dev/null || true)
case "$ver" in
"libprotoc 3.21."*) ;;
*)
	echo "check-generate: serve/teipb wants protoc 3.21.x (Debian 12's protobuf-compiler; scripts/setup.sh installs it); found: ${ver:-no protoc on PATH}" >&2
	exit 1
	;;
esac
go generate ./kernels/... ./serve/teipb
if ! git diff --exit-code --stat -- kernels serve/teipb; then
	echo "check-generate: the generated files above differ from their generators (run go generate ./kernels/... ./serve/teipb and commit)" >&2
	exit 1
fi
new=$(git ls-files --others --exclude-standard -- kernels serve/teipb)
if [ -n "$new" ]; then
	echo "check-generate: go generate wrote files that are not committed:" >&2
	echo "$new" >&2
	exit 1
fi
echo "check-generate: generated files match"
