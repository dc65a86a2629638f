"""OpenAI-shaped completions and JSON-ready chunks: the shapes OpenAI
clients read, finish reasons mapped to "stop" / "length", the native
reason kept, and the same text as the plain streams."""
import json
import os

import pytest
from conftest import DEFAULT_MODEL

import lmstream
from lmstream.completions import finish_reason

MODEL = os.environ.get("LMSTREAM_MODEL", DEFAULT_MODEL)
CHAT = [{"role": "user", "content": "What is the capital of Japan?"}]


@pytest.fixture(scope="module")
def model_rt():
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    with lmstream.Runtime(model_path=MODEL, context_length=512, max_slots=2) as rt:
        yield rt


def test_finish_reason_map():
    F = lmstream.FinishReason
    assert finish_reason(F.END_ID) == "stop"
    assert finish_reason(F.STOP_WORDS) == "stop"
    assert finish_reason(F.LENGTH) == "length"
    assert finish_reason(F.CANCELLED) == "stop"
    assert finish_reason(F.NOT_FINISHED) is None and finish_reason(F.ERROR) is None


def test_chat_stream_shape(model_rt):
    chunks = list(model_rt.create_chat_completion(CHAT, stream=True, max_tokens=32))
    json.dumps(chunks)  # plain data
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")
    for c in chunks:
        assert c["object"] == "chat.completion.chunk"
        assert isinstance(c["created"], int) and c["model"] == os.path.basename(MODEL)
        assert len(c["choices"]) == 1 and c["choices"][0]["index"] == 0
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    last = chunks[-1]["choices"][0]
    assert last["delta"] == {} and last["finish_reason"] == "stop"
    assert last["native_finish_reason"] == "end_id"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert "Tokyo" in text
    # The same text as the plain stream, greedy.
    assert text == model_rt.complete(messages=CHAT, max_tokens=32).text
    u = chunks[-1]["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0


def test_chat_whole_and_length(model_rt):
    r = model_rt.create_chat_completion(CHAT, max_tokens=3)
    json.dumps(r)
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    ch = r["choices"][0]
    assert ch["message"]["role"] == "assistant" and ch["message"]["content"]
    assert ch["finish_reason"] == "length" and ch["native_finish_reason"] == "length"
    assert r["usage"]["completion_tokens"] == 3


def test_stop_string_is_stop(model_rt):
    r = model_rt.create_chat_completion(CHAT, max_tokens=32, stop=["Tokyo"])
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["choices"][0]["native_finish_reason"] == "stop_words"
    assert "Tokyo" not in r["choices"][0]["message"]["content"]


def test_text_completion(model_rt):
    prompt = "The capital of Japan is"
    chunks = list(model_rt.create_completion(prompt, stream=True, max_tokens=4))
    assert all(c["object"] == "text_completion" for c in chunks)
    text = "".join(c["choices"][0]["text"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    whole = model_rt.create_completion(prompt, max_tokens=4)
    assert whole["choices"][0]["text"] == text == model_rt.complete(prompt, max_tokens=4).text
    assert whole["usage"]["prompt_tokens"] == model_rt.count_tokens(prompt)


def test_leaving_a_stream_cancels(model_rt):
    it = model_rt.create_chat_completion(CHAT, stream=True, max_tokens=200)
    next(it), next(it)
    it.close()
    from conftest import wait_idle
    wait_idle(model_rt, timeout=10)


def test_errors_raise(model_rt):
    with pytest.raises(lmstream.InvalidRequest):
        model_rt.create_chat_completion(CHAT, max_tokens=0)
    with pytest.raises(lmstream.InvalidType):
        model_rt.create_completion("x", stream="yes")


def test_chunk_to_dict(rt):
    s = rt.generate("x", script=[[2, 3], [4, 0]])
    dicts = [c.to_dict() for c in s]
    json.dumps(dicts)
    assert dicts[0] == {"token_ids": [2, 3], "text": "He", "finished": False}
    last = dicts[-1]
    assert last["finished"] and last["reason"] == "end_id" and last["error"] is None
    assert last["usage"]["generated_tokens"] == 4
    c = lmstream.Chunk.make([1], "x", True, lmstream.FinishReason.ERROR, None,
                            lmstream.BackendError("boom", -10))
    assert c.to_dict()["error"] == {"code": -10, "message": "boom"}


def test_async_matches_blocking(model_rt):
    import asyncio

    async def main():
        whole = await model_rt.acreate_chat_completion(CHAT, max_tokens=16)
        it = await model_rt.acreate_chat_completion(CHAT, stream=True, max_tokens=16)
        chunks = [c async for c in it]
        text = await model_rt.acreate_completion("The capital of Japan is", max_tokens=4)
        return whole, chunks, text

    whole, chunks, text = asyncio.run(main())
    blocking = list(model_rt.create_chat_completion(CHAT, stream=True, max_tokens=16))
    def joined(cs):
        return "".join(c["choices"][0]["delta"].get("content", "") for c in cs)

    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == blocking[-1]["choices"][0]["finish_reason"]
    assert joined(chunks) == joined(blocking) == whole["choices"][0]["message"]["content"]
    want = model_rt.create_completion("The capital of Japan is", max_tokens=4)["choices"][0]["text"]
    assert text["choices"][0]["text"] == want


def test_repeated_prompt_reports_cached_tokens():
    """usage.prompt_tokens_details.cached_tokens (ABI 4's lms_usage field):
    a fresh runtime's first send prefills everything; the same request again
    finds its prompt in the slot's KV (all but the last token, which is
    computed again for the logits)."""
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    with lmstream.Runtime(model_path=MODEL, context_length=256, max_slots=1, spec_budget=8) as rt:
        first = rt.create_chat_completion(CHAT, max_tokens=4)
        again = rt.create_chat_completion(CHAT, max_tokens=4)
        streamed = list(rt.create_chat_completion(CHAT, stream=True, max_tokens=4))
        raw = rt.complete(messages=CHAT, max_tokens=4).usage
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    p = again["usage"]["prompt_tokens"]
    assert p == first["usage"]["prompt_tokens"] > 1
    assert 0 < again["usage"]["prompt_tokens_details"]["cached_tokens"] < p
    assert 0 < streamed[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] < p
    assert 0 < raw.cached_tokens < raw.prompt_tokens == p
