#!/usr/bin/env bash
# Checks that the Go toolchain is at least the version go.mod asks for,
# before a build fails somewhere deep with an error that does not say so.
#
#   check_go.sh [GO]    GO is the go command (default: go)
#
# Go 1.21 and later fetch the toolchain go.mod names by themselves unless
# GOTOOLCHAIN=local forbids it (some distributions and tarballs set that in
# $GOROOT/go.env), so for them this names the setting to change. Go 1.20 and
# older (Debian 12 ships 1.19) cannot; for them this downloads the same
# toolchain into ~/sdk/go<version>, which the Makefile then uses. Where
# nothing works, it prints the commands that install a new enough Go.
set -euo pipefail
cd "$(dirname "$0")/../.."
go=${1:-go}

want=$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' go.mod)
if ! command -v "$go" >/dev/null 2>&1; then
  have=""
else
  # GOTOOLCHAIN=local, outside the module: report the Go that is
  # installed, not one go.mod would switch it to (nor refuse because of it).
  have=$(cd / && GOTOOLCHAIN=local "$go" env GOVERSION 2>/dev/null || true)
  have=${have#go}
fi

# older A B: version A is older than B (dotted numbers, missing parts 0).
older() {
  local IFS=. i
  local -a a=($1) b=($2)
  for i in 0 1 2; do
    local x=${a[i]:-0} y=${b[i]:-0}
    x=${x%%[!0-9]*} y=${y%%[!0-9]*}
    ((10#${x:-0} < 10#${y:-0})) && return 0
    ((10#${x:-0} > 10#${y:-0})) && return 1
  done
  return 1
}

if [ -n "$have" ] && ! older "$have" "$want"; then
  exit 0
fi

arch=$(uname -m)
case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
tarball="https://go.dev/dl/go$want.linux-$arch.tar.gz"
sudo="sudo "; [ "$(id -u)" -ne 0 ] || sudo=""
install_go="curl -fsSL $tarball | ${sudo}tar -C /usr/local -xz && export PATH=/usr/local/go/bin:\$PATH"
# A minimal Debian has no curl (nor the CA certificates it needs).
command -v curl >/dev/null 2>&1 || install_go="${sudo}apt-get install -y curl ca-certificates && $install_go"

if [ -z "$have" ]; then
  echo "lmstream needs Go $want or newer (go.mod), and there is no '$go' command. Install it with:" >&2
  echo "  $install_go" >&2
  exit 1
fi

if older "$have" 1.21; then
  # Go 1.20 and older know nothing of toolchain downloads, but their go
  # command can still download the module Go 1.21+ would switch to
  # (golang.org/toolchain, from the module proxy, checked against the
  # checksum database). Unpacked like `golang.org/dl` does, in
  # ~/sdk/go<version>, where the Makefile looks for it.
  sdk="$HOME/sdk/go$want"
  mod="golang.org/toolchain@v0.0.1-go$want.linux-$arch"
  echo "go-version: go$have is older than go.mod's go $want and cannot switch toolchains itself;"
  echo "go-version: fetching $mod (about 70 MB) into $sdk ..."
  tmp=$(mktemp -d)
  trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
  # -json reports a failure in its "Error" field, on stdout.
  json=$(cd "$tmp" && GO111MODULE=on GOFLAGS=-modcacherw GOMODCACHE="$tmp/mod" "$go" mod download -json "$mod") || true
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  if [ -n "$dir" ] && [ -f "$dir/bin/go" ]; then
    mkdir -p "$HOME/sdk"
    rm -rf "$sdk.new"
    cp -R "$dir" "$sdk.new"
    chmod -R u+w "$sdk.new"
    # Module files carry no modes: the programs need theirs back.
    chmod 755 "$sdk.new"/bin/* "$sdk.new"/pkg/tool/*/*
    rm -rf "$sdk" && mv "$sdk.new" "$sdk"
    echo "go-version: using $sdk/bin/go ($("$sdk/bin/go" version))"
    exit 0
  fi
  sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/go mod download: \1/p' <<<"$json" >&2
  echo "lmstream needs Go $want or newer (go.mod); '$go' is go$have, and fetching go$want failed (above)." >&2
  echo "Install Go $want from go.dev (Debian 12's golang-go is 1.19), then run make again:" >&2
  echo "  $install_go" >&2
  exit 1
fi

# Go 1.21+: the go command switches to go.mod's toolchain when GOTOOLCHAIN
# allows it. Try, so the download happens here, with a line saying so.
echo "go-version: go$have is older than go.mod's go $want; fetching go$want with Go's toolchain download (GOTOOLCHAIN=auto) ..."
if got=$(GOTOOLCHAIN=auto "$go" env GOVERSION) && [ "$got" != "go$have" ]; then
  if [ "$(cd / && "$go" env GOTOOLCHAIN)" = local ]; then
    echo "go-version: go$want is downloaded, but GOTOOLCHAIN is 'local' here; run make with GOTOOLCHAIN=auto:" >&2
    echo "  make GOTOOLCHAIN=auto ...   (or once for all: go env -w GOTOOLCHAIN=auto)" >&2
    exit 1
  fi
  exit 0
fi
echo "go-version: go$have could not fetch go$want (no network to proxy.golang.org?). Install it with:" >&2
echo "  $install_go" >&2
exit 1
