"""asyncio: streams wait on the channel descriptor (add_reader), never block
the event loop, and a cancelled task cancels its request."""
import asyncio
import threading
import time

import pytest
from conftest import VOCAB, wait_idle

import lmstream
from lmstream import stream as stream_mod


async def ticker(stop, period=0.005):
    """The event loop's worst lag: how late a 5 ms sleep wakes up."""
    worst = 0.0
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(period)
        worst = max(worst, loop.time() - t - period)
    return worst


def run_200_streams(n=200, bursts=40):
    async def main(rt):
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))

        async def one(i):
            # Requests arrive over 100 ms, as traffic does (200 submissions
            # in a single loop step would be the test's own stall).
            await asyncio.sleep(i * 0.0005)
            script = [[2 + (i + k) % 5] for k in range(bursts)]
            want = b"".join(VOCAB[t[0]] for t in script).decode()
            s = rt.generate(f"p{i}", script=script, delay_ms=5 + i % 7)
            got = []
            async for c in s:
                got.append(c)
            assert "".join(c.text for c in got) == want
            assert got[-1].finished and got[-1].reason == lmstream.FinishReason.END_ID
            return len(got)

        t0 = time.monotonic()
        counts = await asyncio.gather(*(one(i) for i in range(n)))
        elapsed = time.monotonic() - t0
        stop.set()
        lag = await tick
        return counts, lag, elapsed

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, max_slots=256) as rt:
        counts, lag, elapsed = asyncio.run(main(rt))
        assert len(counts) == n and all(c >= 2 for c in counts)
        st = wait_idle(rt)
        assert st["finished"] == n
    return lag, elapsed


def test_200_concurrent_streams_never_block_the_loop(monkeypatch):
    """Every library call the loop thread makes to read is non-blocking
    (timeout 0); waiting happens in the selector."""
    timeouts = []
    real = stream_mod._pop_batch

    def spy(h, chunks, cap, addr, size, timeout_ms, nout):
        timeouts.append(timeout_ms)
        return real(h, chunks, cap, addr, size, timeout_ms, nout)

    monkeypatch.setattr(stream_mod, "_pop_batch", spy)
    run_200_streams()
    assert len(timeouts) >= 200 * 2 and set(timeouts) == {0}


def test_200_concurrent_streams_keep_the_loop_responsive():
    """A 5 ms ticker never wakes 50 ms late while 200 streams run. The lag
    also counts the OS descheduling the process (a loaded 2-core machine
    does that for tens of ms now and then), so the best of 3 runs counts."""
    lags = []
    for _ in range(3):
        lag, elapsed = run_200_streams()
        lags.append(lag)
        print(f"200 streams in {elapsed:.2f}s, worst loop lag {lag * 1000:.1f} ms")
        if lag < 0.050:
            break
    assert min(lags) < 0.050, f"event loop lag {[round(x * 1000, 1) for x in lags]} ms"


def test_no_thread_per_stream():
    import threading

    async def main(rt):
        streams = [rt.generate("p", script=[[2]] * 20, delay_ms=5) for _ in range(50)]
        before = threading.active_count()
        texts = await asyncio.gather(*(s.atext() for s in streams))
        assert threading.active_count() == before
        return texts

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, max_slots=64) as rt:
        assert asyncio.run(main(rt)) == ["H" * 20] * 50


def test_cancelling_the_task_cancels_the_request():
    async def main(rt):
        s = rt.generate("p", script=[[2]] * 10000, delay_ms=10)
        first = asyncio.Event()

        async def consume():
            async for _ in s:
                first.set()

        task = asyncio.create_task(consume())
        await first.wait()
        assert rt.stats()["active_slots"] == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert s.closed
        # The slot is free within an engine iteration; the loop stays free.
        for _ in range(200):
            if rt.stats()["active_slots"] == 0:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(rt.stats())

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        asyncio.run(main(rt))
        wait_idle(rt)


def test_wait_for_timeout_cancels():
    async def main(rt):
        s = rt.generate("p", script=[[2]] * 10000, delay_ms=10)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(s.atext(), 0.1)
        assert s.closed

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        asyncio.run(main(rt))
        wait_idle(rt, timeout=1.0)


def test_async_break_cancels():
    async def main(rt):
        s = rt.generate("p", script=[[2]] * 10000, delay_ms=2)
        n = 0
        async for _ in s:
            n += 1
            if n == 3:
                break
        assert s.closed

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        asyncio.run(main(rt))
        wait_idle(rt, timeout=1.0)


def test_async_batch_and_errors():
    async def main(rt):
        a, b = rt.generate_batch(["a", "b"], scripts=[[[2], [3]], [[4], [5]]])
        assert await a.atext() == "He" and await b.atext() == "lo"
        s = rt.generate("p", script=[[2], [3]], error_at=1)
        with pytest.raises(lmstream.BackendError) as ei:
            await s.atext()
        assert ei.value.partial_text == "H"

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        asyncio.run(main(rt))


def test_close_from_another_thread_ends_an_async_reader():
    async def main(rt):
        s = rt.generate("p", script=[[2]] + [[3]] * 1000, hold_after=0)
        got = []

        async def consume():
            async for c in s:
                got.append(c)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.1)
        assert s._waiter is not None  # the task waits on the descriptor
        t = threading.Thread(target=s.close)
        t.start()
        await asyncio.wait_for(task, 1.0)
        t.join()
        # Either the loop saw the close first, or the runtime's cancelled
        # terminal chunk (the request is cancelled at once).
        assert s.closed
        assert not s.finished or s.reason == lmstream.FinishReason.CANCELLED
        assert all(c.finished for c in got)  # the first burst was a minute away

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        asyncio.run(main(rt))
        wait_idle(rt, timeout=1.0)


def test_close_from_another_task_ends_an_async_reader():
    async def main(rt):
        s = rt.generate("p", script=[[2]] * 1000, hold_after=0)

        async def consume():
            return [c async for c in s]

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        s.close()
        assert await asyncio.wait_for(task, 1.0) == []

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        asyncio.run(main(rt))
        wait_idle(rt, timeout=1.0)
