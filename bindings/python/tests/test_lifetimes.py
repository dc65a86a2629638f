"""Every way a consumer can leave a stream cancels its request and frees the
library's slot: breaking out of a loop, close(), a with block, garbage
collection, Ctrl-C during a wait, the runtime closing, interpreter exit."""
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import PKG_ROOT, wait_idle

import lmstream

SLOW = dict(script=[[2]] * 10000, delay_ms=20)  # 200 s if nobody stops it


def wait_active(rt, n=1, timeout=2.0):
    deadline = time.monotonic() + timeout
    while rt.stats()["active_slots"] < n:
        assert time.monotonic() < deadline, rt.stats()
        time.sleep(0.002)


def test_break_after_three_chunks(rt):
    got = []
    for c in rt.generate("p", script=[[2]] * 10000, delay_ms=2):
        got.append(c)
        if len(got) == 3:
            break
    assert [c.text for c in got] == ["H"] * 3
    st = wait_idle(rt, timeout=1.0)
    assert st["finished"] == st["submitted"] == 1


def test_break_with_a_named_stream(rt):
    s = rt.generate("p", **SLOW)
    for _ in s:
        break
    assert s.closed and not s.finished
    wait_idle(rt, timeout=1.0)


def test_close_and_with_block(rt):
    s = rt.generate("p", **SLOW)
    wait_active(rt)
    s.close()
    s.close()  # idempotent
    assert s.closed
    assert list(s) == []  # a closed stream yields nothing
    wait_idle(rt, timeout=1.0)
    with rt.generate("p", **SLOW) as s:
        next(iter(s))
    assert s.closed
    wait_idle(rt, timeout=1.0)


def test_del_of_an_unconsumed_stream(rt):
    s = rt.generate("p", **SLOW)
    wait_active(rt)
    del s
    wait_idle(rt, timeout=1.0)


def test_garbage_collection_of_a_stream_in_a_cycle(rt):
    s = rt.generate("p", **SLOW)
    s.cycle = [s]  # only the cyclic collector can free it
    wait_active(rt)
    del s
    gc.collect()
    wait_idle(rt, timeout=1.0)


def test_dropped_runtime_lives_while_its_stream_does():
    VOCAB = [b"</s>", b"a"]
    s = lmstream.Runtime.replay(vocab=VOCAB, eos_id=0).generate("p", script=[[1]] * 3)
    gc.collect()
    assert s.text() == "aaa"


def test_close_from_another_thread_wakes_the_reader(rt):
    s = rt.generate("p", script=[[2]] + [[3]] * 10000, delay_ms=3000)
    got, done = [], threading.Event()

    def reader():
        for c in s:
            got.append(c)
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.2)
    s.close()
    assert done.wait(1.0), "the blocked reader did not wake up"
    t.join()
    wait_idle(rt, timeout=1.0)


@pytest.mark.parametrize("how", ["pthread_kill", "os.kill"])
def test_ctrl_c_during_a_wait(rt, how, ctrl_c):
    # The first chunk at once, then the script holds for a minute: Ctrl-C
    # at 0.6 s must end the wait for the second chunk, which never comes
    # (no timing race on a loaded machine).
    s = rt.generate("p", script=[[2]] + [[3]] * 100, hold_after=1)
    main = threading.main_thread().ident
    assert threading.get_ident() == main

    def interrupt():
        if how == "pthread_kill":
            signal.pthread_kill(main, signal.SIGINT)
        else:
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.6, interrupt)
    got = []
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for c in s:
            got.append(c)
    elapsed = time.monotonic() - t0
    timer.join()
    assert [c.text for c in got] == ["H"]
    assert elapsed < 30, f"KeyboardInterrupt waited {elapsed:.2f}s, for the script's hold"
    assert s.closed
    wait_idle(rt, timeout=1.0)


def test_runtime_close_ends_running_streams():
    VOCAB = [b"</s>", b"a"]
    rt = lmstream.Runtime.replay(vocab=VOCAB, eos_id=0)
    s1 = rt.generate("p", script=[[1]] * 10000, delay_ms=10)
    s2 = rt.generate("p", script=[[1]] * 10000, delay_ms=10, raise_on_error=False)
    assert s1.read()[0].text == "a"
    rt.close()
    rt.close()
    with pytest.raises(lmstream.ShutdownError) as ei:
        s1.text()
    assert ei.value.chunk.reason == lmstream.FinishReason.ERROR
    chunks = list(s2)
    assert chunks[-1].finished and isinstance(chunks[-1].error, lmstream.ShutdownError)
    with pytest.raises(lmstream.ShutdownError):
        rt.generate("p", script=[])
    with pytest.raises(lmstream.ShutdownError):
        rt.stats()


def test_interpreter_exit_cancels_streams():
    """A process that exits with streams open (one read by a daemon thread,
    one never read) exits at once; the streams were closed and the runtime
    stopped by lmstream's exit hook."""
    script = textwrap.dedent(f"""
        import atexit, sys, threading, time
        sys.path.insert(0, {PKG_ROOT!r})
        state = {{}}
        def check():  # registered first, so it runs after lmstream's hook
            s, t, rt = state["s"], state["t"], state["rt"]
            print("closed", s.closed, t.closed, rt.closed, flush=True)
        atexit.register(check)
        import lmstream
        rt = lmstream.Runtime.replay(vocab=[b"</s>", b"a"], eos_id=0)
        s = rt.generate("p", script=[[1]] * 10000, delay_ms=50)
        t = rt.generate("p", script=[[1]] * 10000, delay_ms=50)
        threading.Thread(target=lambda: [None for _ in t], daemon=True).start()
        state.update(s=s, t=t, rt=rt)
        time.sleep(0.2)
        print("exiting", rt.stats()["active_slots"], flush=True)
    """)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["exiting", "2", "closed", "True", "True", "True"], p.stdout
    assert time.monotonic() - t0 < 15  # no hang (generous: loaded CI machines)


def test_read_in_batches(rt):
    s = rt.generate("p", script=[[2], [3], [4], [4], [5]], queue_limit=1000)
    deadline = time.monotonic() + 2
    while not s.state().finished:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert s.state().pending == 6
    got = s.read(timeout=1)
    assert "".join(c.text for c in got) == "Hello" and got[-1].finished
    assert s.read() == [] and s.read(timeout=0) == []
    assert s.closed and s.final is got[-1] and s.reason == lmstream.FinishReason.END_ID
    assert s.usage.generated_tokens == 6


def test_read_timeout(rt):
    s = rt.generate("p", script=[[2]] * 3, hold_after=0)  # no chunk for a minute
    t0 = time.monotonic()
    assert s.read(timeout=0.1) == []
    assert 0.08 < time.monotonic() - t0 < 30
    s.close()


def test_ctrl_c_during_complete(rt, ctrl_c):
    """complete() waits in short slices too, so Ctrl-C interrupts it, and
    the interrupted request is cancelled: its slot is freed."""
    main = threading.main_thread().ident
    timer = threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        rt.complete("p", script=[[2]] * 20, hold_after=1)  # a minute
    assert time.monotonic() - t0 < 30
    timer.join()
    deadline = time.monotonic() + 1.0
    while rt.stats()["active_slots"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rt.stats()["active_slots"] == 0
