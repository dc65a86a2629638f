#!/usr/bin/env python3
"""Prompt-prefix reuse through lmstream-serve: TTFT with "prefix_cache" off
and on (the default), two servers of one model up at once and each request
sent to the one and then the other, so that a shared machine's load falls
on both alike.

    bench_prefix.py [--turns 10] [--repeats 3]

Prints, for each request, TTFT (submit to the first content chunk), the
prompt tokens and usage.prompt_tokens_details.cached_tokens: the same
~700-token prompt sent --repeats times, then a --turns-turn chat (user
turns of ~60 tokens, answers of at most 64) whose turn k carries every
earlier turn. Requests are greedy streaming chats (the default drafter).
Only the standard library is used.

LMSTREAM_SERVE names the built command, LMSTREAM_MODEL the model.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVE = os.environ.get("LMSTREAM_SERVE", os.path.join(ROOT, "build", "lmstream-serve"))
MODEL = os.environ.get("LMSTREAM_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
PASSAGE = os.path.join(ROOT, "core", "model", "testdata", "passage.txt")


def start(extra):
    proc = subprocess.Popen([SERVE, "--model", MODEL, "--port", "0"] + extra, stdout=subprocess.PIPE, text=True)
    url = re.search(r"listening on (http://[^;\s]+)", proc.stdout.readline()).group(1)
    proc.stdout.readline()  # "... ready"
    return proc, url


def ask(url, messages, max_tokens):
    body = json.dumps({"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    t0, ttft, text, usage = time.monotonic(), None, [], None
    with urllib.request.urlopen(req) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            usage = ev.get("usage") or usage
            for c in ev.get("choices", []):
                d = c.get("delta", {}).get("content")
                if d:
                    ttft = ttft if ttft is not None else time.monotonic() - t0
                    text.append(d)
    return ttft, "".join(text), usage


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    passage = open(PASSAGE).read()
    with tempfile.NamedTemporaryFile("w", suffix=".json") as off:
        off.write('{"prefix_cache": false}')
        off.flush()
        servers = {"off": start(["--runtime-config", off.name]), "on": start([])}
    try:
        def row(what, k, ttft, u):
            print(f"{what:>8} {k:>3}: TTFT {ttft * 1e3:7.0f} ms  prompt {u['prompt_tokens']:5}"
                  f"  cached {u['prompt_tokens_details']['cached_tokens']:5}")

        long = ((passage + "\n\n") * 2)[:3000] + "\n\nSummarise the text above in one sentence."
        print(f"the same prompt, {args.repeats} times ({os.path.basename(MODEL)})")
        for i in range(args.repeats):
            for k, (_, url) in servers.items():
                ttft, _, u = ask(url, [{"role": "user", "content": long}], 16)
                row(f"send {i + 1}", k, ttft, u)
        print(f"a {args.turns}-turn chat")
        words = passage.split() * (1 + args.turns * 45 // len(passage.split()))
        hist = {k: [] for k in servers}
        for t in range(args.turns):
            q = " ".join(words[t * 45:(t + 1) * 45]) + " What does this part say?"
            for k, (_, url) in servers.items():
                hist[k].append({"role": "user", "content": q})
                ttft, text, u = ask(url, hist[k], 64)
                hist[k].append({"role": "assistant", "content": text})
                row(f"turn {t + 1}", k, ttft, u)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
