"""python -m lmstream: the replay demo streams, Ctrl-C stops it cleanly."""
import os
import signal
import subprocess
import sys
import time

from conftest import PKG_ROOT

ENV = dict(os.environ, PYTHONPATH=PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_replay_demo():
    p = subprocess.run([sys.executable, "-m", "lmstream", "--replay", "--stats", "héllo"],
                       capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode == 0, p.stderr
    assert "You said: \u201chéllo\u201d" in p.stdout and "中文, 😀" in p.stdout
    assert "tokens" in p.stderr and "end_id" in p.stderr


def test_chat_replay():
    p = subprocess.run([sys.executable, "-m", "lmstream", "--replay", "--chat"],
                       input="one\ntwo\n/quit\n", capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode == 0, p.stderr
    assert "turn 1) You said: \u201cone\u201d" in p.stdout
    assert "turn 2) You said: \u201ctwo\u201d" in p.stdout  # the conversation is kept


def test_ctrl_c_stops_generation(ctrl_c):
    p = subprocess.Popen([sys.executable, "-m", "lmstream", "--replay", "--max-tokens", "1000",
                          "x" * 300], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    first = p.stdout.read(10)  # streaming has begun
    assert first
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert time.monotonic() - t0 < 1.0
    assert p.returncode == 130, err
    assert b"[stopped]" in err and b"Traceback" not in err


def test_missing_model_message(tmp_path):
    p = subprocess.run([sys.executable, "-m", "lmstream", "--model", str(tmp_path / "none.gguf"), "hi"],
                       capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode != 0 and "not found" in p.stderr
