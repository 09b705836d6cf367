#!/bin/bash
# Builds docker/Dockerfile with podman (no Docker engine needed) and checks the
# image: "int8bert info", a quantize of the shipped model, a classify and the
# health probe, then "int8bert serve" answering /health, /embed and /predict to
# a client on this host over loopback, and draining on SIGTERM (exit 0).
#
#   scripts/docker-test.sh
#
# Base images are not pulled from any registry: the debian:bookworm(-slim)
# base is made with debootstrap from this host's Debian mirror and the
# golang:1.26-bookworm builder from it plus this host's Go toolchain and CA
# bundle, so that the Dockerfile's FROM lines resolve to them here and to the
# real images elsewhere (docs/DESIGN.md section 6). podman's configuration
# and run state are private to the test (a temporary folder); its image
# storage is kept in $INT8BERT_DOCKER_CACHE (default
# /var/cache/int8bert-docker-test) holding only the base and builder images,
# so a rerun skips making them; INT8BERT_DOCKER_CACHE=off keeps everything
# in the temporary folder and removes it at the end.
#
# A machine that cannot run podman at all (not root and no password-less
# sudo, not Linux x86-64, too little disk, no apt-get to install it) prints
# "docker-test: SKIP: <reason>" and exits 0, so CI says so by name.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

skip() {
	echo "docker-test: SKIP: $*"
	exit 0
}
fail() {
	echo "docker-test: FAIL: $*" >&2
	exit 1
}

[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || skip "needs Linux on x86-64 (this is $(uname -s)/$(uname -m))"
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		exec sudo -n --preserve-env=PATH,INT8BERT_DOCKER_CACHE,GOFLAGS,GOPROXY "$0" "$@"
	fi
	skip "podman here needs root: not root and no password-less sudo"
fi
command -v go >/dev/null 2>&1 || skip "no Go toolchain on PATH to copy into the builder image"

cache=${INT8BERT_DOCKER_CACHE:-/var/cache/int8bert-docker-test}
[ "$cache" = off ] && cache=""

# Disk: about 2 GB while it runs (images, build layers, the Go toolchain in
# the build context); the check is on the folders that receive them.
need_mb=2500
tmpbase=${TMPDIR:-/tmp}
for d in "$tmpbase" ${cache:+"$(dirname "$cache")"}; do
	free_mb=$(df -Pm "$d" | awk 'NR == 2 {print $4}')
	if [ "${free_mb:-0}" -lt "$need_mb" ]; then
		skip "needs about ${need_mb} MB free on $d for images and build layers; $d has ${free_mb:-0} MB"
	fi
done

t0=$(date +%s)
tstep=$t0
step() {
	local now
	now=$(date +%s)
	echo "docker-test: $1 ($((now - tstep)) s)"
	tstep=$now
}

missing=""
for c in podman debootstrap runc curl; do
	command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
if [ -n "$missing" ]; then
	command -v apt-get >/dev/null 2>&1 || skip "missing:$missing, and no apt-get to install them"
	echo "docker-test: installing$missing"
	apt-get update -qq >/dev/null 2>&1 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null ||
		fail "apt-get install$missing failed"
	step "installed$missing"
fi

work=$(mktemp -d "$tmpbase/int8bert-docker-test.XXXXXX")
if [ -n "$cache" ]; then
	mkdir -p "$cache"
	graphroot=$cache/storage
else
	graphroot=$work/storage
fi
mkdir -p "$work/run" "$graphroot"

# Private podman configuration: runc (crun refuses this cgroup layout), the
# limits root may set here, overlay storage, short names searched on
# docker.io (where the tags made below live), nothing pulled.
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] && nproc=32768
[ "$nofile" = unlimited ] && nofile=1048576
[ "$nproc" -gt 32768 ] && nproc=32768
cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
events_logger = "file"
cgroup_manager = "cgroupfs"
EOF
cat >"$work/storage.conf" <<EOF
[storage]
driver = "overlay"
runroot = "$work/run"
graphroot = "$graphroot"
EOF
cat >"$work/registries.conf" <<EOF
unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"
EOF
export CONTAINERS_CONF=$work/containers.conf
export CONTAINERS_STORAGE_CONF=$work/storage.conf
export CONTAINERS_REGISTRIES_CONF=$work/registries.conf
export BUILDAH_ISOLATION=oci
unset DOCKER_HOST CONTAINER_HOST

