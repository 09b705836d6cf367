#!/bin/sh
# The project's test command (README, .ci/run): installs what is missing, then
# vets and tests everything with oneDNN under the race detector, and again
# with CGO_ENABLED=0 to prove the native fallback builds and passes.
#
# Stages (docs/DESIGN.md section 6). Each test runs once per code path, not
# once per flag combination:
#   generate     the generated kernels match their generators.
#   lint         go vet (with oneDNN, CGO_ENABLED=0, three
#                other OSes), staticcheck, the nodnnl and noasm builds; in the
#                background, alongside race.
#   docker       the container image test; in the background after generate
#                (its package installs and base images wait on the network).
#   vuln         govulncheck against a local database built from a pinned
#                golang.org/x/vulndb (scripts/vulncheck); fails on a called
#                vulnerable symbol of a module, reports the standard
#                library's (the toolchain is fixed); in the background,
#                alongside race.
#   race         go test -race -short ./...: every test, with oneDNN.
#   long         without -race and -short, only the tests that read
#                testing.Short() (found in the source, below): their full form.
#   nocgo        CGO_ENABLED=0 go test -short of the packages whose code
#                path cgo changes (those that import dnnl); the rest build
#                the same.
#   noasm        go test -tags noasm ./kernels/...: the Go twins.
#   tier-*       the forced lower CPU tiers.
# Each stage writes a log; the command prints go test's summary lines of a
# stage that passed, the whole log of one that failed, then a table of stage
# times, and exits non-zero when any stage failed.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
export PKG_CONFIG_PATH="$PWD/.build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The linter's version is pinned here, outside go.mod: it is a tool, not a
# dependency of the module.
STATICCHECK=v0.8.2
# The dependency audit's scanner and database, pinned the same way
# (docs/DESIGN.md section 6.2): the database is the OSV entries of this
# golang.org/x/vulndb version, fetched through the Go module proxy (the
# public vuln.go.dev is not reachable from CI) and indexed once per version
# into .build/vulndb-$VULNDB.
GOVULNCHECK=v1.9.0
VULNDB=v0.0.0-20261105234957-e22db6528018
# oneDNN's OpenMP threads must not spin while Go's test goroutines run.
export OMP_WAIT_POLICY=passive

if [ "$(go env CGO_ENABLED)" != 1 ]; then
	echo "test: cgo is off (CGO_ENABLED=0 or no C compiler); the oneDNN tests would not run" >&2
	exit 1
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/int8bert-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT
tstart=$(date +%s)

# start NAME FUNCTION: runs FUNCTION in a background subshell, where set -e
# holds (a function called in an if or || condition would run with -e off),
# output to $logs/NAME.log; its status and seconds go to $logs/NAME.rc.
start() {
	echo "-- $1: started"
	(
		t0=$(date +%s)
		rc=0
		("$2") >"$logs/$1.log" 2>&1 &
		wait $! || rc=$?
		echo "$rc $(($(date +%s) - t0))" >"$logs/$1.rc"
	) &
	eval "pid_$(echo "$1" | tr -- - _)=\$!"
}

# finish NAME [REGEX]: waits for the stage, then prints its summary lines (go
# test's ok/FAIL/--- FAIL, and lines matching REGEX) or, when it failed, its
# whole log.
finish() {
	eval "wait \$pid_$(echo "$1" | tr -- - _)" || true
	read -r rc secs <"$logs/$1.rc"
	if [ "$rc" = 0 ]; then
		echo "== $1: ok ($secs s)"
		grep -E "^(ok|FAIL|--- FAIL|panic:)${2:+|$2}" "$logs/$1.log" || true
		echo "$1 $secs ok" >>"$logs/table"
	else
		echo "== $1: FAILED ($secs s, exit $rc), its log:"
		cat "$logs/$1.log"
		echo "$1 $secs FAIL" >>"$logs/table"
	fi
}

# run NAME FUNCTION [REGEX]: a stage in the foreground.
run() {
	start "$1" "$2"
	finish "$1" "${3:-}"
}

# The generated kernels match their generators. First and alone: go generate
# rewrites files under kernels/ that the other stages compile.
generate() {
	scripts/check-generate.sh
}

lint() {
	echo "== go vet ./... (with oneDNN)"
	go vet ./...
	echo "== staticcheck ./... (honnef.co/go/tools $STATICCHECK)"
	go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK" ./...
	echo "== CGO_ENABLED=0 go vet ./... (native kernels only)"
	CGO_ENABLED=0 go vet ./...
	echo "== CGO_ENABLED=0 go vet ./... for linux/arm64, darwin/arm64 and windows/amd64 (the plain-Go twins build everywhere)"
	for target in linux/arm64 darwin/arm64 windows/amd64; do
		echo "-- $target"
		CGO_ENABLED=0 GOOS="${target%/*}" GOARCH="${target#*/}" go vet ./...
	done
	echo "== go build -tags nodnnl ./... and -tags noasm ./... (plain-Go kernel twins)"
	go build -tags nodnnl ./...
	go build -tags noasm ./...
}

