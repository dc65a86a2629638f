#!/usr/bin/env python3
"""Server overhead: the same model and requests through lmstream-serve (the
`openai` client streaming chat-free completions over HTTP) and through the
Python binding directly, in one run.

    bench_serve.py [--streams 1,64] [--tokens 64] [--repeat 5]

For each concurrency: tokens/s (all streams' generated tokens over the
wall time from the first submit to the last token) and the median TTFT
(submit to the first non-empty text a client reads), the median of
--repeat runs of each path, alternating, with the server's figures
against the binding's (goal: >= 97% of the tokens/s, TTFT overhead
<= 2 ms). The server is measured twice: through the openai client (the
goal's figure) and through Python's http.client, which shows how much of
the overhead is the openai client's own. Every request is greedy with
"speculate": false, so all paths do the same engine work.

LMSTREAM_SERVE names the built command, LMSTREAM_MODEL the model.
"""
import argparse
import http.client
import json
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


def http_one(url, tokens):
    """The same request through Python's own http.client, one connection a
    thread: the server's overhead without the openai client's (which
    validates and builds each request and chunk in pydantic models)."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"model": "m", "messages": MESSAGES, "max_tokens": tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, "speculate": False}).encode()
    local = threading.local()

    def one(_):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(host, int(port))
        t0 = time.perf_counter()
        first, n = None, 0
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        for line in resp:
            if not line.startswith(b"data: {"):
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                n = ev["usage"]["completion_tokens"]
            if ev["choices"] and ev["choices"][0]["delta"].get("content") and first is None:
                first = time.perf_counter() - t0
        return first, n, time.perf_counter()
    return one


def once(one, n):
    """One run of n streams: (tokens/s, median TTFT s)."""
    wall, res = run_threads(n, one)
    if any(r[0] is None for r in res):
        raise SystemExit("a stream produced no text; the benchmark needs answers")
    return sum(r[1] for r in res) / wall, statistics.median(r[0] for r in res)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,64")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    counts = [int(x) for x in args.streams.split(",")]
    slots = max(counts)
    # Both paths are up at once and their runs alternate (binding first on
    # even repeats, server first on odd ones), so a drift in the machine's
    # speed (a shared host's neighbours, clock changes) hits both alike.
    # Each figure is the median over the repeats.
    rt = lmstream.Runtime(MODEL, max_slots=slots, context_length=512)
    proc = subprocess.Popen([SERVE, "--model", MODEL, "--slots", str(slots), "--ctx", "512", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    paths = {"binding": {n: [] for n in counts}, "openai": {n: [] for n in counts}, "http": {n: [] for n in counts}}
    try:
        url = re.search(r"listening on (http://[^;\s]+)", proc.stdout.readline()).group(1)
        proc.stdout.readline()  # "... loaded in ...; ready"
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        ones = {"binding": lambda: binding_one(rt, args.tokens), "openai": lambda: server_one(client, args.tokens),
                "http": lambda: http_one(url, args.tokens)}
        for n in counts:
            for make in ones.values():
                once(make(), n)  # warm-up: scratch buffers, connections, page cache
            for r in range(args.repeat):
                order = list(ones) if r % 2 == 0 else list(reversed(ones))
                for name in order:
                    paths[name][n].append(once(ones[name](), n))
    finally:
        rt.close()
        proc.terminate()
        proc.wait()
    med = lambda runs, i: statistics.median(x[i] for x in runs)  # noqa: E731
    print(f"server overhead, {os.path.basename(MODEL)}, {args.tokens} tokens a stream, "
          f"median of {args.repeat} alternating runs")
    print(f"{'streams':>7}  {'client':>7}  {'tok/s':>7}  {'vs binding':>10}  {'TTFT ms':>8}  {'overhead ms':>11}")
    for n in counts:
        bt, bf = med(paths["binding"][n], 0), med(paths["binding"][n], 1)
        for name in ones:
            t, f = med(paths[name][n], 0), med(paths[name][n], 1)
            print(f"{n:>7}  {name:>7}  {t:>7.1f}  {t / bt:>10.1%}  {f * 1e3:>8.1f}  {(f - bf) * 1e3:>11.1f}")

if __name__ == "__main__":
    main()
