"""Shared fixtures. The tests import the package from this source tree (so
they run without installing it) and load build/liblmstream.so through the
package's own fallback, or LMSTREAM_LIBRARY."""
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
REPO = os.path.normpath(os.path.join(PKG_ROOT, "..", ".."))
sys.path.insert(0, PKG_ROOT)

import pytest  # noqa: E402

import lmstream  # noqa: E402

CONFORMANCE_DIR = os.path.join(REPO, "tests", "conformance")
HEADER = os.path.join(REPO, "include", "lmstream.h")
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

# A small vocabulary: 0 is the end token, 1 a special token.
VOCAB = [b"</s>", b"<|im_end|>", b"H", b"e", b"l", b"o", b" ", b"x", b"\xe4", b"\xb8", b"\xad"]
EOS = 0


@pytest.fixture
def rt():
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=EOS, special_ids=[0, 1], max_slots=64) as r:
        yield r


@pytest.fixture
def ctrl_c():
    """Ctrl-C raises KeyboardInterrupt here, and a child started meanwhile
    gets SIGINT's default, as in a terminal: a test runner started as a
    background job of a non-interactive shell inherits SIGINT ignored, and
    then neither would happen."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def wait_idle(runtime, timeout=2.0):
    """Waits until no slot is active and nothing is queued; returns the
    stats. Fails the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        st = runtime.stats()
        if st["active_slots"] == 0 and st["queued"] == 0:
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"the request still holds a slot after {timeout}s: {st}")
        time.sleep(0.002)
