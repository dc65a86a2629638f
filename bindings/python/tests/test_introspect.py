"""Introspection on the default model: tokenize / count / detokenize, the
model's metadata, chat rendering (and that generate(messages=...) is fed
exactly that), the chat_template override, and invalid UTF-8 refused as
BadJSON before anything runs."""
import os
import subprocess
import sys

import pytest
from conftest import DEFAULT_MODEL, EOS, PKG_ROOT, VOCAB

import lmstream

MODEL = os.environ.get("LMSTREAM_MODEL", DEFAULT_MODEL)


@pytest.fixture(scope="module")
def model_rt():
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    with lmstream.Runtime(model_path=MODEL, context_length=512, max_slots=2) as rt:
        yield rt


def test_tokenize_round_trip(model_rt):
    for text in ["Hello, world!", "café naïve 中文 😀\n\tend", "<|im_start|>user\nHi<|im_end|>"]:
        ids = model_rt.tokenize(text)
        assert ids and all(isinstance(i, int) for i in ids)
        assert model_rt.detokenize(ids) == text
        assert model_rt.count_tokens(text) == len(ids)
    assert model_rt.tokenize("<|im_start|>") == [1]
    assert len(model_rt.tokenize("<|im_start|>", parse_special=False)) > 1
    assert model_rt.detokenize([1, 19556], skip_special=True) == "Hello"
    assert model_rt.tokenize(b"Hello") == model_rt.tokenize("Hello")
    assert model_rt.tokenize("") == [] and model_rt.count_tokens("") == 0


def test_detokenize_bytes_and_errors(model_rt):
    # "中" is three bytes; its tokens may split it, detokenize_bytes keeps
    # the raw bytes and detokenize the text.
    ids = model_rt.tokenize("中")
    assert model_rt.detokenize_bytes(ids) == "中".encode()
    with pytest.raises(lmstream.InvalidArgument, match="index 1"):
        model_rt.detokenize([5, 49152])
    with pytest.raises(lmstream.InvalidRequest):
        model_rt.detokenize([-1])
    with pytest.raises(lmstream.InvalidType):
        model_rt.tokenize(3)


def test_count_matches_prompt_tokens(model_rt):
    prompt = "The capital of Japan is"
    c = model_rt.complete(prompt, max_tokens=1)
    assert c.usage.prompt_tokens == model_rt.count_tokens(prompt)


def test_model_info(model_rt):
    info = model_rt.model_info()
    assert info["architecture"] == "llama"
    assert info["context_length"] == 8192
    assert info["runtime_context_length"] == 512
    assert info["vocab_size"] == 49152
    assert info["bos"] == {"id": 1, "text": "<|im_start|>", "end_of_generation": False}
    assert info["eos"] == {"id": 2, "text": "<|im_end|>", "end_of_generation": True}
    assert {"id": 0, "text": "<|endoftext|>", "end_of_generation": True} in info["special_tokens"]
    assert "<|im_start|>" in info["chat_template"]
    assert info["chat_renderer"] == "jinja"


def test_render_chat_is_what_messages_feed(model_rt):
    msgs = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    text = model_rt.render_chat(msgs)
    assert text == ("<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n")
    assert not model_rt.render_chat(msgs, add_generation_prompt=False).endswith("assistant\n")
    # generate(messages=...) tokenizes exactly that text: same prompt
    # tokens, same greedy answer as sending the rendered text raw.
    by_msgs = model_rt.complete(messages=msgs, max_tokens=8)
    by_text = model_rt.complete(text, max_tokens=8)
    assert by_msgs.usage.prompt_tokens == model_rt.count_tokens(text)
    assert by_msgs.token_ids == by_text.token_ids


def test_prompt_is_raw(model_rt):
    # A plain prompt is not templated: it is exactly its own tokens.
    c = model_rt.complete("Hi", max_tokens=1)
    assert c.usage.prompt_tokens == len(model_rt.tokenize("Hi"))


def test_chat_template_override():
    if not os.path.exists(MODEL):
        pytest.skip("model absent")
    tmpl = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    with lmstream.Runtime(model_path=MODEL, context_length=256, max_slots=1, chat_template=tmpl) as rt:
        assert rt.model_info()["chat_template"] == tmpl
        assert rt.render_chat([{"role": "user", "content": "Hi"}]) == "[user] Hi\n"
    with pytest.raises(lmstream.InvalidRequest, match="chat_template"):
        lmstream.Runtime(model_path=MODEL, chat_template="{% for %}")


def test_replay_has_no_tokenizer():
    with lmstream.Runtime.replay(vocab=VOCAB, eos_id=EOS) as rt:
        with pytest.raises(lmstream.StateError):
            rt.count_tokens("x")
        with pytest.raises(lmstream.StateError):
            rt.model_info()


def test_invalid_utf8_is_bad_json(rt):
    # A str carrying bytes that were not UTF-8 (sys.argv's surrogateescape)
    # reaches the library as those bytes, which refuses them by offset.
    with pytest.raises(lmstream.BadJSON, match=r"at byte 14: invalid UTF-8 byte 0xe9"):
        rt.generate("caf\udce9", script=[])
    with pytest.raises(lmstream.BadJSON, match="invalid UTF-8 byte 0xed"):
        rt.generate("lone \ud800", script=[])
    with pytest.raises(lmstream.BadJSON, match="invalid UTF-8"):
        rt.generate(messages=[{"role": "user", "content": "caf\udce9"}], script=[])
    assert lmstream.runtime.invalid_utf8("café") is None
    assert lmstream.runtime.invalid_utf8("caf\udce9") == "invalid UTF-8 byte 0xe9 at byte 3"


def test_cli_refuses_invalid_utf8_before_loading(tmp_path):
    # The model path does not exist: a message about UTF-8 rather than a
    # missing model proves the check runs before loading.
    env = dict(os.environ, PYTHONPATH=PKG_ROOT)
    p = subprocess.run([sys.executable.encode(), b"-m", b"lmstream", b"--model",
                        str(tmp_path / "none.gguf").encode(), b"caf\xe9"],
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 2
    assert b"not valid UTF-8: invalid UTF-8 byte 0xe9 at byte 3" in p.stderr
    p = subprocess.run([sys.executable, "-m", "lmstream", "--model", str(tmp_path / "none.gguf")],
                       input=b"ab\xff", capture_output=True, env=env, timeout=60)
    assert p.returncode == 2 and b"invalid UTF-8 byte 0xff at byte 2" in p.stderr
    assert "chat template" in subprocess.run([sys.executable, "-m", "lmstream", "--help"], env=env,
                                             capture_output=True, text=True, timeout=60).stdout
