"""Generation with the real default model on the CPU backend: streaming
gives exactly the text the non-streaming call gives, sampled and greedy."""
import asyncio
import os

import pytest
from conftest import DEFAULT_MODEL

import lmstream

MODEL = os.environ.get("LMSTREAM_MODEL", DEFAULT_MODEL)
PROMPT = [{"role": "user", "content": "Write two sentences about the sea."}]


@pytest.fixture(scope="module")
def model_rt():
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    rt = lmstream.Runtime(model_path=MODEL)
    with rt:
        yield rt


@pytest.mark.parametrize("sampling", [dict(temperature=0.8, seed=42), dict(temperature=0)],
                         ids=["t0.8-seed42", "greedy"])
def test_stream_equals_complete(model_rt, sampling):
    s = model_rt.generate(messages=PROMPT, max_tokens=48, **sampling)
    chunks = list(s)
    text = "".join(c.text for c in chunks)
    ids = [t for c in chunks for t in c.token_ids]
    whole = model_rt.complete(messages=PROMPT, max_tokens=48, **sampling)
    assert text == whole.text
    assert ids == whole.token_ids
    assert text.strip()
    assert chunks[-1].finished and chunks[-1].reason in (lmstream.FinishReason.END_ID,
                                                         lmstream.FinishReason.LENGTH)
    assert chunks[-1].usage.generated_tokens == len(ids) and chunks[-1].usage.prompt_tokens > 0


def test_async_stream_equals_complete(model_rt):
    async def collect():
        return await model_rt.generate("The capital of France is", max_tokens=16,
                                       temperature=0).atext()

    assert asyncio.run(collect()) == model_rt.complete("The capital of France is",
                                                       max_tokens=16, temperature=0).text


def test_cancel_frees_the_slot(model_rt):
    from conftest import wait_idle
    s = model_rt.generate("Count to one thousand:", max_tokens=2000)
    for i, _ in enumerate(s):
        if i == 3:
            break
    wait_idle(model_rt, timeout=5)
