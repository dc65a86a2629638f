"""Wrong types and unknown parameters raise clear exceptions; the known
parameters are checked in Python before anything reaches the library."""
import pytest
from conftest import VOCAB

import lmstream
from lmstream import runtime as runtime_mod


class NoLibrary:
    def __getattr__(self, name):
        raise AssertionError(f"{name} reached the library")


@pytest.fixture
def guarded(rt, monkeypatch):
    """A runtime whose submissions must not reach the library."""
    monkeypatch.setattr(runtime_mod, "lib", NoLibrary())
    return rt


WRONG_TYPES = [
    dict(prompt=123),
    dict(prompt=b"bytes"),
    dict(max_tokens="3"),
    dict(max_tokens=3.0),
    dict(max_tokens=True),
    dict(temperature="hot"),
    dict(temperature=None, top_p=[1]),
    dict(top_k=2.5),
    dict(min_p="0"),
    dict(seed="42"),
    dict(stop=5),
    dict(stop=[b"x"]),
    dict(stop_token_ids=["1"]),
    dict(stop_token_ids=3),
    dict(include_stop=1),
    dict(stream_interval=1.5),
    dict(skip_special_tokens="yes"),
    dict(queue_limit="8"),
    dict(queue_policy=1.0),
    dict(tpot_slo_ms="fast"),
    dict(raise_on_error=None),
    dict(messages="hello"),
    dict(messages=["hello"]),
    dict(messages=[{"role": "user", "content": 5}]),
    dict(messages=[{"role": "user", "content": ["x"]}]),
    dict(messages=[{"role": "assistant", "content": "", "tool_calls": "get_weather"}]),
    dict(messages=[{"role": "assistant", "tool_calls": [5]}]),
    dict(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}]),
    dict(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": None}}]}]),
    dict(messages=[{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]),
    dict(messages=[{"role": "tool", "content": "x", "tool_call_id": 7}]),
    dict(tools={"type": "function"}),
    dict(tools=["get_weather"]),
    dict(tool_choice=5),
    dict(parallel_tool_calls="yes"),
    dict(reasoning_format=1),
    dict(chat_template_kwargs=["enable_thinking"]),
    dict(script=object()),  # an extra field that is not JSON
]


@pytest.mark.parametrize("kw", WRONG_TYPES, ids=[repr(k)[:40] for k in WRONG_TYPES])
def test_wrong_types_raise_type_error(guarded, kw):
    kw = dict(kw)
    prompt = kw.pop("prompt", None if "messages" in kw else "p")
    with pytest.raises(TypeError) as ei:
        guarded.generate(prompt, **kw)
    assert isinstance(ei.value, lmstream.InvalidRequest)  # also an lmstream error
    assert str(ei.value)


BAD_VALUES = [
    dict(max_tokens=0),
    dict(temperature=-1),
    dict(temperature=float("nan")),
    dict(top_p=0),
    dict(top_p=1.5),
    dict(min_p=2),
    dict(top_k=-1),
    dict(seed=-1),
    dict(seed=2**64),
    dict(stop_token_ids=[-1]),
    dict(queue_limit=0),
    dict(queue_policy="fast"),
    dict(stream_interval=-1),
    dict(messages=[]),
    dict(messages=[{"content": "x"}]),
    dict(messages=[{"role": "user", "content": "x", "nam": "bob"}]),
    dict(messages=[{"role": "assistant", "tool_calls": [{"type": "function"}]}]),
    dict(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": "f"}, "index": 0}]}]),
    dict(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "args": "{}"}}]}]),
    dict(prompt="p", messages=[{"role": "user", "content": "x"}]),
    dict(prompt=None),
    dict(tpot_slo_ms=-5),
]


@pytest.mark.parametrize("kw", BAD_VALUES, ids=[repr(k)[:40] for k in BAD_VALUES])
def test_bad_values_raise_invalid_request(guarded, kw):
    kw = dict(kw)
    prompt = kw.pop("prompt", None if "messages" in kw else "p")
    with pytest.raises(lmstream.InvalidRequest) as ei:
        guarded.generate(prompt, **kw)
    assert isinstance(ei.value, ValueError) and ei.value.code == -4 and ei.value.message


def test_unknown_fields_are_reported_by_the_library(rt):
    with pytest.raises(lmstream.InvalidRequest) as ei:
        rt.generate("p", script=[], max_token=3)
    assert "max_token" in str(ei.value) and ei.value.code == -4
    with pytest.raises(lmstream.InvalidRequest, match="vocabulary"):
        rt.generate("p", script=[[9999]])
    assert rt.stats()["submitted"] == 0


