#!/usr/bin/env python3
"""Benchmarks of the Python binding: what a Python consumer sees against
what the engine produces in the same run.

    python3 bench.py                 # replay figures, and the model's if it loads
    python3 bench.py --quick         # smaller runs
    python3 bench.py --profile       # cProfile of the batch-pop consumer

Figures (best of --repeat runs):
  consumer tokens/s             8 replay streams (one request of 8 prompts, delay_ms=0,
                                1-token bursts) read by Python threads (for chunk in stream)
                                or asyncio (async for), against the engine's rate in the
                                same run (from each stream's usage: ttft + tpot per token). With the default queue of 256 chunks a
                                consumer slower than the engine reads one token per chunk;
                                with a small queue the backlog coalesces into fewer chunks.
  chunks/s, 64 live streams     64 streams of 1-token bursts drained by one thread with big
                                batch pops while the engine runs (bounded by the engine)
  chunks/s, queued              the same chunks drained after the engine queued them all:
                                the binding's own ceiling (goal >= 1 M/s)
  model tokens/s                the default model, streamed vs the engine's rate (goal >= 98%)
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from typing import Callable, List, Optional, Tuple, TypeVar

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lmstream  # noqa: E402
from lmstream import Stream  # noqa: E402

VOCAB = [b"</s>", b"a", b"\xc3", b"\xa9", b" "]
MODEL = os.environ.get("LMSTREAM_MODEL",
                       os.path.join(HERE, "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))

Row = Tuple[str, float, str, str]


def wait_idle(rt: lmstream.Runtime) -> None:
    while True:
        st = rt.stats()
        if st["active_slots"] == 0 and st["queued"] == 0:
            return
        time.sleep(0.0005)


def script(length: int) -> List[List[int]]:
    # 1-token bursts; "é" split over two tokens keeps the sanitizer honest.
    pattern = [[1], [2], [3], [4]]
    return (pattern * (length // 4 + 1))[:length]


def engine_end(ss: List[Stream], submitted: List[float]) -> float:
    """When the engine made the last token of these streams, from their
    usage: submission + ttft + tpot per later token. The engine stamps the
    submission once it parsed the request, at the end of lms_submit, so the
    time generate() returns stands for it (a few microseconds late); the
    two clocks differ by scheduling noise, a few percent on a loaded box."""
    last = 0.0
    for s, t in zip(ss, submitted):
        u = s.usage
        assert u is not None
        last = max(last, t + (u.ttft_ms + u.tpot_ms * max(u.generated_tokens - 1, 0)) / 1000)
    return last


def consumed(rt: lmstream.Runtime, streams: int, length: int, how: str,
             queue: int) -> Tuple[float, float]:
    """(consumer tokens/s, engine tokens/s) of one run: one request with
    `streams` prompts sharing one script (a single lms_submit, so every
    stream starts at once), read by one thread per stream or by asyncio
    tasks. Both rates count from the submission: to the last token the
    consumers received, and to the last token the engine made."""
    wait_idle(rt)
    scr = script(length)
    n = streams
    counts = [0] * n
    done = [0.0] * n

    def read(i: int, s: Stream) -> None:
        k = 0
        for c in s:
            k += len(c.token_ids)
            c.text
        counts[i] = k
        done[i] = time.perf_counter()

    async def aread(i: int, s: Stream) -> None:
        k = 0
        async for c in s:
            k += len(c.token_ids)
            c.text
        counts[i] = k
        done[i] = time.perf_counter()

    t0 = time.perf_counter()
    ss = rt.generate_batch(["p"] * n, script=scr, queue_limit=queue)
    t_sub = time.perf_counter()
    if how == "threads":
        ts = [threading.Thread(target=read, args=(i, s)) for i, s in enumerate(ss)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    else:
        async def main() -> None:
            await asyncio.gather(*(aread(i, s) for i, s in enumerate(ss)))
        asyncio.run(main())
    total = sum(counts)
    e1 = engine_end(ss, [t_sub] * n)
    return total / (max(done) - t0), total / (e1 - t0)


def drain_round_robin(ss: List[Stream], touch_text: bool) -> int:
    """One thread, big batch pops (stream.read(timeout=0)) over every
    stream in turn. A sweep that found little pauses for a moment, so the
    next pops are big (and the engine keeps its core) instead of many
    small ones."""
    n = 0
    live = list(ss)
    while live:
        nxt = []
        got_now = 0
        for s in live:
            got = s.read(timeout=0)
            if got:
                got_now += len(got)
                if touch_text:
                    for c in got:
                        c.text
            if not s.finished:
                nxt.append(s)
        n += got_now
        live = nxt
        if live and got_now < 16 * len(live):
            time.sleep(0.0005)
    return n


def chunks_live(rt: lmstream.Runtime, streams: int, length: int) -> Tuple[float, float]:
    """(chunks/s the consumer drained, chunks/s the engine made) while the
    engine runs: one request of `streams` prompts (one lms_submit), every
    token one chunk (1-token bursts, no coalescing), one thread draining."""
    wait_idle(rt)
    t0 = time.perf_counter()
    ss = rt.generate_batch(["p"] * streams, script=[[1]] * length, queue_limit=1 << 24)
    t_sub = time.perf_counter()
    n = drain_round_robin(ss, touch_text=False)
    t1 = time.perf_counter()
    return n / (t1 - t0), n / (engine_end(ss, [t_sub] * streams) - t0)


def chunks_queued(rt: lmstream.Runtime, streams: int, length: int, how: str) -> float:
    ss = rt.generate_batch(["p"] * streams, script=[[1]] * length, queue_limit=1 << 24)
    wait_idle(rt)
    t0 = time.perf_counter()
    if how == "read":
        n = drain_round_robin(ss, touch_text=False)
    elif how == "iter":
        n = 0
        for s in ss:
            for _ in s:
                n += 1
    else:  # iterate and read every chunk's text
        n = 0
        for s in ss:
            for c in s:
                c.text
                n += 1
    return n / (time.perf_counter() - t0)


def model_rate(max_tokens: int) -> Optional[Tuple[float, float, str]]:
    """(consumer tokens/s, engine tokens/s, note) on the real model."""
    if not os.path.exists(MODEL):
        return None
    try:
        rt = lmstream.Runtime(model_path=MODEL)
    except lmstream.LmstreamError as e:
        return (0.0, 0.0, f"model not run: {e}")
    with rt:
        msgs = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]
        rt.complete(messages=msgs, max_tokens=8, temperature=0)  # warm up
        first = last = 0.0
        n = 0
        st0 = rt.stats()
        t_sub = time.perf_counter()
        s = rt.generate(messages=msgs, max_tokens=max_tokens, temperature=0)
        for c in s:
            now = time.perf_counter()
            if c.token_ids:
                if not first:
                    first = now
                n += len(c.token_ids)
            last = now
            c.text
        st1 = rt.stats()
        u = s.usage
        # Engine: its own time per output token; consumer: tokens after the
        # first over the time the consumer saw them arrive.
        engine = 1000.0 / u.tpot_ms if u and u.tpot_ms > 0 else 0.0
        consumer = (n - 1) / (last - first) if last > first else 0.0
        note = f"{st1['tokens_generated'] - st0['tokens_generated']} tokens, ttft {u.ttft_ms:.0f} ms" if u else ""
        del t_sub
        return consumer, engine, note


T = TypeVar("T")


def best(f: Callable[[], T], repeat: int, key: Optional[Callable[[T], float]] = None) -> T:
    results = [f() for _ in range(repeat)]
    return max(results, key=key) if key is not None else max(results)  # type: ignore[type-var]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-model", action="store_true")
    args = ap.parse_args()
    length = 20_000 if args.quick else 50_000
    rows: List[Row] = []

    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, max_slots=64) as rt:
        if args.profile:
            import cProfile
            import pstats
            ss = rt.generate_batch(["p"] * 64, script=[[1]] * length, queue_limit=1 << 24)
            wait_idle(rt)
            pr = cProfile.Profile()
            pr.enable()
            for s in ss:
                for ch in s:
                    ch.text
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)
            return 0

        streams = 8
        for label, how in (("8 threads", "threads"), ("asyncio", "asyncio")):
            for q in (256, 16):
                c, e = best(lambda: consumed(rt, streams, length, how, q), args.repeat,
                            key=lambda x: x[0])
                rows.append((f"consumer tokens/s, {label}, queue {q}", c, "tok/s",
                             f"{c / e:.1%} of the engine's {e:,.0f} tok/s in the run"))
        n64 = length // 2
        c, e = best(lambda: chunks_live(rt, 64, n64), args.repeat, key=lambda x: x[0])
        rows.append(("chunks/s, 64 live streams (batch pop)", c, "chunk/s",
                     f"{c / e:.1%} of the engine's {e:,.0f} chunk/s in the run"))
        for how, label in (("read", "read()"), ("iter", "for chunk in"), ("text", "for + .text")):
            r = best(lambda: chunks_queued(rt, 64, n64, how), args.repeat)
            rows.append((f"chunks/s, 64 queued streams, {label}", r, "chunk/s", f"{r / 1e6:.2f}x goal 1M/s"))

    if not args.no_model:
        m = model_rate(64 if args.quick else 256)
        if m is None:
            rows.append(("model tokens/s", 0.0, "tok/s", "model file absent"))
        elif m[1] == 0.0:
            rows.append(("model tokens/s", 0.0, "tok/s", m[2]))
        else:
            rows.append(("model engine tokens/s (1000/tpot)", m[1], "tok/s", m[2]))
            rows.append(("model consumer tokens/s", m[0], "tok/s", f"{m[0] / m[1]:.1%} of engine (goal 98%)"))

    w = max(len(r[0]) for r in rows)
    print(f"{'figure':<{w}}  {'value':>14}  {'unit':<8}  ratio")
    print("-" * (w + 40))
    for name, value, unit, ratio in rows:
        print(f"{name:<{w}}  {value:>14,.0f}  {unit:<8}  {ratio}")
    print(f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; lmstream {lmstream.library_path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
