"""Every stream-contract vector of tests/conformance/ through the Python API,
once with the blocking iterator and once with ``async for`` (mirrors
tests/conformance/conformance_test.go)."""
import asyncio
import glob
import json
import os
import time

import pytest
from conftest import CONFORMANCE_DIR

import lmstream
from lmstream import _lib
from lmstream.errors import ERRORS_BY_IDENT
from lmstream.runtime import _ChannelSettings

FILES = sorted(glob.glob(os.path.join(CONFORMANCE_DIR, "*.json")))

# Request fields that are parameters of generate(); the rest go in **extra.
API_FIELDS = {"max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop",
              "stop_token_ids", "include_stop", "tpot_slo_ms", "ttft_slo_ms"}


def test_vectors_exist():
    assert len(FILES) >= 50, CONFORMANCE_DIR


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def make_runtime(cfg):
    cfg = dict(cfg)
    assert cfg.pop("backend") == "replay"
    vocab = [bytes.fromhex(h) for h in cfg.pop("vocab")]
    return lmstream.Runtime.replay(vocab=vocab, eos_id=cfg.pop("eos_id"),
                                   special_ids=cfg.pop("special_ids", []), **cfg)


def channel_kwargs(ch):
    kw = {"stream_interval": ch.get("interval", 0)}
    if ch.get("skip_special") is not None:
        kw["skip_special_tokens"] = ch["skip_special"]
    if ch.get("queue_limit", 0) > 0:
        kw["queue_limit"] = ch["queue_limit"]
        kw["queue_policy"] = ch.get("policy") or "coalesce"
    return kw


def submit(rt, v, raise_on_error=False):
    """Submits the vector's request through generate()/generate_batch();
    a request given as a JSON string goes verbatim."""
    req = v["request"]
    n = max(len(v.get("expect") or []), 1)
    ch = channel_kwargs(v.get("channel") or {})
    if isinstance(req, str):
        settings = _ChannelSettings(ch.get("stream_interval"), ch.get("skip_special_tokens"),
                                    ch.get("queue_limit"), ch.get("queue_policy"))
        return rt._submit_json(req.encode(), n, settings, raise_on_error)
    req = dict(req)
    kw = dict(ch, raise_on_error=raise_on_error)
    for k in list(req):
        if k in API_FIELDS:
            kw[k] = req.pop(k)
    if "prompts" in req:
        prompts = req.pop("prompts")
        return rt.generate_batch(prompts, **kw, **req)
    prompt = req.pop("prompt", None)
    messages = req.pop("messages", None)
    return [rt.generate(prompt, messages=messages, **kw, **req)]


def submit_raw(rt, v):
    """The same request as JSON, straight to lms_submit (the library's own
    validation, where the Python API validates first)."""
    req = v["request"]
    data = req.encode() if isinstance(req, str) else json.dumps(req).encode()
    ch = channel_kwargs(v.get("channel") or {})
    settings = _ChannelSettings(ch.get("stream_interval"), ch.get("skip_special_tokens"),
                                ch.get("queue_limit"), ch.get("queue_policy"))
    return rt._submit_json(data, max(len(v.get("expect") or []), 1), settings, False)


def wait_finished(s):
    deadline = time.monotonic() + 10
    while not s.state().finished:
        assert time.monotonic() < deadline, "stream did not finish"
        time.sleep(0.001)


def consume_sync(s, consumer):
    got = []
    for c in s:
        got.append(c)
        if consumer.get("cancel_after_chunks") is not None and len(got) == consumer["cancel_after_chunks"]:
            s.cancel()
    return got


async def consume_async(s, consumer):
    got = []
    async for c in s:
        got.append(c)
        if consumer.get("cancel_after_chunks") is not None and len(got) == consumer["cancel_after_chunks"]:
            s.cancel()
    return got


def check_chunks(exp, got):
    assert got, "no chunk"
    text, ids = "", []
    for i, c in enumerate(got):
        c._text_bytes().decode("utf-8")  # I1: strict UTF-8, raises if not
        assert c.finished == (i == len(got) - 1), "I3: exactly the last chunk is terminal"
        text += c.text
        ids += c.token_ids
    last = got[-1]
    assert last.reason.ident == exp["reason"]
    assert isinstance(last.reason, lmstream.FinishReason)
    assert last.error_code == exp.get("error_code", 0), last.error
    if exp.get("error_code"):
        assert isinstance(last.error, ERRORS_BY_IDENT[_ident(exp["error_code"])])
        assert last.error.message
    else:
        assert last.error is None
    assert text == exp["text"], "I2: concatenated text"
    assert ids == exp["token_ids"], "I4: concatenated token ids"
    assert last.usage is not None and last.usage.generated_tokens == len(ids)
    if exp.get("max_chunks"):
        assert len(got) <= exp["max_chunks"], "queue limit bounds the chunks"
    if exp.get("chunks") is not None:
        want = [(c.get("token_ids") or [], c.get("text", ""), c.get("finished", False),
                 c.get("reason") if c.get("finished") else None, c.get("error_code", 0))
                 for c in exp["chunks"]]
        have = [(c.token_ids, c.text, c.finished, c.reason.ident if c.finished else None,
                 c.error_code) for c in got]
        assert have == want, "chunk sequence"


