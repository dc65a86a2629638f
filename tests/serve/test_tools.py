"""Tool calling against lmstream-serve as agents use it: the `openai`
client's tool loop on Qwen2.5-Coder, whose chat template shows tools in
the Hermes format (<tool_call>{"name", "arguments"}</tool_call>).

The constrained tests run on Qwen2.5-Coder-0.5B (LMSTREAM_TOOL_MODEL); the
loops that need the model to read a tool's result and answer from it run on
the 1.5B (LMSTREAM_TOOL_MODEL_LARGE): the 0.5B calls the tool again.
"""
import asyncio
import json
import os
import random

import jsonschema
import pytest
from test_serve import ROOT, Server

TOOL_MODEL = os.environ.get("LMSTREAM_TOOL_MODEL",
                            os.path.join(ROOT, "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
TOOL_MODEL_LARGE = os.environ.get("LMSTREAM_TOOL_MODEL_LARGE",
                                  os.path.join(ROOT, "models", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
TOOLS = [WEATHER, ADD]


def start(model):
    if not os.path.exists(model):
        if os.environ.get("LMSTREAM_REQUIRE_MODELS"):
            pytest.fail(f"{model} is missing (make test-models)")
        pytest.skip(f"{model} is missing (make test-models)")
    return Server(["--model", model, "--ctx", "2048", "--slots", "2"])


@pytest.fixture(scope="module")
def server():
    srv = start(TOOL_MODEL)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def large():
    srv = start(TOOL_MODEL_LARGE)
    yield srv
    srv.stop()


SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def valid_call(call):
    """The call names one of TOOLS and its arguments validate against the
    tool's schema (jsonschema, apart from the grammar's converter)."""
    assert call.type == "function" and call.id.startswith("call_"), call
    assert call.function.name in SCHEMAS, call.function.name
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return args


def test_tool_loop_call_result_answer(large):
    """The openai client's loop: the model calls get_weather, the caller
    runs it and sends the result back with the call as the client returned
    it, and the model answers in words (tool_choice "none" for the final
    turn: with "auto" this model calls the tool again, in llama.cpp too,
    which gives the same tokens)."""
    client = large.client()
    messages = [{"role": "user", "content": "What is the weather like in Paris today? Use celsius."}]
    first = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS,
                                           temperature=0, max_tokens=80)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert valid_call(call)["city"] == "Paris"

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id,
                     "content": json.dumps({"city": "Paris", "temperature": 18, "unit": "celsius", "sky": "sunny"})})
    final = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS, tool_choice="none",
                                           temperature=0, max_tokens=60)
    answer = final.choices[0]
    assert answer.finish_reason == "stop", answer
    assert not answer.message.tool_calls
    assert "18" in answer.message.content and "Paris" in answer.message.content, answer.message.content


def test_agents_sdk_runs_a_two_tool_task(large):
    """The OpenAI Agents SDK's runner against the server: the agent calls
    both tools with the right arguments, the SDK runs them, and the run
    ends within its turn limit."""
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    ran = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        ran.append(("get_weather", city))
        return f"Sunny, 18 degrees Celsius in {city}."

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(("add", a, b))
        return a + b

    client = AsyncOpenAI(base_url=large.url + "/v1", api_key="unused", max_retries=0)
    agent = Agent(name="assistant", instructions="You are a helpful assistant. Use the tools.",
                  tools=[get_weather, add], model=OpenAIChatCompletionsModel(model="qwen", openai_client=client),
                  model_settings=ModelSettings(temperature=0, max_tokens=120))
    result = asyncio.run(Runner.run(agent, "What is the weather in Paris, and what is 17 plus 25?", max_turns=6))
    assert ("get_weather", "Paris") in ran, ran
    assert ("add", 17, 25) in ran, ran
    assert isinstance(result.final_output, str)


