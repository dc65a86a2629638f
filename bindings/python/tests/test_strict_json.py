"""Issue 10 through the C ABI from Python: strict JSON (row 6), bounded
request fields (row 2) and tiny temperatures (row 1). Raw bytes go to
lms_submit as given, so the library's own checks are what is tested, not
the binding's."""
import os
import threading

import pytest
from conftest import DEFAULT_MODEL

import lmstream
from lmstream import runtime as runtime_mod

GO_TYPE_WORDS = ["*string", "[]string", "runtime.", "int32", "int64", "uint64", "float64", "[]int"]


def submit_raw(rt, data: bytes, n: int = 1):
    settings = runtime_mod._ChannelSettings(None, None, None, None)
    return rt._submit_json(data, n, settings)


def assert_clean(ei, cls, *fragments):
    e = ei.value
    assert type(e) is cls, f"{type(e).__name__}: {e}"
    for f in fragments:
        assert f in e.message
    for w in GO_TYPE_WORDS:
        assert w not in e.message


BAD_JSON = [
    (b'{"prompt":"x","script":[[2]]}}', "unexpected data after the top-level value", "at byte 29"),
    (b'{"prompt":"x","script":[[2]]} {}', "unexpected data", "at byte 30"),
    (b'{"prompt":"x","prompt":"y","script":[[2]]}', 'duplicate key "prompt"', "at byte 14"),
    (b'{"prompt":"x","script":[[2]],"x":{"a":1,"a":2}}', 'duplicate key "a"', "at byte"),
    (b'{"prompt":"\xff","script":[[2]]}', "invalid UTF-8 byte 0xff", "at byte 11"),
    (b'{"prompt":"\xed\xa0\x80","script":[[2]]}', "invalid UTF-8", "at byte 11"),
    (b'{"prompt":"\\ud800","script":[[2]]}', "lone high surrogate", "at byte 11"),
    (b'{"prompt":"\\udc00","script":[[2]]}', "lone low surrogate", "at byte 11"),
    (b'{"prompt":"x","script":' + b"[" * 100 + b"]" * 100 + b"}", "nested deeper than 64 levels", "at byte"),
    (b'{"prompt":"x","script":[[2]],"temperature":NaN}', "unexpected character", "at byte 43"),
]


@pytest.mark.parametrize("data,msg,where", BAD_JSON, ids=[d[:40].decode("latin-1") for d, _, _ in BAD_JSON])
def test_malformed_json_is_bad_json(rt, data, msg, where):
    with pytest.raises(lmstream.BadJSON) as ei:
        submit_raw(rt, data)
    assert_clean(ei, lmstream.BadJSON, msg, where)


INVALID = [
    (b'{"prompt":"x","script":[[2]],"seed":null}', '"seed" must be an integer, got null (at byte 36)'),
    (b'{"prompt":null,"script":[[2]]}', '"prompt" must be a string, got null'),
    (b'{"prompts":["a",null],"script":[[2]]}', '"prompts[1]" must be a string, got null'),
    # (A message's content may be null: OpenAI's answers that are only
    # tool calls have it so. Its other strings may not.)
    (b'{"messages":[{"role":null,"content":"x"}],"script":[[2]]}',
     '"messages[0].role" must be a string, got null'),
    (b'{"messages":[{"role":"user","content":"x","name":null}],"script":[[2]]}',
     '"messages[0].name" must be a string, got null'),
    (b'{"prompt":"x","script":[[2]],"max_tokens":0}', '"max_tokens" must be in [1, 2147483647], got 0'),
    (b'{"prompt":"x","script":[[2]],"temperature":1e999}', '"temperature" must be a finite number'),
    (b'{"prompt":"x","script":[[2]],"top_k":1e30}', '"top_k" must be an integer in ['),
    (b'{"prompt":"x","script":[[2]],"max_tokens":"3"}', '"max_tokens" must be an integer, got string "3"'),
    (b'{"prompt":"x","script":[[2,null]]}', '"script[0][1]" must be an integer, got null'),
]