def test_generate_positional_only_prompt(rt):
    with pytest.raises(TypeError):
        rt.generate("p", 16)  # parameters after the prompt are keyword-only


def test_batch_validation(guarded):
    with pytest.raises(TypeError):
        guarded.generate_batch("one string")
    with pytest.raises(lmstream.InvalidRequest):
        guarded.generate_batch([])
    with pytest.raises(TypeError):
        guarded.generate_batch(["a", 2])


def test_runtime_config_validation(monkeypatch):
    with pytest.raises(TypeError):
        lmstream.Runtime(model_path=42)
    with pytest.raises(TypeError):
        lmstream.Runtime.replay(vocab="abc", eos_id=0)
    with pytest.raises(TypeError):
        lmstream.Runtime.replay(vocab=[b"a", 3], eos_id=0)
    with pytest.raises(TypeError):
        lmstream.Runtime.replay(vocab=VOCAB, eos_id="0")
    with pytest.raises(lmstream.InvalidRequest):
        lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, max_slots=0)
    # Reported by the library.
    with pytest.raises(lmstream.InvalidRequest, match="eos_id"):
        lmstream.Runtime.replay(vocab=VOCAB, eos_id=len(VOCAB))
    with pytest.raises(lmstream.InvalidRequest, match="bogus"):
        lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, bogus=1)
    with pytest.raises(lmstream.InvalidRequest, match="unknown backend"):
        lmstream.Runtime(backend="nope")


def test_error_hierarchy():
    from lmstream.errors import ERRORS_BY_CODE, error_for
    for code, cls in ERRORS_BY_CODE.items():
        e = error_for(code, "msg")
        assert type(e) is cls and isinstance(e, lmstream.LmstreamError)
        assert e.code == code and e.message == "msg"
    assert issubclass(lmstream.BadJSON, lmstream.InvalidRequest)
    assert issubclass(lmstream.PromptTooLong, lmstream.InvalidRequest)
    assert error_for(-4).message == "invalid request"  # lms_strerror
    assert type(error_for(-999)) is lmstream.LmstreamError
    import pickle
    e = pickle.loads(pickle.dumps(lmstream.CapacityError("full")))
    assert type(e) is lmstream.CapacityError and e.message == "full"


def test_api_surface(rt):
    s = rt.generate("p", script=[[2], [3]], stop="e", stream_interval=1,
                    skip_special_tokens=True, queue_limit=16, queue_policy="pause",
                    temperature=0, top_p=1, top_k=0, min_p=0, seed=1, include_stop=False,
                    stop_token_ids=[7], tpot_slo_ms=10, ttft_slo_ms=100, max_tokens=10)
    assert s.text() == "H" and s.reason == lmstream.FinishReason.STOP_WORDS
    assert str(s.reason) == "stop_words"
    c = rt.complete("p", script=[[2], [8], [9], [10]])
    assert c.text == "H中" and c.finished and c.reason == lmstream.FinishReason.END_ID
    assert c.token_ids == [2, 8, 9, 10, 0] and c.usage.generated_tokens == 5
    with pytest.raises(lmstream.BackendError):
        rt.complete("p", script=[[2], [3]], error_at=1)
    c = rt.complete("p", script=[[2], [3]], error_at=1, raise_on_error=False)
    assert c.reason == lmstream.FinishReason.ERROR and isinstance(c.error, lmstream.BackendError)
    st = rt.stats()
    assert set(st) >= {"max_slots", "active_slots", "queued", "submitted", "finished",
                       "tokens_generated", "iterations"}
    lmstream.configure_process(gc_percent=100)
    with pytest.raises(lmstream.InvalidRequest):
        lmstream.configure_process(threads=0)
    assert "Runtime" in repr(rt) and "Stream" in repr(s) and "Chunk" in repr(c)
    assert lmstream.Chunk.make([1], "a") == lmstream.Chunk.make([1], "a")


def test_capacity_error():
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=0, max_slots=1, max_queue=1) as rt:
        a = rt.generate("p", script=[[2]] * 1000, delay_ms=5)
        b = None
        with pytest.raises(lmstream.CapacityError):
            for _ in range(5):  # the first waits in the queue, then it is full
                b = rt.generate("p", script=[[2]])
        a.close()
        if b is not None:
            b.close()
