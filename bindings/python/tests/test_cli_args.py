"""python -m lmstream: --help, arguments checked before any model loads,
and the --chat commands, which never reach the model."""
import os
import subprocess
import sys

import pytest
from conftest import PKG_ROOT

ENV = dict(os.environ, PYTHONPATH=PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "lmstream", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=ENV)


def test_help():
    p = cli("--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: python -m lmstream")
    for option in ("--model", "--chat", "--replay", "--max-tokens"):
        assert option in p.stdout
    assert "/help" in p.stdout  # the description names the chat commands


@pytest.mark.parametrize("args,message", [
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--temperature", "-1"], "--temperature must be in [0, 100]"),
    (["--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--top-k", "-3"], "--top-k must be at least 0"),
    (["--seed", "-1"], "--seed must be in"),
    (["--stop", ""], "--stop needs a non-empty string"),
    (["--max-tokens", "many"], "invalid int value"),
])
def test_bad_arguments_fail_before_the_model(args, message):
    # The model does not exist: a usage error (2) rather than the missing
    # model (1) shows the arguments were checked first.
    p = cli("--model", "/nonexistent/model.gguf", *args, "hi")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert message in p.stderr
    assert p.stderr.startswith("usage:")
    assert "not found" not in p.stderr and "Traceback" not in p.stderr


def test_replay_with_model_is_a_usage_error():
    p = cli("--replay", "--model", "x.gguf", "hi")
    assert p.returncode == 2 and "--replay runs without a model" in p.stderr


def test_chat_commands_never_reach_the_model():
    p = cli("--replay", "--chat", stdin="/help\n/frobnicate\none\n/reset\ntwo\n/quit\nthree\n")
    assert p.returncode == 0, p.stderr
    # /help lists every command, on stderr.
    for command in ("/help", "/reset", "/quit"):
        assert command in p.stderr
    assert "unknown command /frobnicate" in p.stderr
    # The replay demo echoes what it was sent: only real messages were.
    said = [line for line in p.stdout.splitlines() if "You said" in line]
    assert len(said) == 2, p.stdout
    assert "turn 1) You said: \u201cone\u201d" in said[0]
    # After /reset the conversation starts over: "two" is turn 1 again.
    assert "turn 1) You said: \u201ctwo\u201d" in said[1]
    assert "three" not in p.stdout  # /quit left before it


def test_a_line_that_only_looks_like_a_command_is_sent():
    p = cli("--replay", "--chat", stdin="/usr/bin is where?\n/quit\n")
    assert p.returncode == 0, p.stderr
    assert "You said: \u201c/usr/bin is where?\u201d" in p.stdout
