"""logprobs=True / top_logprobs=k: per-token log-probabilities through the
ABI (lms_chunk.logprobs), on chunks, complete() and the OpenAI-shaped
completions."""
import asyncio
import json
import math
import os
import pickle

import pytest
from conftest import DEFAULT_MODEL, EOS, VOCAB

import lmstream
from lmstream.errors import InvalidRequest

MODEL = os.environ.get("LMSTREAM_MODEL", DEFAULT_MODEL)


def test_replay_chunks_carry_one_entry_per_token(rt):
    # Bursts of several tokens, a character split across tokens (4 bytes of
    # 中 over three ids), and the end token.
    script = [[2, 3], [4, 4, 5], [8], [9, 10], [EOS]]
    chunks = list(rt.generate(prompt="", script=script, logprobs=True, top_logprobs=1))
    ids = [i for c in chunks for i in c.token_ids]
    lps = [lp for c in chunks if c.logprobs for lp in c.logprobs]
    assert ids == [2, 3, 4, 4, 5, 8, 9, 10, EOS]
    for c in chunks:
        assert c.logprobs is None if not c.token_ids else len(c.logprobs) == len(c.token_ids)
    # Scripted tokens are certain: logprob 0, the only alternative itself.
    assert [(lp.token_id, lp.logprob, lp.bytes) for lp in lps] == [(i, 0.0, VOCAB[i]) for i in ids]
    assert all(lp.top == [lmstream.Logprob(lp.token_id, 0.0, VOCAB[lp.token_id])] for lp in lps)

    whole = rt.complete(prompt="", script=script, logprobs=True, top_logprobs=1)
    assert whole.logprobs == lps
    # Plain data, and copies by value.
    d = json.loads(json.dumps(whole.to_dict()))
    assert d["logprobs"][0] == {"token": "H", "logprob": 0.0, "bytes": [72], "token_id": 2,
                                "top_logprobs": [{"token": "H", "logprob": 0.0, "bytes": [72], "token_id": 2}]}
    assert pickle.loads(pickle.dumps(whole)) == whole


def test_replay_without_logprobs_has_none(rt):
    c = rt.complete(prompt="", script=[[2, 3]])
    assert c.logprobs is None and "logprobs" not in c.to_dict()


def test_request_errors(rt):
    with pytest.raises(InvalidRequest, match=r'"top_logprobs" must be in \[0, 20\]'):
        rt.generate(prompt="", script=[], logprobs=True, top_logprobs=21)
    with pytest.raises(InvalidRequest, match=r'needs "logprobs": true'):
        rt.generate(prompt="", script=[], top_logprobs=2)
    with pytest.raises(InvalidRequest, match=r'"logprobs" must be a boolean'):
        rt.generate(prompt="", script=[], logprobs=1)


@pytest.fixture(scope="module")
def model_rt():
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    with lmstream.Runtime(model_path=MODEL, max_slots=2, context_length=512, spec_budget=8) as r:
        yield r


MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def test_chat_completion_logprobs_openai_shaped(model_rt):
    out = model_rt.create_chat_completion(MESSAGES, max_tokens=16, logprobs=True, top_logprobs=3)
    choice = out["choices"][0]
    content = choice["logprobs"]["content"]
    assert content, out
    json.dumps(out)
    # The entries spell the answer, byte for byte.
    assert b"".join(bytes(e["bytes"]) for e in content).decode("utf-8") == choice["message"]["content"]
    for e in content:
        assert set(e) == {"token", "logprob", "bytes", "token_id", "top_logprobs"}
        assert e["logprob"] <= 0
        top = e["top_logprobs"]
        assert len(top) == 3
        assert [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert sum(math.exp(t["logprob"]) for t in top) <= 1 + 1e-9
        # Greedy: each token is the likeliest at its place.
        assert top[0]["token_id"] == e["token_id"] and top[0]["logprob"] == e["logprob"]

    # Streamed, the same entries arrive with the content deltas.
    streamed = []
    for d in model_rt.create_chat_completion(MESSAGES, max_tokens=16, logprobs=True, top_logprobs=3,
                                             stream=True):
        lp = d["choices"][0]["logprobs"]
        if lp is not None:
            streamed.extend(lp["content"])
    assert [(e["token_id"], e["bytes"]) for e in streamed] == [(e["token_id"], e["bytes"]) for e in content]
    for a, b in zip(streamed, content):
        assert a["logprob"] == pytest.approx(b["logprob"], abs=1e-5)

    plain = model_rt.create_chat_completion(MESSAGES, max_tokens=4)
    assert plain["choices"][0]["logprobs"] is None


def test_speculative_logprobs_equal_plain(model_rt):
    """Greedy with speculation (the n-gram drafter on a repetitive prompt)
    and without: the same tokens, the same logprobs."""
    prompt = "one two three, one two three, one two three, one two three, one two"
    spec = model_rt.complete(prompt, max_tokens=24, logprobs=True, top_logprobs=2, speculate=True)
    plain = model_rt.complete(prompt, max_tokens=24, logprobs=True, top_logprobs=2, speculate=False)
    assert spec.usage.draft_tokens_accepted > 0
    assert spec.token_ids == plain.token_ids
    for a, b in zip(spec.logprobs, plain.logprobs):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-5)
        assert [t.token_id for t in a.top] == [t.token_id for t in b.top]


def test_async_stream_carries_logprobs(model_rt):
    async def main():
        got = []
        async for c in model_rt.generate(messages=MESSAGES, max_tokens=6, logprobs=True):
            got.extend(c.logprobs or [])
        return got
    lps = asyncio.run(main())
    assert 1 <= len(lps) <= 6 and all(lp.logprob <= 0 and lp.top == [] for lp in lps)
