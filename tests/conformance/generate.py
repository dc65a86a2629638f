#!/usr/bin/env python3
"""Writes the stream-contract conformance vectors (tests/conformance/*.json).

Every binding runs these files: it builds a replay runtime from "runtime",
submits "request" with one channel per batch item set up as "channel" says,
consumes as "consumer" says, and compares what it received with "expect".

The expected chunks are computed here, independently of the Go code, from
Python's bytes.decode("utf-8", "replace") and plain string search, following
DESIGN.md section 2:

- text released after each burst = the decode of every byte so far except a
  trailing sequence that may still complete (a proper prefix of a well-formed
  sequence, Unicode Table 3-7), cut at the first stop string to complete,
  minus the hold-back (the longest suffix that is a proper prefix of some
  stop). CPython's incremental decoder is not used: it holds some sequences
  that are already known to be invalid (ED A6, say), and the contract says
  those become U+FFFD at once;
- the terminal chunk decodes everything and releases the hold-back;
- a chunk is emitted once at least `interval` tokens are pending.

Run `python3 tests/conformance/generate.py` after changing a case; the Go
suite fails if the committed files differ from what this script writes.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

EOS = 0
# A shared vocabulary: each entry is the raw bytes of the piece.
PIECES = [
    b"</s>",            # 0  EOS (special)
    b"<|im_end|>",      # 1  special
    b"H", b"e", b"l", b"o", b" ", b"\n", b"#", b"x",   # 2..9
    "😀".encode(),      # 10 whole emoji F0 9F 98 80
    b"\xf0", b"\x9f", b"\x98", b"\x80",               # 11..14 emoji bytes one by one
    b"\xf0\x9f", b"\x98\x80",                         # 15, 16 emoji 2+2
    b"\xf0\x9f\x98",                                  # 17 emoji 3 (+14 for 1+3 as 11 + this? see cases)
    b"\x9f\x98\x80",                                  # 18 emoji tail 3
    "中".encode(), b"\xe4", b"\xb8", b"\xad",          # 19 中, 20..22 its bytes
    "\ufffd".encode(),                                # 23 a real U+FFFD token
    b"\xff",                                          # 24
    b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf",  # 25..27 overlongs
    b"\xed\xa0\x80",                                  # 28 surrogate
    b"\xf4\x90\x80\x80",                              # 29 above U+10FFFF
    b"a", b"b", b"y", b"U", b"s", b"r", b":",         # 30..36
    b"Hello", b" world", b"\n\nUser:", b"###",        # 37..40
    "文".encode(),                                     # 41
    b"<tool>",                                        # 42 special
    b"\xed\xa6",                                      # 43 ED needs 80..9F next: invalid at once
]
SPECIAL = [0, 1, 42]


def tid(piece):
    return PIECES.index(piece)


def runtime_config(**over):
    cfg = {"backend": "replay", "vocab": [p.hex() for p in PIECES],
           "special_ids": SPECIAL, "eos_id": EOS, "max_slots": 8}
    cfg.update(over)
    return cfg


def incomplete_tail(raw):
    """Length of the trailing bytes that are a proper prefix of a well-formed
    UTF-8 sequence (Unicode Table 3-7), which must wait for more bytes."""
    for k in (3, 2, 1):
        t = raw[-k:]
        if len(t) < k:
            continue
        b0 = t[0]
        if 0xC2 <= b0 <= 0xDF:
            n, lo, hi = 2, 0x80, 0xBF
        elif b0 == 0xE0:
            n, lo, hi = 3, 0xA0, 0xBF
        elif 0xE1 <= b0 <= 0xEC or 0xEE <= b0 <= 0xEF:
            n, lo, hi = 3, 0x80, 0xBF
        elif b0 == 0xED:
            n, lo, hi = 3, 0x80, 0x9F
        elif b0 == 0xF0:
            n, lo, hi = 4, 0x90, 0xBF
        elif 0xF1 <= b0 <= 0xF3:
            n, lo, hi = 4, 0x80, 0xBF
        elif b0 == 0xF4:
            n, lo, hi = 4, 0x80, 0x8F
        else:
            continue
        if k >= n or (k >= 2 and not lo <= t[1] <= hi):
            continue
        if all(0x80 <= c <= 0xBF for c in t[2:]):
            return k
    return 0


def hold_len(text, stops):
    """Longest suffix of text that is a proper prefix of some stop."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                best = max(best, k)
                break
    return best