def _ident(code):
    return {c.code: c.ident for c in ERRORS_BY_IDENT.values()}[code]


def check_nothing_follows(s):
    """The library has nothing after the terminal chunk (the runner keeps
    the channel open past the end for this check)."""
    out = _lib.ctypes.POINTER(_lib.LmsChunk)()
    assert _lib.lib.lms_channel_try_pop(s._h, _lib.ctypes.byref(out)) == _lib.LMS_DONE
    s.close()


def run_vector(v, mode):
    with make_runtime(v["runtime"]) as rt:
        if v.get("expect_submit_error"):
            cls = ERRORS_BY_IDENT[v["expect_submit_error"]]
            with pytest.raises(cls) as ei:
                submit(rt, v)
            assert ei.value.ident == v["expect_submit_error"] and ei.value.message
            with pytest.raises(cls) as ei:  # and the library says the same
                submit_raw(rt, v)
            assert ei.value.ident == v["expect_submit_error"] and ei.value.message
            assert rt.stats()["active_slots"] == 0
            return
        streams = submit(rt, v)
        assert len(streams) == len(v["expect"])
        consumer = v.get("consumer") or {}
        for i, (s, exp) in enumerate(zip(streams, v["expect"])):
            assert s.index == i
            s._release_at_end = False
            if consumer.get("drain_after_finish"):
                wait_finished(s)
            if mode == "sync":
                got = consume_sync(s, consumer)
            else:
                got = asyncio.run(consume_async(s, consumer))
            assert s.finished and s.final is got[-1]
            check_nothing_follows(s)
            check_chunks(exp, got)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(f)[:-5] for f in FILES])
def test_vector(path, mode):
    run_vector(load(path), mode)


ERROR_VECTORS = [f for f in FILES if load(f).get("expect") and
                 any(e.get("error_code") for e in load(f)["expect"])]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("path", ERROR_VECTORS, ids=[os.path.basename(f)[:-5] for f in ERROR_VECTORS])
def test_error_vector_raises(path, mode):
    """With raise_on_error (the default) the error terminal chunk raises its
    exception after the chunks before it were yielded; the exception
    carries the terminal chunk."""
    v = load(path)
    exp = v["expect"][0]
    with make_runtime(v["runtime"]) as rt:
        (s,) = submit(rt, v, raise_on_error=True)
        got = []

        async def acollect():
            async for c in s:
                got.append(c)

        with pytest.raises(lmstream.LmstreamError) as ei:
            if mode == "sync":
                for c in s:
                    got.append(c)
            else:
                asyncio.run(acollect())
        e = ei.value
        assert e.code == exp["error_code"]
        assert type(e) is ERRORS_BY_IDENT[_ident(exp["error_code"])]
        assert e.chunk is not None and e.chunk.finished and e.chunk.error is e
        check_chunks(exp, got + [e.chunk])
        assert s.closed


@pytest.mark.parametrize("path", ERROR_VECTORS[:1], ids=["text"])
def test_error_vector_text(path):
    v = load(path)
    exp = v["expect"][0]
    with make_runtime(v["runtime"]) as rt:
        (s,) = submit(rt, v, raise_on_error=True)
        with pytest.raises(lmstream.LmstreamError) as ei:
            s.text()
        assert ei.value.partial_text == exp["text"]
        (s,) = submit(rt, v, raise_on_error=False)
        assert s.text() == exp["text"]
        assert s.reason == lmstream.FinishReason.ERROR


def random_vectors(count=120, seed=20261122):
    """generate.py's random vectors (random vocabularies, bursts, stops,
    intervals and limits, with the oracle's expected chunks), as the Go
    suite's TestRandomStreams runs them. LMSTREAM_RANDOM_SEED and
    LMSTREAM_RANDOM_COUNT pick others."""
    import subprocess
    import sys
    seed = int(os.environ.get("LMSTREAM_RANDOM_SEED", seed))
    count = int(os.environ.get("LMSTREAM_RANDOM_COUNT", count))
    out = subprocess.run([sys.executable, os.path.join(CONFORMANCE_DIR, "generate.py"), "--random",
                          str(count), str(seed)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


RANDOM = random_vectors()


@pytest.mark.parametrize("i", range(len(RANDOM)), ids=[v["name"] for v in RANDOM])
def test_random_vector(i):
    run_vector(RANDOM[i], "sync" if i % 2 == 0 else "async")