def test_tool_call_streams_as_openai_deltas(server):
    """Streamed, the call arrives as OpenAI streams it: a delta with the
    index, id, type and name, then the arguments; finish_reason
    tool_calls. What the deltas assemble equals the whole answer's call."""
    client = server.client()
    messages = [{"role": "user", "content": "What is 17 plus 25?"}]
    whole = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS,
                                           tool_choice="required", temperature=0, max_tokens=80)
    stream = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS,
                                            tool_choice="required", temperature=0, max_tokens=80, stream=True)
    calls, reasons, content = {}, [], ""
    for chunk in stream:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
                if d.id:
                    assert c["id"] is None, "an id arrives once, on the call's first delta"
                    c["id"], c["name"] = d.id, d.function.name
                    assert d.type == "function"
                c["arguments"] += d.function.arguments or ""
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    assert reasons == ["tool_calls"]
    assert content == ""
    (w,) = whole.choices[0].message.tool_calls
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == \
        [(w.function.name, json.loads(w.function.arguments))]
    assert json.loads(w.function.arguments) == {"a": 17, "b": 25}


def test_required_calls_always_parse_and_follow_the_schema(server):
    """tool_choice "required" constrains the answer: over varied prompts
    (some asking for neither tool), every answer is calls that parse and
    whose arguments validate against the schema, at temperature 0 and
    sampling alike, with parallel calls and without."""
    rng = random.Random(7)
    cities = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Quito", "Perth", "Hanoi", "Bern", "Accra"]
    prompts = []
    for i in range(50):
        kind = i % 5
        if kind == 0:
            prompts.append(f"How warm is it in {rng.choice(cities)}?")
        elif kind == 1:
            prompts.append(f"Add {rng.randint(-999, 999)} and {rng.randint(0, 99999)}.")
        elif kind == 2:
            prompts.append(f"Weather in {rng.choice(cities)} in fahrenheit please")
        elif kind == 3:
            prompts.append(f"what's {rng.randint(1, 50)} + {rng.randint(1, 50)}")
        else:
            prompts.append(rng.choice(["Tell me a joke.", "Hi!", "Write a haiku about rain.", "Who are you?"]))
    client = server.client()
    for i, p in enumerate(prompts):
        # One call per answer for most; parallel calls for every third,
        # which the model may repeat until max_tokens cuts the last.
        parallel = i % 3 == 0
        r = client.chat.completions.create(
            model="qwen", messages=[{"role": "user", "content": p}], tools=TOOLS, tool_choice="required",
            parallel_tool_calls=parallel, max_tokens=120, temperature=0 if i % 2 == 0 else 0.8, seed=i)
        choice = r.choices[0]
        if parallel:
            assert choice.finish_reason in ("tool_calls", "length"), (p, choice)
            assert choice.message.tool_calls, (p, choice)
        else:
            assert choice.finish_reason == "tool_calls", (p, choice)
            assert len(choice.message.tool_calls) == 1, (p, choice)
        for call in choice.message.tool_calls:
            valid_call(call)


def test_named_function_and_none(server):
    client = server.client()
    messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
    named = client.chat.completions.create(
        model="qwen", messages=messages, tools=TOOLS, temperature=0, max_tokens=80,
        tool_choice={"type": "function", "function": {"name": "add"}})
    (call,) = named.choices[0].message.tool_calls
    assert call.function.name == "add"
    valid_call(call)
    plain = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS, tool_choice="none",
                                           temperature=0, max_tokens=30)
    assert not plain.choices[0].message.tool_calls
    assert plain.choices[0].message.content


def test_bad_tools_are_400(server):
    import openai
    client = server.client()
    for kw, needle in [
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "name"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
        ({"tool_choice": "required"}, "no \"tools\""),
        ({"tools": [{"type": "retrieval"}]}, "function"),
    ]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="qwen", messages=[{"role": "user", "content": "hi"}],
                                           max_tokens=5, **kw)
        assert needle in str(e.value), (kw, str(e.value))
