#!/bin/sh
# Generates tei.pb.go and tei_grpc.pb.go from TEI v1.9.3's tei.proto
# (serve/testdata/tei-v1.9.3), run by go generate in this folder. protoc is
# Debian 12's (apt's protobuf-compiler, 3.21.x: its version is written into
# the headers, so another one would change the files); the plugins are the
# go.mod's tools, built by go tool.
set -eu
ver=$(protoc --version 2>/dev/null || true)
case "$ver" in
"libprotoc 3.21."*) ;;
*)
	echo "serve/teipb: want protoc 3.21.x (Debian 12's protobuf-compiler: scripts/setup.sh installs it); found: ${ver:-none}" >&2
	exit 1
	;;
esac
gen=$(go tool -n protoc-gen-go)
grpc=$(go tool -n protoc-gen-go-grpc)
m=Mtei.proto=github.com/int8bert/int8bert/serve/teipb
protoc -I ../testdata/tei-v1.9.3 \
	--plugin=protoc-gen-go="$gen" --plugin=protoc-gen-go-grpc="$grpc" \
	--go_out=. --go_opt=paths=source_relative --go_opt=$m \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative --go-grpc_opt=$m \
	tei.proto
