"""A forked child gets ForkedProcess at once instead of a hang (the Go
runtime does not survive fork)."""
import os
import time

import pytest
from conftest import VOCAB

import lmstream


def run_in_child(fn, timeout=5.0):
    """Runs fn in a forked child; returns (exit code, seconds)."""
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        code = 99
        try:
            code = fn()
        except BaseException:
            code = 98
        finally:
            os._exit(code)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hangs")
        time.sleep(0.01)


def test_forked_child_raises():
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        s = rt.generate("p", script=[[2]] * 100, delay_ms=5)

        def child():
            calls = [
                lambda: rt.generate("p", script=[[2]]),
                lambda: rt.complete("p", script=[[2]]),
                lambda: rt.stats(),
                lambda: list(s),
                lambda: s.read(),
                lambda: lmstream.Runtime.replay(vocab=VOCAB, eos_id=0),
            ]
            for call in calls:
                try:
                    call()
                    return 1
                except lmstream.ForkedProcess as e:
                    assert e.code == -9
            # The library's own guard answers too, without entering Go.
            from lmstream import _lib
            assert _lib.lib.lms_runtime_stats(1, None, 0, None) == _lib.LMS_ERR_FORKED
            s.close()  # harmless in the child
            return 0

        code, secs = run_in_child(child)
        assert code == 0
        assert secs < 1.0
        # The parent is unaffected.
        assert s.text() == "H" * 100
        assert rt.generate("p", script=[[3]]).text() == "e"