def first_match(text, stops):
    """(start, end) of the stop occurrence that completes first; on a tie
    the longer stop. None when no stop occurs."""
    best = None
    for s in stops:
        i = text.find(s)
        if i < 0:
            continue
        end = i + len(s)
        if best is None or end < best[1] or (end == best[1] and i < best[0]):
            best = (i, end)
    return best


def expected(script, *, max_tokens=0, stops=(), stop_ids=(), include_stop=False,
             interval=1, skip_special=True, cancel_after_chunks=None,
             error_at=None, panic_at=None, pieces=None, special=None, eos=EOS):
    """The chunk sequence one batch item must receive."""
    pieces = PIECES if pieces is None else pieces
    special = SPECIAL if special is None else special
    stops = [s for s in stops if s]
    raw = b""             # every byte that reaches the text
    decoded = ""          # the decode of raw, less a tail that may complete
    released = 0          # chars of `decoded` already put into chunks
    pend_ids, chunks = [], []
    all_ids = []
    reason = None
    code = 0
    matched_at = None

    def visible(final):
        """The text that may be released now (a prefix of decoded)."""
        if matched_at is not None:
            return decoded[:matched_at]
        return decoded if final else decoded[:len(decoded) - hold_len(decoded, stops)]

    def take(final):
        nonlocal released
        v = visible(final)
        t = v[released:]
        released = len(v)
        return t

    k = 0
    while reason is None:
        if cancel_after_chunks is not None and len(chunks) == cancel_after_chunks:
            reason = "cancelled"
            break
        if k == panic_at:
            reason, code = "error", -11
            break
        if k == error_at:
            reason, code = "error", -10
            break
        burst = script[k] if k < len(script) else [eos]
        k += 1
        for i, t in enumerate(burst):
            pend_ids.append(t)
            all_ids.append(t)
            if t == eos:
                reason = "end_id"
                break
            if t in stop_ids:
                reason = "stop_words"
                break
            if not (skip_special and t in special):
                raw += pieces[t]
                decoded = raw[:len(raw) - incomplete_tail(raw)].decode("utf-8", "replace")
                m = first_match(decoded, stops)
                if m is not None:
                    matched_at = m[1] if include_stop else m[0]
                    reason = "stop_words"
                    break
            if max_tokens and len(all_ids) >= max_tokens:
                reason = "length"
                break
        if reason is None and len(pend_ids) >= interval:
            chunks.append({"token_ids": pend_ids, "text": take(False)})
            pend_ids = []
    # Terminal chunk: flush the decoder (a stop may still complete), release
    # the hold-back.
    if matched_at is None:
        decoded = raw.decode("utf-8", "replace")
        m = first_match(decoded, stops)
        if m is not None:
            matched_at = m[1] if include_stop else m[0]
            if reason in ("end_id", "length"):
                reason = "stop_words"
    term = {"token_ids": pend_ids, "text": take(True), "finished": True, "reason": reason}
    if code:
        term["error_code"] = code
    chunks.append(term)
    return {
        "chunks": chunks,
        "text": "".join(c["text"] for c in chunks),
        "token_ids": [t for c in chunks for t in c["token_ids"]],
        "reason": reason,
        **({"error_code": code} if code else {}),
    }


CASES = []


