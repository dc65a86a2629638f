#!/usr/bin/env python3
"""A long chat through the OpenAI server: TTFT of every turn of a
--turns-turn conversation (user turns of ~60 new tokens, answers of at most
64, greedy), whose turn k sends every earlier turn again, so that a server
that keeps the conversation's KV (prefix caching) prefills only what is
new. Goal (issue 48): turn 20's TTFT within 1.5x turn 1's, and at most
llama-server's.

    bench_turns.py [--turns 20] [--answer 64] [--repeat 1]

--repeat N runs the whole chat N times, the servers started afresh each
time (empty caches), and prints each turn's median over the N: one turn's
TTFT moves by a third between runs on a small machine, and the goal is a
ratio of two of them.

lmstream-serve always; llama-server too when LMSTREAM_PEER_LLAMA_SERVER
names its binary (same GGUF, one slot, cache_prompt and --cache-reuse on).
Both are up at once and each turn goes to one and then the other, so a
shared machine's load falls on both alike; each keeps its own answers in
its history. Prints every turn (TTFT, prompt and cached tokens), then the
TTFT of turns 1, 5, 10 and 20 side by side.

LMSTREAM_SERVE names the built lmstream-serve, LMSTREAM_MODEL the model.
"""
import argparse
import os
import statistics

from bench_common import MODEL, PASSAGE, load_note, start_lmstream, start_peer, stop_on_sigterm, warm

# Words per user turn: ~60 tokens of English prose with the question.
TURN_WORDS = 45


def chat(args, words):
    """One whole chat on freshly started servers: {name: [TTFT s per turn]}."""
    servers = [start_lmstream(1, args.ctx)]
    try:
        peer = start_peer(1, args.ctx)
        if peer:
            servers.append(peer)
        for s in servers:
            warm(s)
        hist = {s.name: [] for s in servers}
        ttfts = {s.name: [] for s in servers}
        for t in range(args.turns):
            q = " ".join(words[t * TURN_WORDS:(t + 1) * TURN_WORDS]) + " What does this part say?"
            for s in servers:
                hist[s.name].append({"role": "user", "content": q})
                ttft, text, u = s.ask(hist[s.name], args.answer)
                hist[s.name].append({"role": "assistant", "content": text})
                ttfts[s.name].append(ttft)
                print(f"turn {t + 1:>3} {s.name:>12}: TTFT {ttft * 1e3:7.0f} ms  prompt {u['prompt_tokens']:5}"
                      f"  cached {u['prompt_tokens_details']['cached_tokens']:5}  answer {u['completion_tokens']:3}",
                      flush=True)
        return ttfts
    finally:
        for s in servers:
            s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--answer", type=int, default=64, help="max_tokens of each answer")
    ap.add_argument("--ctx", type=int, default=4096, help="context of the one slot")
    ap.add_argument("--repeat", type=int, default=1, help="whole chats, each on fresh servers; medians printed")
    args = ap.parse_args()
    if args.turns < 1 or args.repeat < 1:
        ap.error("--turns and --repeat must be at least 1")
    stop_on_sigterm()
    words = open(PASSAGE).read().split()
    words = words * (1 + args.turns * TURN_WORDS // len(words))
    print(f"a {args.turns}-turn chat, {os.path.basename(MODEL)}, answers of at most {args.answer} tokens, greedy, "
          f"{args.repeat} time(s)")
    print(f"({load_note()})")
    runs = []
    for r in range(args.repeat):
        if args.repeat > 1:
            print(f"chat {r + 1} of {args.repeat}")
        runs.append(chat(args, words))
    print(f"({load_note()})")
    marks = [k for k in (1, 5, 10, 20) if k <= args.turns]
    if args.turns not in marks:
        marks.append(args.turns)
    print()
    what = "TTFT ms" if args.repeat == 1 else f"median of {args.repeat}"
    print(f"{what:>16}" + "".join(f"{'turn ' + str(k):>10}" for k in marks) + f"{'last/first':>12}")
    for name in runs[0]:
        med = [statistics.median(run[name][k] for run in runs) for k in range(args.turns)]
        print(f"{name:>16}" + "".join(f"{med[k - 1] * 1e3:>10.0f}" for k in marks) + f"{med[-1] / med[0]:>12.2f}")


if __name__ == "__main__":
    main()
