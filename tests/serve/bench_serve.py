#!/usr/bin/env python3
"""Server overhead: the same model and requests through lmstream-serve (the
`openai` client streaming chat-free completions over HTTP) and through the
Python binding directly, in one run.

    bench_serve.py [--streams 1,64] [--tokens 64] [--repeat 3]

For each concurrency: tokens/s (all streams' generated tokens over the
wall time from the first submit to the last token) and the median TTFT
(submit to the first non-empty text a client reads), best of --repeat runs,
with the server's figure as a share of the binding's (goal: >= 97% of the
tokens/s, TTFT overhead <= 2 ms). Every request is greedy with
"speculate": false, so both paths do the same engine work.

LMSTREAM_SERVE names the built command, LMSTREAM_MODEL the model.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import lmstream  # noqa: E402
import openai  # noqa: E402

SERVE = os.environ.get("LMSTREAM_SERVE", os.path.join(ROOT, "build", "lmstream-serve"))
MODEL = os.environ.get("LMSTREAM_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
MESSAGES = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]


def run_threads(n, one):
    """Runs one(i) on n threads started together; returns (wall s, results)."""
    results = [None] * n
    start = threading.Barrier(n + 1)

    def body(i):
        start.wait()
        results[i] = one(i)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    ends = [r[2] for r in results]
    return max(ends) - t0, results


def binding_one(rt, tokens):
    def one(_):
        t0 = time.perf_counter()
        first, n = None, 0
        s = rt.generate(messages=MESSAGES, max_tokens=tokens, temperature=0, speculate=False)
        for chunk in s:
            if chunk.text and first is None:
                first = time.perf_counter() - t0
        n = s.usage.generated_tokens
        return first, n, time.perf_counter()
    return one


def server_one(client, tokens):
    def one(_):
        t0 = time.perf_counter()
        first, n = None, 0
        stream = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=tokens, temperature=0, stream=True,
                                           stream_options={"include_usage": True}, extra_body={"speculate": False})
        for chunk in stream:
            if chunk.usage is not None:
                n = chunk.usage.completion_tokens
            if chunk.choices and chunk.choices[0].delta.content and first is None:
                first = time.perf_counter() - t0
        return first, n, time.perf_counter()
    return one


def measure(one, n, repeat):
    best = None
    for _ in range(repeat):
        wall, res = run_threads(n, one)
        tps = sum(r[1] for r in res) / wall
        if any(r[0] is None for r in res):
            raise SystemExit("a stream produced no text; the benchmark needs answers")
        ttft = statistics.median(r[0] for r in res)
        if best is None or tps > best[0]:
            best = (tps, ttft)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,64")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    counts = [int(x) for x in args.streams.split(",")]
    slots = max(counts)
    rows = []
    rt = lmstream.Runtime(MODEL, max_slots=slots, context_length=512)
    try:
        binding = {n: measure(binding_one(rt, args.tokens), n, args.repeat) for n in counts}
    finally:
        rt.close()
    proc = subprocess.Popen([SERVE, "--model", MODEL, "--slots", str(slots), "--ctx", "512", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"listening on (http://\S+)", proc.stdout.readline()).group(1)
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        server = {n: measure(server_one(client, args.tokens), n, args.repeat) for n in counts}
    finally:
        proc.terminate()
        proc.wait()
    print(f"server overhead, {os.path.basename(MODEL)}, {args.tokens} tokens a stream, best of {args.repeat}")
    print(f"{'streams':>7}  {'binding tok/s':>13}  {'server tok/s':>12}  {'ratio':>6}  "
          f"{'binding TTFT ms':>15}  {'server TTFT ms':>14}  {'overhead ms':>11}")
    for n in counts:
        (bt, bf), (st, sf) = binding[n], server[n]
        print(f"{n:>7}  {bt:>13.1f}  {st:>12.1f}  {st / bt:>6.1%}  {bf * 1e3:>15.1f}  {sf * 1e3:>14.1f}  "
              f"{(sf - bf) * 1e3:>11.1f}")


if __name__ == "__main__":
    main()
