"""Many threads sharing one runtime."""
import random
import threading

from conftest import VOCAB, wait_idle

import lmstream


def test_32_threads_share_one_runtime():
    errors = []
    results = []
    lock = threading.Lock()
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, special_ids=[0, 1], max_slots=8) as rt:
        start = threading.Barrier(32)

        def worker(k):
            rng = random.Random(k)
            try:
                start.wait()
                for i in range(20):
                    n = rng.randint(0, 30)
                    script = [[rng.choice([2, 3, 4, 5, 6])] for _ in range(n)]
                    want = b"".join(VOCAB[t[0]] for t in script).decode()
                    mode = (k + i) % 4
                    s = rt.generate(f"t{k}-{i}", script=script, delay_ms=rng.choice([0, 0, 1]))
                    if mode == 0:
                        got = s.text()
                        assert got == want, (got, want)
                        assert s.finished and s.reason == lmstream.FinishReason.END_ID
                    elif mode == 1:
                        chunks = list(s)
                        assert chunks[-1].finished and "".join(c.text for c in chunks) == want
                    elif mode == 2:  # leave early
                        for _ in s:
                            break
                        assert s.closed
                    else:  # cancel and read to the end
                        s.cancel()
                        chunks = list(s)
                        assert chunks[-1].finished
                        assert chunks[-1].reason in (lmstream.FinishReason.CANCELLED,
                                                     lmstream.FinishReason.END_ID)
                    with lock:
                        results.append((k, i))
                    if i % 5 == 0:
                        rt.stats()
            except BaseException as e:  # reported by the main thread
                errors.append((k, repr(e)))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive(), "a thread hangs"
        assert not errors, errors[:5]
        assert len(results) == 32 * 20
        st = wait_idle(rt)
        assert st["submitted"] == st["finished"] == 32 * 20


def test_threads_each_with_a_runtime_and_shared_streams_closed_elsewhere():
    """Streams made in one thread and closed in another."""
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0) as rt:
        streams = [rt.generate("p", script=[[2]] * 1000, delay_ms=5) for _ in range(16)]
        closers = [threading.Thread(target=s.close) for s in streams]
        for t in closers:
            t.start()
        for t in closers:
            t.join()
        assert all(s.closed for s in streams)
        wait_idle(rt)
