#!/usr/bin/env bash
# The fresh-machine check, run by hand (not by CI): does `make run` work on a
# stock Debian 12, or say exactly what to install?
#
#   sudo tests/fresh/debian12.sh [ROOT]
#
# Builds a Debian 12 (bookworm) root with debootstrap (once, in BASE, default
# /var/tmp/lmstream-debian12-base; each run works in a copy of it in ROOT, an
# empty or new directory, default a new one under /tmp), with what a new
# user would have:
# Debian's Go (golang-go, 1.19, older than go.mod wants), gcc, make, git and
# Debian's own python3 without pip. It copies a clean clone of this
# repository's HEAD into ROOT/src and runs `make run` there with chroot.
#
# When `make run` fails, its last message must name the fix as an indented
# command line (apt-get install ..., or the Go download): the check runs that
# line, exactly as printed, and tries again, up to three times. It passes when
# `make run` streams an answer, and prints every fix it had to apply: that
# list is what a user on Debian 12 has to do.
#
# Needs root, debootstrap (apt-get install debootstrap) and the network
# (deb.debian.org, proxy.golang.org, pypi.org). MIRROR overrides the
# Debian mirror. The chroot gets /proc, /sys and /dev mounted and the host's
# resolv.conf; they are unmounted on exit. HOST_CA=1: see below. Delete ROOT
# afterwards (or keep it to look around: chroot ROOT bash).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" -eq 0 ] || { echo "fresh: run as root (debootstrap and chroot need it)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh: needs debootstrap: apt-get install debootstrap" >&2; exit 1; }

# The stock root is made once in BASE and copied for every run, so each run
# starts from the same untouched Debian and a rerun skips debootstrap.
base=${BASE:-/var/tmp/lmstream-debian12-base}
root=${1:-$(mktemp -d /tmp/lmstream-debian12.XXXXXX)}
mkdir -p "$root"
root=$(cd "$root" && pwd)
[ -z "$(ls -A "$root")" ] || { echo "fresh: $root is not empty" >&2; exit 1; }
echo "fresh: Debian 12 root in $root (a copy of $base)"

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

if [ ! -x "$base/usr/bin/apt-get" ]; then
  # minbase plus what "Debian 12 with Go" means: the golang-go package,
  # a C compiler and make, git to clone with, the CA certificates HTTPS
  # needs. python3 is Debian's, without pip or venv.
  rm -rf "$base.new"
  debootstrap --variant=minbase \
    --include=ca-certificates,git,make,gcc,libc6-dev,golang-go,python3 \
    bookworm "$base.new" "$mirror"
  mv "$base.new" "$base"
fi
cp -a "$base/." "$root/"

for fs in proc sys dev dev/pts; do
  mountpoint -q "$root/$fs" || { mount --bind "/$fs" "$root/$fs"; mounted+=("$root/$fs"); }
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# Behind a TLS-intercepting proxy the host trusts a CA that a stock Debian
# does not: HOST_CA=1 lends the host's bundle, so HTTPS works in the root
# as it would on a machine with a direct connection.
if [ "${HOST_CA:-0}" = 1 ]; then
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi

# A clean clone of HEAD: what `git clone` gives a new user, without the
# host's build outputs, models or virtual environment.
rm -rf "$root/src"
git clone -q --no-local "$repo" "$root/src"
git -C "$root/src" checkout -q "$(git -C "$repo" rev-parse HEAD)"

inside() { chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -c "$1"; }

echo "fresh: $(inside 'go version; python3 --version; gcc --version | head -1')"
fixes=()
for try in 1 2 3 4; do
  log="$root/make-run.$try.log"
  echo "fresh: make run (try $try)"
  # pipefail: the pipeline fails when make does.
  if inside 'cd /src && make run PROMPT="What is the capital of France?"' 2>&1 | tee "$log"; then
    echo
    echo "fresh: make run streamed an answer on Debian 12 after ${#fixes[@]} fix(es):"
    for f in "${fixes[@]+"${fixes[@]}"}"; do echo "  $f"; done
    exit 0
  fi
  [ "$try" -lt 4 ] || break
  # The fix: the last indented line of the failure that installs something.
  fix=$(grep -E '^  .*(apt-get install|go\.dev/dl|sdk/go)' "$log" | tail -1 | sed 's/^  //; s/[[:space:]]*(.*)$//')
  if [ -z "$fix" ]; then
    echo "fresh: make run failed without naming a fix (log: $log)" >&2
    exit 1
  fi
  echo "fresh: applying the fix make run printed: $fix"
  fixes+=("$fix")
  inside "export DEBIAN_FRONTEND=noninteractive; apt-get update -q >/dev/null; $fix"
done
echo "fresh: make run still fails after applying: ${fixes[*]}" >&2
exit 1