@pytest.mark.parametrize("data,msg", INVALID, ids=[d[:50].decode() for d, _ in INVALID])
def test_wrong_values_are_invalid_request(rt, data, msg):
    with pytest.raises(lmstream.InvalidRequest) as ei:
        submit_raw(rt, data)
    assert_clean(ei, lmstream.InvalidRequest, msg)


def test_runtime_serves_after_rejections(rt):
    for data, _, _ in BAD_JSON:
        with pytest.raises(lmstream.BadJSON):
            submit_raw(rt, data)
    (s,) = submit_raw(rt, b'{"prompt":"x","script":[[2],[3],[4],[4],[5]]}')
    assert s.text() == "Hello"


def test_config_json_is_strict():
    # The binding builds configs from keyword arguments, which cannot
    # repeat a key; the library's own check is tested through ctypes.
    err = runtime_mod._err_buf()
    out = runtime_mod.ctypes.c_uint64()
    for data, code, msg in [
        (b'{"backend":"replay","backend":"replay","vocab":["00"],"eos_id":0}', lmstream.BadJSON.code,
         b'duplicate key "backend"'),
        (b'{"backend":"replay","vocab":["00"],"eos_id":0}]', lmstream.BadJSON.code, b"unexpected data"),
        (b'{"backend":"replay","vocab":["00"],"eos_id":null}', lmstream.InvalidRequest.code,
         b'config field "eos_id" must be an integer, got null'),
    ]:
        rc = runtime_mod.lib.lms_runtime_create(data, out, err, runtime_mod._ERR_SIZE)
        assert rc == code, (data, err.value)
        assert msg in err.value, (data, err.value)


def test_settings_json_is_strict():
    err = runtime_mod._err_buf()
    for data, code, msg in [
        (b'{"gc_percent":100}}', lmstream.BadJSON.code, b"unexpected data"),
        (b'{"gc_percent":100,"gc_percent":100}', lmstream.BadJSON.code, b'duplicate key "gc_percent"'),
        (b'{"threads":null}', lmstream.InvalidRequest.code, b'settings field "threads" must be an integer, got null'),
        (b'{"gc_percent":4294967296}', lmstream.InvalidRequest.code, b'"gc_percent" must be in [-1, 1000000]'),
        (b'{"memory_limit_bytes":0}', lmstream.InvalidRequest.code, b'"memory_limit_bytes" must be in [1, '),
    ]:
        rc = runtime_mod.lib.lms_configure_process(data, err, runtime_mod._ERR_SIZE)
        assert rc == code, (data, err.value)
        assert msg in err.value, (data, err.value)


needs_model = pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model absent (make model)")


@pytest.fixture(scope="module")
def model_rt():
    # A fixed spec_budget skips the start-up calibration.
    with lmstream.Runtime(DEFAULT_MODEL, max_slots=4, context_length=128, spec_budget=8) as r:
        yield r


@needs_model
def test_subnormal_temperature_is_greedy(model_rt):
    """Row 1: temperature=1e-320 wedged the engine; it is now greedy."""
    greedy = model_rt.complete("Hello", max_tokens=4)
    result = {}

    def run():
        result["chunks"] = [model_rt.complete("Hello", max_tokens=4, temperature=t)
                            for t in (1e-320, 1e-310, 2e-308)]

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(120)
    assert not th.is_alive(), "a subnormal temperature wedged the engine"
    for c in result["chunks"]:
        assert list(c.token_ids) == list(greedy.token_ids)


@needs_model
def test_huge_penalty_window_is_rejected(model_rt):
    """Row 2: repeat_last_n 2^40 aborted the process inside lms_submit."""
    for n in (2**40, 2**36):
        with pytest.raises(lmstream.InvalidRequest) as ei:
            model_rt.generate("Hello", repetition_penalty=1.1, repeat_last_n=n)
        assert '"repeat_last_n" must be in [0, 1048576]' in ei.value.message
    s = model_rt.generate("Hello", max_tokens=3, repetition_penalty=1.1, repeat_last_n=1048576)
    assert len(s.text()) > 0
