#!/bin/sh
# Installs what int8bert needs on Debian/Ubuntu and makes oneDNN visible to
# pkg-config. Safe to run again: it only acts on what is missing.
#
#   scripts/setup.sh          oneDNN (libdnnl-dev), pkg-config, gcc, and
#                             protoc (protobuf-compiler, for go generate
#                             ./serve/teipb and scripts/check-generate.sh)
#
# Debian's libdnnl-dev ships no dnnl.pc; this writes one for it, to
# /usr/local/lib/pkgconfig when that is writable, else to .build/pkgconfig in
# this checkout (the Makefile adds that folder to PKG_CONFIG_PATH).
# A oneDNN in another prefix: export PKG_CONFIG_PATH=<prefix>/lib/pkgconfig
# before running this, and it is used as it is.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
local_pc="$here/.build/pkgconfig"
export PKG_CONFIG_PATH="$local_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

need=""
command -v go >/dev/null 2>&1 || { echo "setup: Go 1.26 is required and not on PATH" >&2; exit 1; }
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v protoc >/dev/null 2>&1 || need="$need protobuf-compiler"
if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists dnnl; } &&
   [ ! -f /usr/include/oneapi/dnnl/dnnl.h ]; then
	need="$need libdnnl-dev"
fi

if [ -n "$need" ]; then
	if [ "$(id -u)" = 0 ]; then
		sudo=""
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo"
	else
		echo "setup: missing:$need" >&2
		echo "setup: run as root (or with sudo): apt-get install -y$need" >&2
		echo "setup: or build without oneDNN: CGO_ENABLED=0 or -tags nodnnl" >&2
		exit 1
	fi
	echo "setup: installing$need" >&2
	$sudo apt-get update -qq >/dev/null 2>&1 || true
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi

if pkg-config --exists dnnl; then
	exit 0
fi

# Write a dnnl.pc for a oneDNN installed without one (Debian's package).
hdr=/usr/include/oneapi/dnnl/dnnl_version.h
lib=$(ls /usr/lib/*/libdnnl.so /usr/lib/libdnnl.so /usr/lib64/libdnnl.so 2>/dev/null | head -n 1 || true)
if [ ! -f "$hdr" ] || [ -z "$lib" ]; then
	echo "setup: oneDNN headers or libdnnl.so not found; install libdnnl-dev" >&2
	exit 1
fi
ver=$(awk '/define DNNL_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v ? "." : "") $3} END {print v}' "$hdr")
dir=/usr/local/lib/pkgconfig
if ! { mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; }; then
	dir="$local_pc"
	mkdir -p "$dir"
fi
cat >"$dir/dnnl.pc" <<PC
# Written by int8bert's scripts/setup.sh for a oneDNN installed without dnnl.pc.
prefix=/usr
libdir=$(dirname "$lib")
includedir=/usr/include

Name: dnnl
Description: oneAPI Deep Neural Network Library (oneDNN)
Version: $ver
Libs: -L\${libdir} -ldnnl
Cflags: -I\${includedir}
PC
echo "setup: wrote $dir/dnnl.pc for oneDNN $ver" >&2
