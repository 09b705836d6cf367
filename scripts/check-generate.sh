#!/bin/sh
# Regenerates the kernels' assembly and Go declarations (go generate, avo
# from the Go module proxy) into the work tree and fails when they differ
# from what is committed: the committed files are the generators' output,
# byte for byte. Run from a git checkout; the tree under kernels/ should be
# clean first, since the check compares against the index.
set -eu
cd "$(dirname "$0")/.."
go generate ./kernels/...
if ! git diff --exit-code --stat -- kernels; then
	echo "check-generate: the generated files above differ from their generators (run go generate ./kernels/... and commit)" >&2
	exit 1
fi
new=$(git ls-files --others --exclude-standard -- kernels)
if [ -n "$new" ]; then
	echo "check-generate: go generate wrote files that are not committed:" >&2
	echo "$new" >&2
	exit 1
fi
echo "check-generate: generated files match"