def case(name, script, *, request=None, channel=None, consumer=None, runtime=None, **exp_kw):
    req = {"prompt": "test", "script": script}
    req.update(request or {})
    chan = {"interval": 1, "skip_special": True, "queue_limit": 256, "policy": "coalesce"}
    chan.update(channel or {})
    kw = dict(max_tokens=req.get("max_tokens", 0), stops=req.get("stop", ()),
              stop_ids=req.get("stop_token_ids", ()), include_stop=req.get("include_stop", False),
              interval=max(chan["interval"], 1), skip_special=chan["skip_special"],
              error_at=req.get("error_at"), panic_at=req.get("panic_at"))
    if consumer and "cancel_after_chunks" in consumer:
        kw["cancel_after_chunks"] = consumer["cancel_after_chunks"]
    kw.update(exp_kw)
    exp = expected(script, **kw)
    v = {"name": name, "runtime": runtime or runtime_config(), "request": req,
         "channel": chan, "consumer": consumer or {}, "expect": [exp]}
    if consumer and consumer.get("drain_after_finish"):
        # Chunk boundaries then depend on coalescing; only the totals are fixed.
        e = v["expect"][0]
        del e["chunks"]
        e["max_chunks"] = chan["queue_limit"]
    CASES.append(v)


def submit_error(name, request, code, runtime=None):
    CASES.append({"name": name, "runtime": runtime or runtime_config(), "request": request,
                  "channel": {}, "consumer": {}, "expect_submit_error": code})


