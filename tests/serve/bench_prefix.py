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
import os
import tempfile

from bench_common import MODEL, PASSAGE, ask, start


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
