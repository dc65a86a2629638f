#!/usr/bin/env python3
"""An agent-like load through the OpenAI server: --conversations
conversations at once, each starting from the same long system prompt
(~1,500 tokens: an agent's instructions and tool descriptions) with a task
of its own, then --turns-1 follow-ups that carry the conversation so far
(answers of at most --answer tokens, greedy). Reports generated tokens/s
(all answers' tokens over the load's wall time) and TTFT p50 and p99 over
every request. A server with prefix caching prefills the system prompt
once rather than once per conversation, and each follow-up only its new
tokens.

    bench_agents.py [--conversations 32] [--turns 2] [--answer 64]

lmstream-serve always; llama-server too when LMSTREAM_PEER_LLAMA_SERVER
names its binary (same GGUF, a slot per conversation, cache_prompt and
--cache-reuse on). The servers run the load one after the other (a load
of all conversations at once cannot interleave fairly), each freshly
started; --repeat runs alternate which goes first.

LMSTREAM_SERVE names the built lmstream-serve, LMSTREAM_MODEL the model.
"""
import argparse
import os
import random
import statistics
import threading
import time

from bench_common import (MODEL, PASSAGE, PEER, load_note, percentile, start_lmstream, start_peer, stop_on_sigterm,
                          warm)

# Invented tools, described at some length, as an agent's system prompt
# lists them; seeded so every run (and both servers) sees the same text.
VERBS = ["search", "read", "write", "list", "move", "copy", "delete", "summarise", "translate", "compare",
         "schedule", "notify", "fetch", "parse", "validate", "archive"]
OBJECTS = ["files", "emails", "calendar events", "web pages", "database rows", "tickets", "invoices",
           "contacts", "images", "logs", "reports", "notes"]


def system_prompt(target_words):
    rng = random.Random(48)
    parts = ["You are an assistant that completes tasks by calling tools. Think about which tool fits, call it "
             "with exact arguments, read its result, and answer the user briefly. The tools are:"]
    n = 0
    while sum(len(p.split()) for p in parts) < target_words:
        verb, obj = rng.choice(VERBS), rng.choice(OBJECTS)
        args = ", ".join(f"{rng.choice(['query', 'path', 'id', 'limit', 'since', 'until', 'format'])}"
                         f" ({rng.choice(['string', 'integer', 'date'])})" for _ in range(rng.randint(2, 4)))
        parts.append(f"Tool {n}: {verb}_{obj.replace(' ', '_')}. It can {verb} {obj} for the user. Arguments: {args}. "
                     f"Use it only when the task asks to {verb} {obj}; otherwise pick another tool. It returns "
                     f"a JSON list of the {obj} it touched, at most {rng.randint(5, 50)} of them.")
        n += 1
    return "\n".join(parts)


def run_load(server, system, tasks, turns, answer):
    """Every conversation on its own thread, started together: (wall s,
    TTFTs, generated tokens, prompt tokens, cached tokens)."""
    n = len(tasks)
    ttfts, gen, prompt, cached = [], [0] * n, [0] * n, [0] * n
    lock = threading.Lock()
    barrier = threading.Barrier(n + 1)
    errors = []

    def conversation(i):
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": tasks[i]}]
        barrier.wait()
        try:
            for t in range(turns):
                ttft, text, u = server.ask(msgs, answer)
                if ttft is None:
                    raise RuntimeError(f"conversation {i} turn {t + 1}: no text")
                with lock:
                    ttfts.append(ttft)
                gen[i] += u["completion_tokens"]
                prompt[i] += u["prompt_tokens"]
                cached[i] += u["prompt_tokens_details"]["cached_tokens"]
                msgs += [{"role": "assistant", "content": text},
                         {"role": "user", "content": "Good. Now do the same for the next item, and say which tool."}]
        except Exception as e:  # noqa: BLE001 - reported after the load
            errors.append(e)

    threads = [threading.Thread(target=conversation, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    barrier.wait()
    t0 = time.monotonic()
    for th in threads:
        th.join()
    wall = time.monotonic() - t0
    if errors:
        raise SystemExit(f"{server.name}: {len(errors)} conversations failed, the first: {errors[0]}")
    return wall, ttfts, sum(gen), sum(prompt), sum(cached)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=32)
    ap.add_argument("--turns", type=int, default=2, help="requests per conversation")
    ap.add_argument("--answer", type=int, default=64, help="max_tokens of each answer")
    ap.add_argument("--system-words", type=int, default=1050, help="words of the system prompt (~1,500 tokens)")
    ap.add_argument("--ctx", type=int, default=2048, help="context of each slot")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    stop_on_sigterm()
    system = system_prompt(args.system_words)
    words = open(PASSAGE).read().split()
    tasks = [f"Task {i}: " + " ".join(words[(i * 13) % len(words):][:25]) + " Which tool should handle this, and why?"
             for i in range(args.conversations)]
    makers = [("lmstream", lambda: start_lmstream(args.conversations, args.ctx))]
    if PEER:
        makers.append(("llama-server", lambda: start_peer(args.conversations, args.ctx)))
    results = {name: [] for name, _ in makers}
    print(f"{args.conversations} conversations at once sharing a system prompt of {args.system_words} words, "
          f"{args.turns} requests each, answers of at most {args.answer} tokens, greedy; {os.path.basename(MODEL)}")
    print(f"({load_note()})")
    for r in range(args.repeat):
        for name, make in (makers if r % 2 == 0 else list(reversed(makers))):
            server = make()
            try:
                warm(server)
                wall, ttfts, gen, prompt, cached = run_load(server, system, tasks, args.turns, args.answer)
            finally:
                server.stop()
            results[name].append((gen / wall, percentile(ttfts, 50), percentile(ttfts, 99)))
            print(f"run {r + 1} {name:>12}: {wall:6.1f} s, {gen} tokens generated, {gen / wall:7.1f} tok/s, "
                  f"TTFT p50 {percentile(ttfts, 50) * 1e3:6.0f} ms p99 {percentile(ttfts, 99) * 1e3:6.0f} ms; "
                  f"prompt tokens {prompt}, cached {cached} ({cached / max(prompt, 1):.0%})", flush=True)
    print()
    print(f"{'median of ' + str(args.repeat):>14}  {'tok/s':>7}  {'TTFT p50 ms':>11}  {'TTFT p99 ms':>11}")
    for name, runs in results.items():
        med = [statistics.median(x[i] for x in runs) for i in range(3)]
        print(f"{name:>14}  {med[0]:>7.1f}  {med[1] * 1e3:>11.0f}  {med[2] * 1e3:>11.0f}")


if __name__ == "__main__":
    main()