def build():
    H, e, l, o = tid(b"H"), tid(b"e"), tid(b"l"), tid(b"o")
    sp, nl, hs, x = tid(b" "), tid(b"\n"), tid(b"#"), tid(b"x")
    b11, b12, b13, b14 = 11, 12, 13, 14
    case("hello world, one token per burst", [[H], [e], [l], [l], [o], [37], [38]])
    case("emoji in one piece", [[10]])
    case("emoji split into 4 pieces", [[b11], [b12], [b13], [b14], [H]])
    case("emoji split 2+2", [[15], [16], [H]])
    case("emoji split 1+3", [[b11], [18], [H]])
    case("isolated continuation byte between ASCII", [[30], [b14], [31]])
    case("a real U+FFFD token", [[23], [30], [23]])
    case("1000 x 0xFF", [[24]] * 1000, channel={"queue_limit": 2000})
    case("3-byte leader cut by max_tokens", [[30], [20], [21], [22]], request={"max_tokens": 2})
    case("3-byte leader cut by EOS", [[30], [20], [EOS]])
    case("3-byte leader cut by an error", [[30], [20], [21], [22]], request={"error_at": 2})
    case("3-byte leader cut by a panic", [[30], [20], [21], [22]], request={"panic_at": 2})
    case("3-byte leader cut by cancel", [[30], [20], [21], [22], [30]],
         request={"hold_after": 2}, consumer={"cancel_after_chunks": 2})
    case("overlong sequences", [[25], [30], [26], [30], [27]])
    case("surrogate and above U+10FFFF", [[28], [30], [29], [30]])
    case("leader followed by ASCII", [[20], [30], [21], [31]])
    case("bytes known to be invalid are replaced at once", [[b11], [43], [30]])
    case("stop string split across 3 tokens", [[H], [30], [31], [32], [H]],
         request={"stop": ["aby"]})
    case("stop containing a CJK character split across tokens", [[H], [20], [21], [22], [41], [H]],
         request={"stop": ["中文"]})
    case("no chunk ends mid-character", [[30], [20], [21], [22], [H], [x]],
         request={"stop": ["xy"]})
    case("### held until x releases ##", [[hs], [hs], [x], [H]], request={"stop": ["###"]})
    case("### matched", [[H], [hs], [hs], [hs], [H]], request={"stop": ["###"]})
    case("stops that prefix each other", [[H], [nl], [nl], [33], [34]],
         request={"stop": ["\n\nUser:", "\n"]})
    case("longer stop completes first", [[H], [39]], request={"stop": ["\n\nUser:", "User:"]})
    case("partial stop at EOS is flushed", [[H], [hs], [hs], [EOS]], request={"stop": ["###"]})
    case("include_stop keeps the stop text", [[H], [hs], [hs], [hs], [H]],
         request={"stop": ["###"], "include_stop": True})
    case("interval 4 with a stop inside the second group",
         [[H], [e], [l], [l], [o], [hs], [hs], [hs], [x], [x]],
         request={"stop": ["###"]}, channel={"interval": 4})
    case("interval 3, terminal chunk carries the rest", [[H], [e], [l], [l], [o]],
         channel={"interval": 3})
    case("interval 0 means 1", [[H], [e], [l]], channel={"interval": 0})
    case("stop inside a multi-token burst discards the rest", [[H, e], [hs, hs, hs, x, x], [H]],
         request={"stop": ["###"]})
    case("EOS inside a burst discards the rest", [[H, e, EOS, l, l]])
    case("max_tokens inside a burst", [[H, e, l], [l, o, sp]], request={"max_tokens": 4})
    case("stop token id ends with stop_words", [[H], [e], [x], [l]],
         request={"stop_token_ids": [x]})
    case("stop string completed by the max_tokens-th token", [[H], [hs], [hs], [hs]],
         request={"stop": ["###"], "max_tokens": 4})
    case("special token skipped by default", [[H], [1], [e], [42], [l]])
    case("special token kept when skip is off", [[H], [1], [e], [42], [l]],
         channel={"skip_special": False})
    case("special between bytes of a character, skip on", [[20], [1], [21], [22]])
    case("special between bytes of a character, skip off", [[20], [1], [21], [22]],
         channel={"skip_special": False})
    case("multi-token bursts travel in one chunk", [[37, 38], [10, 19], [H]])
    case("consumer that never pops, queue limit 8",
         [[b11], [b12], [b13], [b14]] * 50 + [[20], [21], [22]] * 30 + [[37]] * 40,
         channel={"queue_limit": 8}, consumer={"drain_after_finish": True})
    case("pause policy: a small queue never merges chunks",
         [[H], [e], [l], [l], [o], [10], [19], [37]], channel={"queue_limit": 2, "policy": "pause"})
    case("cancel after the first chunk", [[H], [e], [l], [l], [o]],
         request={"hold_after": 1}, consumer={"cancel_after_chunks": 1})
    case("batch item with an empty script ends at once", [])
    # Batch: two prompts, one channel each, different scripts.
    v_script = [[[H], [e], [EOS]], [[10], [19], [x], [EOS]]]
    CASES.append({
        "name": "batch of two prompts, one channel each",
        "runtime": runtime_config(),
        "request": {"prompts": ["a", "b"], "scripts": v_script, "stop": ["x"]},
        "channel": {"interval": 1, "skip_special": True, "queue_limit": 256, "policy": "coalesce"},
        "consumer": {},
        "expect": [expected(v_script[0], stops=["x"]), expected(v_script[1], stops=["x"])],
    })
    submit_error("malformed request JSON", "{\"prompt\": ", "bad_json")
    submit_error("unknown request field", {"prompt": "a", "script": [], "max_token": 3}, "invalid_request")
    submit_error("wrong type for max_tokens", {"prompt": "a", "script": [], "max_tokens": "3"}, "invalid_request")
    submit_error("token outside the vocabulary", {"prompt": "a", "script": [[9999]]}, "invalid_request")
    submit_error("stop token id outside the vocabulary",
                 {"prompt": "a", "script": [], "stop_token_ids": [-1]}, "invalid_request")
    submit_error("no prompt", {"script": []}, "invalid_request")
    submit_error("temperature out of range", {"prompt": "a", "script": [], "temperature": -1}, "invalid_request")
    submit_error("negative hold_after", {"prompt": "a", "script": [], "hold_after": -2}, "invalid_request")