image=localhost/int8bert:docker-test
server=int8bert-docker-test-$$
cleanup() {
	status=$?
	set +e
	podman rm -f "$server" >/dev/null 2>&1
	podman rm -f "int8bert-docker-test-tei-$$" >/dev/null 2>&1
	# Build leftovers (buildah's working containers) and the test's image.
	for c in $(podman ps -aq --external 2>/dev/null); do podman rm -f "$c" >/dev/null 2>&1; done
	podman rmi -f "$image" >/dev/null 2>&1
	podman image prune -f >/dev/null 2>&1
	if [ -z "$cache" ]; then
		podman system reset -f >/dev/null 2>&1
	fi
	chmod -R u+w "$work" 2>/dev/null
	rm -rf "$work"
	echo "docker-test: cleaned up (total $(($(date +%s) - t0)) s)"
	exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The base image, debian:bookworm and bookworm-slim, by debootstrap from
# this host's mirror, with this host's apt sources so apt works inside.
gover=$(go env GOVERSION)
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	sources=/etc/apt/sources.list.d/debian.sources
	mirror=$(awk '/^URIs:/ {print $2; exit}' "$sources")
else
	sources=/etc/apt/sources.list
	mirror=$(awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit} $1 == "deb" && $2 ~ /^\[/ {print $3; exit}' "$sources")
fi
[ -n "$mirror" ] || fail "no Debian mirror found in $sources"
key=$(cat "$sources" | sha256sum | cut -c1-12)
if podman image exists "localhost/int8bert-docker-test-base:$key" && podman image exists docker.io/library/debian:bookworm-slim; then
	step "base image debian:bookworm from cache ($graphroot)"
else
	rootfs=$work/rootfs
	debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; fail "debootstrap from $mirror failed"; }
	rm -f "$rootfs"/etc/apt/sources.list "$rootfs"/etc/apt/sources.list.d/*
	cp "$sources" "$rootfs/etc/apt/${sources#/etc/apt/}"
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
	tar -C "$rootfs" -c . | podman import - "localhost/int8bert-docker-test-base:$key" >/dev/null
	rm -rf "$rootfs"
	for t in localhost/debian:bookworm localhost/debian:bookworm-slim docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim; do
		podman tag "localhost/int8bert-docker-test-base:$key" "$t"
	done
	step "base image debian:bookworm made by debootstrap from $mirror"
fi

# 2. The Go builder image golang:1.26-bookworm: the base, gcc, pkg-config,
# libdnnl-dev, this host's Go toolchain (Debian's golang-go is too old) and
# CA bundle (the Go proxy is reached through a TLS proxy here).
bkey=$(printf '%s %s %s' "$key" "$gover" "$(sha256sum /etc/ssl/certs/ca-certificates.crt | cut -c1-12)" | sha256sum | cut -c1-12)
if podman image exists "localhost/int8bert-docker-test-builder:$bkey" && podman image exists docker.io/library/golang:1.26-bookworm; then
	step "builder image golang:1.26-bookworm ($gover) from cache"
else
	ctx=$work/builder
	mkdir -p "$ctx"
	cp -a "$(go env GOROOT)" "$ctx/go"
	cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
	cat >"$ctx/Containerfile" <<'EOF'
FROM localhost/debian:bookworm
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev pkg-config libdnnl-dev git \
 && rm -rf /var/lib/apt/lists/*
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY go /usr/local/go
ENV GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
WORKDIR /go
EOF
	podman build --pull=never --network host -q -t "localhost/int8bert-docker-test-builder:$bkey" "$ctx" >"$work/builder.log" 2>&1 ||
		{ tail -30 "$work/builder.log" >&2; fail "building the Go builder image failed"; }
	rm -rf "$ctx"
	for t in localhost/golang:1.26-bookworm docker.io/library/golang:1.26-bookworm; do
		podman tag "localhost/int8bert-docker-test-builder:$bkey" "$t"
	done
	step "builder image golang:1.26-bookworm made ($gover)"
fi

# 3. The image itself, as a user would build it. --format docker keeps the
# HEALTHCHECK (the OCI format has none).
if ! podman build --pull=never --network host --format docker -f docker/Dockerfile -t "$image" . >"$work/build.log" 2>&1; then
	tail -40 "$work/build.log" >&2
	fail "podman build -f docker/Dockerfile failed"
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
step "podman build -f docker/Dockerfile: $image, $((size / 1000000)) MB"

prun() { podman run --rm --pull=never --network none --health-cmd none "$@"; }

# 4. What the image holds: a non-root user, the health check, no tuning
# record baked in, and oneDNN loading.
user=$(podman image inspect --format '{{.Config.User}}' "$image")
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || fail "the image runs as root (User=$user)"
podman image inspect "$image" | tr -d ' \n' | grep -q '"int8bert","health"' || fail "the image has no HEALTHCHECK running int8bert health"
prun --entrypoint /bin/sh "$image" -c '
	test "$(id -u)" != 0 || { echo "runs as root"; exit 1; }
	test -f /opt/int8bert/models/sst2-int8/model.int8.safetensors || { echo "no shipped INT8 model"; exit 1; }
	test ! -e /opt/int8bert/models/sst2-int8/tuning.json || { echo "a CPU-specific tuning.json is baked into the image"; exit 1; }
	test -w /var/cache/int8bert || { echo "the tuning cache folder is not writable"; exit 1; }' ||
	fail "image contents"
prun "$image" info >"$work/info.txt" 2>&1 || { cat "$work/info.txt" >&2; fail "int8bert info in the image"; }
grep -qi onednn "$work/info.txt" || { cat "$work/info.txt" >&2; fail "int8bert info names no oneDNN"; }
step "int8bert info in the image (uid $user, no tuning.json baked in)"
# The container's limits, not the host's (docs/DESIGN.md section 9.10): one
# CPU of quota and a memory limit must show in what info derives.
prun --cpus 1 --memory 700m "$image" info >"$work/info-limited.txt" 2>&1 ||
	{ cat "$work/info-limited.txt" >&2; fail "int8bert info in the image under --cpus 1 --memory 700m"; }
grep -Eq '^cpus: +1 \(cgroup v[12] ' "$work/info-limited.txt" &&
	grep -Eq '^memory: +limit 700\.0 MiB \(cgroup v[12] .*GOMEMLIMIT 630\.0 MiB' "$work/info-limited.txt" ||
	{ cat "$work/info-limited.txt" >&2; fail "int8bert info under --cpus 1 --memory 700m does not derive 1 CPU and GOMEMLIMIT from the cgroup"; }
step "int8bert info under --cpus 1 --memory 700m: 1 CPU from the quota, GOMEMLIMIT 630 MiB from the limit"

# 5. A quantize of the shipped FP32 model (mounted read-only) into a folder
# of this host, then a classify with the result and with the shipped model.
mkdir -p "$work/out"
chmod 0777 "$work/out"
prun -v "$repo/assets:/assets:ro" -v "$work/out:/out" "$image" \
	quantize --model /assets/sst2-xlmr-mini --calib /assets/sst2/calib.tsv --mode static -o /out/sst2-int8 >"$work/quantize.log" 2>&1 ||
	{ tail -20 "$work/quantize.log" >&2; fail "int8bert quantize in the image"; }
[ -f "$work/out/sst2-int8/model.int8.safetensors" ] || fail "quantize wrote no model.int8.safetensors"
step "int8bert quantize (static) of assets/sst2-xlmr-mini in the image"
for m in /out/sst2-int8 /opt/int8bert/models/sst2-int8; do
	out=$(prun -v "$work/out:/out:ro" "$image" classify --model "$m" "a gorgeous, witty, seductive movie." 2>"$work/classify.log") ||
		{ cat "$work/classify.log" >&2; fail "int8bert classify --model $m"; }
	echo "$out" | grep -q '"positive"' || fail "classify --model $m: want positive, got $out"
done
step "int8bert classify with the quantized and the shipped model"

# 6. The health probe with nothing listening must say unhealthy (exit 1).
set +e
prun "$image" health --addr 127.0.0.1:8080 --timeout 2s >"$work/health.log" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$work/health.log" >&2; fail "int8bert health with no server: exit $rc, want 1"; }

# 7. serve, on a free loopback port with host networking, asked from here.
help=$(prun "$image" help 2>&1) || fail "int8bert help in the image"
printf '%s\n' "$help" | grep -q '^ *int8bert serve' || fail "int8bert help in the image lists no serve command"
{
	port=""
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			port=$p
			break
		fi
	done
	[ -n "$port" ] || fail "no free loopback port found"
	podman run -d --pull=never --network host --health-cmd none --name "$server" "$image" \
		serve --model sst2=/opt/int8bert/models/sst2-int8 --addr "127.0.0.1:$port" --instances 1 --threads-per-instance 1 >/dev/null
	base=http://127.0.0.1:$port
	ready=""
	for _ in $(seq 240); do
		if [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ]; then
			ready=1
			break
		fi
		[ "$(podman inspect --format '{{.State.Running}}' "$server")" = true ] || break
		sleep 0.5
	done
	[ -n "$ready" ] || { podman logs "$server" 2>&1 | tail -30 >&2; fail "serve: /health never answered 200"; }
	step "serve: /health 200 on 127.0.0.1:$port"
	podman exec "$server" int8bert health --addr "127.0.0.1:$port" >/dev/null || fail "int8bert health inside the container"
	post() { # route body -> prints the body, fails on a status other than 200
		local code
		code=$(curl -s -o "$work/resp" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$base$1")
		[ "$code" = 200 ] || { cat "$work/resp" >&2; fail "POST $1: status $code"; }
		cat "$work/resp"
	}
	emb=$(post /embed '{"inputs": ["a gorgeous, witty, seductive movie.", "a dull mess"]}')
	echo "$emb" | tr -d ' \n' | grep -Eq '^\[\[-?[0-9][^]]*\],\[-?[0-9][^]]*\]\]$' ||
		fail "POST /embed: want [[floats],[floats]], got $(echo "$emb" | cut -c1-200)"
	pred=$(post /predict '{"inputs": "a gorgeous, witty, seductive movie."}')
	echo "$pred" | tr -d ' \n' | grep -Eq '^\[\{"score":[0-9.eE+-]+,"label":"(positive|negative)"\}(,\{"score":[0-9.eE+-]+,"label":"(positive|negative)"\})*\]$' ||
		fail "POST /predict: want TEI's [{\"score\":..,\"label\":positive|negative}...], got $(echo "$pred" | cut -c1-200)"
	echo "$pred" | tr -d ' \n' | grep -Eq '^\[\{"score":[0-9.eE+-]+,"label":"positive"' || fail "POST /predict: want positive first, got $pred"
	step "serve: POST /embed and /predict answered (predict: $(echo "$pred" | tr -d ' \n' | cut -c1-80))"
	podman stop -t 30 "$server" >/dev/null
	code=$(podman inspect --format '{{.State.ExitCode}}' "$server")
	[ "$code" = 0 ] || { podman logs "$server" 2>&1 | tail -20 >&2; fail "serve after SIGTERM: exit $code, want 0"; }
	step "serve: SIGTERM drained, exit 0"
}

# 8. TEI's documented command line, unchanged (docs/source/en/quick_tour.md:
# "docker run ... -v $volume:/data <image> --model-id /data/<model>"): TEI's
# arguments without "serve", the image's PORT=80 bound by the non-root user,
# TEI's metrics port 9000 (its exporter answers on every path, so health's
# GET of it says it is up), and the image's own HEALTHCHECK command.
tei=int8bert-docker-test-tei-$$
podman run -d --pull=never --network none --health-cmd none --name "$tei" -v "$repo/assets:/data:ro" "$image" \
	--model-id /data/sst2-xlmr-mini --max-batch-tokens 2048 --auto-truncate true >/dev/null
ready=""
for _ in $(seq 240); do
	if podman exec "$tei" int8bert health --addr 127.0.0.1:80 --timeout 2s >/dev/null 2>&1; then
		ready=1
		break
	fi
	[ "$(podman inspect --format '{{.State.Running}}' "$tei")" = true ] || break
	sleep 0.5
done
[ -n "$ready" ] || { podman logs "$tei" 2>&1 | tail -30 >&2; podman rm -f "$tei" >/dev/null; fail "TEI's form (--model-id, no serve): /health never answered 200 on port 80"; }
[ "$(podman exec "$tei" id -u)" != 0 ] || { podman rm -f "$tei" >/dev/null; fail "TEI's form runs as root"; }
podman exec "$tei" int8bert health --addr http://127.0.0.1:9000 >/dev/null ||
	{ podman rm -f "$tei" >/dev/null; fail "TEI's form: nothing on the metrics port 9000"; }
mapfile -t hc < <(podman image inspect "$image" | tr -d '\n' | grep -o '"Test": *\[[^]]*\]' | head -1 | grep -o '"[^"]*"' | tr -d '"' | tail -n +2 | grep -vx 'CMD\|CMD-SHELL')
[ "${hc[0]:-}" = int8bert ] || { podman rm -f "$tei" >/dev/null; fail "no HEALTHCHECK command found in the image (${hc[*]:-})"; }
podman exec "$tei" "${hc[@]}" >/dev/null || { podman rm -f "$tei" >/dev/null; fail "the image's HEALTHCHECK (${hc[*]}) fails on TEI's port 80"; }
podman stop -t 30 "$tei" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$tei")
podman rm -f "$tei" >/dev/null
[ "$code" = 0 ] || fail "TEI's form after SIGTERM: exit $code, want 0"
step "TEI's docker run line: --model-id /data/..., port 80 as uid $user, metrics on 9000, HEALTHCHECK ok"

echo "docker-test: ok (image $((size / 1000000)) MB, $(($(date +%s) - t0)) s)"
