"""Tool calls and parsed replies through the binding: Chunk.reply and its
value semantics, OpenAI's message and streamed deltas (the shapes
lmstream-serve sends), messages carrying tool_calls, and a real model
(Qwen2.5-Coder 0.5B, whose template renders Hermes-style tools) calling a
tool, streamed, in a loop with the tool's result, and not at all."""
import copy
import json
import os
import pickle

import pytest
from conftest import REPO

import lmstream
from lmstream import Chunk, FinishReason, Reply, ToolCallDelta, Usage
from lmstream.completions import _Shape, _Shaper, _Whole

QWEN = os.path.join(REPO, "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "description": "The city's name"},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]


# ---- values ---------------------------------------------------------------

def test_reply_join_assembles_calls_by_index():
    parts = [Reply("", "think", []),
             Reply("Let me ", "", [ToolCallDelta(0, "call_a", "get_weather", '{"city": ')]),
             None,
             Reply("check.", "", [ToolCallDelta(1, "call_b", "get_time", "{}"),
                                  ToolCallDelta(0, "", "", '"Paris"}')])]
    whole = Reply.join(parts)
    assert whole == Reply("Let me check.", "think", [ToolCallDelta(0, "call_a", "get_weather", '{"city": "Paris"}'),
                                                     ToolCallDelta(1, "call_b", "get_time", "{}")])
    assert Reply.join([]) == Reply("", "", [])
    # An id begins a new call even at an index seen before.
    again = Reply.join([Reply("", "", [ToolCallDelta(0, "call_a", "f", "{}"), ToolCallDelta(0, "call_c", "g", "{}")])])
    assert [t.id for t in again.tool_calls] == ["call_a", "call_c"]


@pytest.mark.parametrize("finished", [False, True])
def test_chunk_reply_is_kept_by_value(finished):
    reply = Reply("Hi", "", [ToolCallDelta(0, "call_1", "get_weather", '{"city": "Paris"}')])
    lps = [lmstream.TokenLogprob(5, -0.5, b"Hi", [])]
    kw = dict(finished=finished, reason=FinishReason.END_ID if finished else FinishReason.NOT_FINISHED,
              usage=Usage(1, 1, 0, 0, 0, 0, 0) if finished else None)
    for logprobs in (None, lps):
        c = Chunk.make([5], "Hi", logprobs=logprobs, reply=reply, **kw)
        assert c.reply == reply and c.logprobs == logprobs and c.token_ids == [5] and c.text == "Hi"
        assert c.finished is finished
        assert pickle.loads(pickle.dumps(c)) == c and copy.deepcopy(c) == c
        assert pickle.loads(pickle.dumps(c)).reply == reply
        d = c.to_dict()
        json.dumps(d)
        assert d["reply"] == {"content": "Hi", "reasoning": "", "tool_calls": [
            {"index": 0, "id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]}
        assert "reply=" in repr(c)
        # The reply takes part in equality.
        assert c != Chunk.make([5], "Hi", logprobs=logprobs, **kw)
        assert c != Chunk.make([5], "Hi", logprobs=logprobs, reply=Reply("Hi", "", []), **kw)
    plain = Chunk.make([5], "Hi", **kw)
    assert plain.reply is None and "reply" not in plain.to_dict()


# ---- OpenAI shapes (from chunks as the library sends them) ---------------

def _answer(reason=FinishReason.END_ID):
    """A streamed answer as the library parses a Hermes call: some content,
    the call's markers in text only, the call in one delta."""
    usage = Usage(10, 6, 1.0, 1.0, 0, 0, 0)
    return [
        Chunk.make([1], "Sure", reply=Reply("Sure", "", [])),
        Chunk.make([2], "<tool_call>", reply=Reply("", "", [])),
        Chunk.make([3], '{"name": "get_weather", "arguments": {"city": "Paris"}}',
                   reply=Reply("", "", [ToolCallDelta(0, "call_x", "get_weather", '{"city": "Paris"}')])),
        Chunk.make([4, 0], "</tool_call>", True, reason, usage, reply=Reply("", "", [])),
    ]


class _Rt:
    config = {"model_path": "/m/x.gguf"}


def test_whole_message_has_tool_calls():
    w = _Whole(_Shape(chat=True), _Rt())
    for c in _answer():
        w.add(c)
    r = w.result()
    choice = r["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Sure", "tool_calls": [
        {"id": "call_x", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    assert choice["finish_reason"] == "tool_calls" and choice["native_finish_reason"] == "end_id"
    # Only calls: content None, as OpenAI sends it; cut at max_tokens: "length".
    w = _Whole(_Shape(chat=True), _Rt())
    for c in _answer(FinishReason.LENGTH)[1:]:
        w.add(c)
    choice = w.result()["choices"][0]
    assert choice["message"]["content"] is None and choice["finish_reason"] == "length"


def test_streamed_deltas_are_openais():
    sh = _Shaper(_Shape(chat=True), _Rt())
    out = sh.first() + [d for c in _answer() for d in sh.of(c)]
    deltas = [d["choices"][0]["delta"] for d in out]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"content": "Sure"},
        {"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]},
        {},
    ]
    assert [d["choices"][0]["finish_reason"] for d in out] == [None] * 4 + ["tool_calls"]
    assert out[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16,
                                "prompt_tokens_details": {"cached_tokens": 0}}


def test_reasoning_is_its_own_field():
    chunks = [Chunk.make([1], "<think>hm", reply=Reply("", "hm", [])),
              Chunk.make([2], "</think>Yes", True, FinishReason.END_ID, Usage(1, 2, 0, 0, 0, 0, 0),
                         reply=Reply("Yes", "", []))]
    sh = _Shaper(_Shape(chat=True), _Rt())
    deltas = [d["choices"][0]["delta"] for c in chunks for d in sh.of(c)]
    assert deltas == [{"reasoning_content": "hm"}, {"content": "Yes"}, {}]
    w = _Whole(_Shape(chat=True), _Rt())
    for c in chunks:
        w.add(c)
    choice = w.result()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Yes", "reasoning_content": "hm"}
    assert choice["finish_reason"] == "stop"


# ---- messages --------------------------------------------------------------

def test_messages_carry_calls_and_results(rt):
    """The replay runtime takes an agent's whole exchange: the assistant
    message as OpenAI returns it (content None, arguments as JSON text, or
    as an object) and the tool's answer."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    obj_call = {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}
    msgs = ASK + [{"role": "assistant", "content": None, "tool_calls": [call, obj_call], "reasoning_content": "hm"},
                  {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C"},
                  {"role": "tool", "tool_call_id": "call_2", "content": "21 C"}]
    assert rt.complete(messages=msgs, script=[[2, 3]]).text == "He"
    from lmstream.runtime import _messages
    sent = _messages(msgs)
    assert sent[1] == {"role": "assistant", "content": "", "reasoning_content": "hm", "tool_calls": [call, obj_call]}
    assert sent[2]["tool_call_id"] == "call_1" and sent[2]["name"] == "get_weather"


def test_chat_fields_need_messages(rt):
    with pytest.raises(lmstream.InvalidRequest, match="tools"):
        rt.generate("p", tools=[WEATHER], script=[[2]])


# ---- a real model ------------------------------------------------------------

@pytest.fixture(scope="module")
def qwen():
    if not os.path.exists(QWEN):
        if os.environ.get("LMSTREAM_REQUIRE_MODELS") == "1":
            pytest.fail(f"model {QWEN} absent and LMSTREAM_REQUIRE_MODELS=1 (make test-models)")
        pytest.skip(f"model {QWEN} absent (make model MODEL=qwen2.5-coder-0.5b)")
    with lmstream.Runtime(model_path=QWEN, context_length=1024, max_slots=2) as rt:
        yield rt


def _one_call(message):
    calls = message["tool_calls"]
    assert len(calls) == 1, message
    call = calls[0]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    args = json.loads(call["function"]["arguments"])
    assert isinstance(args["city"], str) and args["unit"] in ("celsius", "fahrenheit"), args
    return call


def test_required_call(qwen):
    r = qwen.create_chat_completion(ASK, tools=[WEATHER], tool_choice="required", max_tokens=60, temperature=0)
    json.dumps(r)
    choice = r["choices"][0]
    call = _one_call(choice["message"])
    assert "paris" in json.loads(call["function"]["arguments"])["city"].lower()
    assert choice["finish_reason"] == "tool_calls", choice
    # The same answer through the plain call: its chunk's reply is the whole.
    whole = qwen.complete(messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=60, temperature=0)
    assert whole.reply is not None and len(whole.reply.tool_calls) == 1
    t = whole.reply.tool_calls[0]
    assert (t.name, t.arguments) == (call["function"]["name"], call["function"]["arguments"])
    assert t.arguments not in whole.reply.content


def test_required_call_streamed(qwen):
    kw = dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}},
              max_tokens=60, temperature=0)
    chunks = list(qwen.create_chat_completion(ASK, stream=True, **kw))
    json.dumps(chunks)
    calls = {}
    for c in chunks:
        for t in c["choices"][0]["delta"].get("tool_calls", []):
            if "id" in t:
                calls[t["index"]] = {"id": t["id"], "type": t["type"], "function": dict(t["function"])}
            else:
                calls[t["index"]]["function"]["arguments"] += t["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    # The same call as the whole answer's (each request's ids are its own).
    whole = _one_call(qwen.create_chat_completion(ASK, **kw)["choices"][0]["message"])
    assert list(calls) == [0]
    _one_call({"tool_calls": [calls[0]]})
    assert calls[0]["function"] == whole["function"] and calls[0]["id"] != whole["id"]
    # The raw stream: every chunk of a parsed request has a reply, beside
    # its logprobs when asked for.
    stream_chunks = list(qwen.generate(messages=ASK, logprobs=True, **kw))
    assert all(c.reply is not None for c in stream_chunks)
    assert all(len(c.logprobs or []) == len(c.token_ids) for c in stream_chunks)
    assert stream_chunks[-1].finished and stream_chunks[-1].reply is not None
    assert Reply.join(c.reply for c in stream_chunks).tool_calls[0].arguments == calls[0]["function"]["arguments"]


def test_tool_loop(qwen):
    first = qwen.create_chat_completion(ASK, tools=[WEATHER], tool_choice="required", max_tokens=60, temperature=0)
    msg = first["choices"][0]["message"]
    call = _one_call(msg)
    msgs = ASK + [msg, {"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                        "content": json.dumps({"temperature": 18, "unit": "celsius", "sky": "sunny"})}]
    final = qwen.create_chat_completion(msgs, tools=[WEATHER], max_tokens=60, temperature=0)
    choice = final["choices"][0]
    assert not choice["message"].get("tool_calls"), choice
    assert choice["message"]["content"] and "18" in choice["message"]["content"], choice
    assert choice["finish_reason"] in ("stop", "length")


def test_render_chat_shows_the_tools(qwen):
    plain = qwen.render_chat(ASK)
    with_tools = qwen.render_chat(ASK, tools=[WEATHER])
    # Qwen's template lists the tools in its system turn.
    assert "<tools>" in with_tools and '"get_weather"' in with_tools
    assert "<tools>" not in plain and with_tools != plain
    assert qwen.render_chat(ASK, tools=[WEATHER], tool_choice="none") == plain
    # The prompt the request is given, token for token.
    r = qwen.complete(messages=ASK, tools=[WEATHER], max_tokens=1)
    assert r.usage.prompt_tokens == qwen.count_tokens(with_tools)
    with pytest.raises(lmstream.InvalidRequest, match="tools"):
        qwen.render_chat(ASK, tools=[{"type": "function", "function": {"description": "no name"}}])
    with pytest.raises(lmstream.InvalidType, match="tools"):
        qwen.render_chat(ASK, tools="get_weather")
    with pytest.raises(lmstream.InvalidType, match="chat_template_kwargs"):
        qwen.render_chat(ASK, chat_template_kwargs=["enable_thinking"])


def test_render_chat_template_kwargs():
    if not os.path.exists(QWEN):
        pytest.skip(f"model {QWEN} absent")
    tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}|{{ greeting | default('none') }}"
    with lmstream.Runtime(model_path=QWEN, context_length=256, max_slots=1, chat_template=tmpl) as rt:
        assert rt.render_chat([{"role": "user", "content": "Hi"}]) == "Hi|none"
        assert rt.render_chat([{"role": "user", "content": "Hi"}],
                              chat_template_kwargs={"greeting": "hello"}) == "Hi|hello"


def test_tool_choice_none(qwen):
    r = qwen.create_chat_completion(ASK, tools=[WEATHER], tool_choice="none", max_tokens=20, temperature=0)
    message = r["choices"][0]["message"]
    assert "tool_calls" not in message and message["content"]
    assert r["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.parametrize("tools", [
    [{"type": "function", "function": {"description": "no name"}}],
    [{"type": "retrieval"}],
    [{"type": "function", "function": {"name": "f", "parameters": "not a schema"}}],
    [WEATHER, WEATHER],
])
def test_bad_tools_are_invalid_requests(qwen, tools):
    with pytest.raises(lmstream.InvalidRequest) as ei:
        qwen.create_chat_completion(ASK, tools=tools, max_tokens=4)
    assert "tools" in str(ei.value)


def test_tool_choice_must_name_a_tool(qwen):
    with pytest.raises(lmstream.InvalidRequest, match="nope"):
        qwen.create_chat_completion(ASK, tools=[WEATHER], tool_choice={"type": "function",
                                                                       "function": {"name": "nope"}})