def random_vectors(n, seed):
    """Random vocabularies (valid, partial and invalid UTF-8 pieces, specials),
    random bursts, random stop sets, intervals and limits: for property tests
    that the hand-written cases cannot cover."""
    import random
    rng = random.Random(seed)
    alphabet = ["a", "b", "#", "\n", " ", "中", "文", "é", "😀", "\ufffd"]
    out = []
    for i in range(n):
        pieces = [b"</s>"]
        for _ in range(rng.randint(4, 24)):
            kind = rng.random()
            if kind < 0.5:
                pieces.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3))).encode())
            elif kind < 0.8:
                whole = rng.choice(alphabet[5:]).encode()
                cut = rng.randint(1, len(whole))
                pieces.append(whole[:cut] if rng.random() < 0.5 else whole[cut - 1:])
            else:
                pieces.append(bytes(rng.randint(0x80, 0xff) for _ in range(rng.randint(1, 3))))
        pieces = list(dict.fromkeys(pieces))
        special = [0] + [t for t in range(1, len(pieces)) if rng.random() < 0.1]
        ids = list(range(1, len(pieces)))
        script = [[rng.choice(ids) for _ in range(rng.choice([1, 1, 1, 2, 3, 5]))]
                  for _ in range(rng.randint(0, 40))]
        if rng.random() < 0.2 and script:
            script[rng.randrange(len(script))].insert(0, 0)
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3)))
                 for _ in range(rng.choice([0, 0, 1, 2, 3]))]
        req = {"prompt": "p", "script": script, "stop": stops}
        if rng.random() < 0.3:
            req["max_tokens"] = rng.randint(1, 30)
        if rng.random() < 0.2:
            req["stop_token_ids"] = [rng.choice(ids)]
        if rng.random() < 0.2:
            req["include_stop"] = True
        chan = {"interval": rng.choice([1, 1, 2, 3, 7]), "skip_special": rng.random() < 0.7,
                "queue_limit": 4096, "policy": "coalesce"}
        exp = expected(script, max_tokens=req.get("max_tokens", 0), stops=stops,
                       stop_ids=req.get("stop_token_ids", ()), include_stop=req.get("include_stop", False),
                       interval=chan["interval"], skip_special=chan["skip_special"],
                       pieces=pieces, special=special, eos=0)
        out.append({"name": f"random {seed}/{i}",
                    "runtime": {"backend": "replay", "vocab": [p.hex() for p in pieces],
                                "special_ids": special, "eos_id": 0, "max_slots": 8},
                    "request": req, "channel": chan, "consumer": {}, "expect": [exp]})
    return out


def main():
    if "--random" in sys.argv:
        i = sys.argv.index("--random")
        n, seed = int(sys.argv[i + 1]), int(sys.argv[i + 2])
        json.dump(random_vectors(n, seed), sys.stdout, ensure_ascii=False)
        return
    build()
    check = "--check" in sys.argv
    names = set()
    stale = []
    for i, v in enumerate(CASES):
        slug = "".join(c if c.isalnum() else "_" for c in v["name"].lower()).strip("_")
        while "__" in slug:
            slug = slug.replace("__", "_")
        fname = f"{i:03d}_{slug}.json"
        assert fname not in names
        names.add(fname)
        body = json.dumps(v, indent=1, ensure_ascii=False) + "\n"
        path = os.path.join(HERE, fname)
        if check:
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != body:
                stale.append(fname)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
    existing = {f for f in os.listdir(HERE) if f.endswith(".json")}
    extra = existing - names
    if check:
        if stale or extra:
            print("stale conformance vectors:", sorted(stale), "extra:", sorted(extra))
            sys.exit(1)
        print(f"{len(names)} conformance vectors up to date")
    else:
        for f in extra:
            os.remove(os.path.join(HERE, f))
        print(f"wrote {len(names)} conformance vectors")


if __name__ == "__main__":
    main()