# The dependency audit: govulncheck's call-graph scan of every package
# against the local database, judged by scripts/vulncheck check (a called
# vulnerable symbol of a module fails the stage; the standard library's are
# printed: the Go toolchain is the machine's, fixed by go.mod's go line, and
# moves with the image, not with a dependency bump here).
vuln() {
	db=.build/vulndb-$VULNDB
	if [ ! -f "$db/index/modules.json" ]; then
		rm -rf .build/vulndb-*
		src=$(cd / && go mod download -json "golang.org/x/vulndb@$VULNDB" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[ -d "$src/data/osv" ] || { echo "vuln: golang.org/x/vulndb@$VULNDB has no data/osv (go mod download failed?)"; exit 1; }
		go run ./scripts/vulncheck index "$src/data/osv" "$db"
	fi
	echo "== govulncheck $GOVULNCHECK -db $db (golang.org/x/vulndb $VULNDB) ./..."
	go run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK" -db "file://$PWD/$db" -format json ./... >"$logs/vuln.json"
	go run ./scripts/vulncheck check <"$logs/vuln.json"
}

# The container image (docker/Dockerfile) built with podman and run: info,
# quantize, classify, health, serve over loopback. It says SKIP by name on a
# machine that cannot run podman (scripts/docker-test.sh).
docker_test() {
	scripts/docker-test.sh
}

# Every test under the race detector, in its -short form: -short leaves out
# the whole-dataset accuracy runs and shortens the slowest comparisons.
race() {
	go test -race -short -timeout 30m ./...
}

# The full form of the tests that -short skips or shortens, without -race:
# every test whose body reads testing.Short(), directly or through helpers
# (encodertest.SST2Accuracy, the kernels' oracleShapes), found in the source
# so that a new gate joins this stage by itself. The other tests ran above.
enclosing() { # PATTERN FILE...: the function around each line matching PATTERN
	pat=$1
	shift
	awk -v pat="$pat" '
		/^func / { name = $0; sub(/^func (\([^)]*\) )?/, "", name); sub(/[\[(].*/, "", name) }
		$0 ~ pat && name != "" { print FILENAME " " name }' "$@"
}
longtests() { # prints "dir Test" for each test with a full and a -short form
	src=$(git ls-files '*.go' | grep -v '^kernels/_gen/')
	tst=$(git ls-files '*_test.go' | grep -v '^kernels/_gen/')
	found=$(enclosing 'testing\.Short\(\)' $src | sort -u)
	seen=""
	while :; do
		todo=$(echo "$found" | awk '$2 !~ /^Test/ { print $2 }' | sort -u | grep -vxF "$seen" || true)
		[ -n "$todo" ] || break
		for h in $todo; do
			found="$found
$(enclosing "(^|[^A-Za-z0-9_])$h\\(" $tst)"
			seen="$seen
$h"
		done
	done
	echo "$found" | awk '$2 ~ /^Test/ { d = $1; if (d ~ /\//) sub(/\/[^\/]*$/, "", d); else d = "."; print d " " $2 }' | sort -u
}
long() {
	lt=$(longtests)
	re=$(echo "$lt" | awk '{ print $2 }' | sort -u | paste -sd'|' -)
	pkgs=$(echo "$lt" | awk '{ print "./" $1 }' | sort -u)
	echo "tests: $re"
	# shellcheck disable=SC2086 # pkgs is a list
	go test -timeout 30m -run "^($re)\$" $pkgs
}

# The native fallback: CGO_ENABLED=0, every test in its -short form, in the
# packages that import dnnl (there the selector has no oneDNN candidates
# and dnnl returns ErrUnavailable). The full forms differ from the short
# ones in sizes, not in code path, and ran in the long stage. The others (kernels, tokenizer, checkpoint, ...) have no
# cgo file nor a dependency on one: their code is the same with and without
# cgo, and the lint stage builds and vets everything with CGO_ENABLED=0.
nocgo_pkgs() { # each package whose test binary (pkg.test) links dnnl
	CGO_ENABLED=0 go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
		awk '$1 ~ /\.test$/ { p = $1; sub(/\.test$/, "", p)
			for (i = 2; i <= NF; i++) if ($i ~ /\/int8bert\/dnnl$/ || p ~ /\/int8bert\/dnnl$/) { print p; next } }'
}
nocgo() {
	# shellcheck disable=SC2046 # a list of packages
	CGO_ENABLED=0 go test -short -timeout 30m $(nocgo_pkgs)
}

# The kernels built as their Go twins (-tags noasm): the same tests then check
# the twins against the references.
noasm() {
	go test -tags noasm ./kernels/...
}

# The lower CPU tiers, forced, so that a tier no machine here has today
# stays tested (docs/DESIGN.md section 5.1): AVX2 only (AVX-512 and
# AVX-VNNI off, oneDNN capped at AVX2, where its INT8 would saturate and
# is refused), then AVX-VNNI without AVX-512, then AVX-512 without VNNI.
# On a CPU that lacks a tier the stage runs on what it has; a test that
# cannot run says so by name. Two tests are left out here (tierskip):
# dnnl's TestMaxISA, whose children set their own cap and ignore the
# tier's, so they would repeat the race and long stages' run of it (every
# other dnnl test runs capped); and kernels' TestVNNIFusedGoTwins, Go
# twins available on every CPU, whose code reads no CPU feature.
tierskip='^(TestMaxISA|TestVNNIFusedGoTwins)$'
tier_avx2() {
	export INT8BERT_CPU_DISABLE=avx512,avxvnni DNNL_MAX_CPU_ISA=AVX2
	echo "== go test ./kernels/... ./dnnl ./selector with the AVX2 tier forced (INT8BERT_CPU_DISABLE=$INT8BERT_CPU_DISABLE DNNL_MAX_CPU_ISA=$DNNL_MAX_CPU_ISA)"
	go test -count=1 -timeout 30m -skip "$tierskip" ./kernels/... ./dnnl ./selector
	echo "== go test -short ./smoothquant ./models/... ./bench and the CLI's bench, tune, info and demo tests with the AVX2 tier forced"
	go test -count=1 -short -timeout 30m ./smoothquant ./models/... ./bench
	go test -count=1 -short -timeout 30m -run 'Bench|Tune|Info|Demo' ./cmd/int8bert
	# Its linears are exact, so these figures are every tier's with FP32
	# attention; the AVX-512 VNNI runs add INT8 attention.
	echo "== the INT8 accuracy runs (SST-2 dev, the outlier stress test) with the AVX2 tier forced"
	go test -count=1 -timeout 30m -run 'TestSST2Int8$|TestOutlierStress' -v \
		./models/bert ./models/distilbert ./models/xlmr ./bench
}
# The AVX-VNNI tier (Alder Lake, Sierra Forest; Zen 5 with AVX-512 off):
# the VEX VPDPBUSD ymm kernel, oneDNN capped at avx2_vnni (exact INT8).
tier_avxvnni() {
	echo "== go test ./kernels/... ./selector with the AVX-VNNI tier forced (INT8BERT_CPU_DISABLE=avx512 DNNL_MAX_CPU_ISA=AVX2_VNNI)"
	INT8BERT_CPU_DISABLE=avx512 DNNL_MAX_CPU_ISA=AVX2_VNNI go test -count=1 -timeout 30m -skip "$tierskip" ./kernels/... ./selector
}
tier_novnni() {
	echo "== go test ./kernels/... ./dnnl ./selector with VNNI off (INT8BERT_CPU_DISABLE=avx512vnni,avxvnni DNNL_MAX_CPU_ISA=AVX512_CORE)"
	INT8BERT_CPU_DISABLE=avx512vnni,avxvnni DNNL_MAX_CPU_ISA=AVX512_CORE go test -count=1 -timeout 30m -skip "$tierskip" ./kernels/... ./dnnl ./selector
}

run generate generate '^check-generate'
if [ "${INT8BERT_SKIP_DOCKER:-}" = 1 ]; then
	echo "== docker image test (scripts/docker-test.sh): SKIPPED (INT8BERT_SKIP_DOCKER=1)"
else
	start docker docker_test
fi
start lint lint
start vuln vuln
run race race
finish lint '^(==|--)'
finish vuln '^(vulncheck|FAIL|reported)'
run long long '^tests:'
run nocgo nocgo
run noasm noasm
run tier-avx2 tier_avx2 '^--- |accuracy|e2e SQNR dB'
run tier-avxvnni tier_avxvnni
run tier-novnni tier_novnni
if [ "${INT8BERT_SKIP_DOCKER:-}" != 1 ]; then
	finish docker '^docker-test:'
fi

echo "== stage times"
printf '%-14s %7s  %s\n' stage seconds status
while read -r name secs st; do
	printf '%-14s %7s  %s\n' "$name" "$secs" "$st"
done <"$logs/table"
printf '%-14s %7s\n' total "$(($(date +%s) - tstart))"
if grep -q ' FAIL$' "$logs/table"; then
	echo "== FAILED: $(awk '$3 == "FAIL" { print $1 }' "$logs/table" | paste -sd' ' -)"
	exit 1
fi
echo "== all tests passed"
