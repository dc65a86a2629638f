"""Structured output with the real default model: every constrained
request's output parses and validates against its schema (checked with the
jsonschema package, independent of the library's converter), in streams
and whole answers, greedy and sampled, plain and speculative; bad schemas
and grammars are refused at submit naming the construct."""
import json
import os
import re

import pytest
from conftest import DEFAULT_MODEL

import lmstream

jsonschema = pytest.importorskip("jsonschema")

MODEL = os.environ.get("LMSTREAM_MODEL", DEFAULT_MODEL)
ASK = [{"role": "user", "content": "Describe a user of a web site as JSON."}]

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "height": {"type": "number"},
        "role": {"enum": ["admin", "user", "guest"]},
        "active": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20},
                           "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["city", "zip"],
        },
        "nickname": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}]},
    },
    "required": ["name", "age", "role", "active", "address"],
}

SCHEMAS = {
    "person": PERSON,
    "list": {"type": "array", "items": {"type": "object",
                                        "properties": {"id": {"type": "integer"},
                                                       "ok": {"type": "boolean"}},
                                        "required": ["id", "ok"]},
             "minItems": 1, "maxItems": 3},
    "enum": {"enum": ["red", "green", "blue"]},
    "number": {"type": "number"},
    "nullable": {"type": ["string", "null"], "maxLength": 16},
}


@pytest.fixture(scope="module")
def model_rt():
    if not os.path.exists(MODEL):
        pytest.skip(f"model {MODEL} absent (run `make model`)")
    with lmstream.Runtime(model_path=MODEL) as rt:
        yield rt


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "s", "strict": True, "schema": schema}}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("sampling", [dict(temperature=0, speculate=False), dict(temperature=0),
                                      dict(temperature=0.9, seed=5)],
                         ids=["greedy", "greedy-spec", "sampled"])
def test_output_validates(model_rt, name, sampling):
    schema = SCHEMAS[name]
    s = model_rt.generate(messages=ASK, max_tokens=300, response_format=schema_format(schema), **sampling)
    chunks = list(s)
    text = "".join(c.text for c in chunks)
    # The stream contract is unchanged: one terminal chunk, last.
    assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].reason == lmstream.FinishReason.END_ID, text
    jsonschema.validate(json.loads(text), schema)


def test_json_object_and_grammar(model_rt):
    w = model_rt.complete(prompt="A JSON object:", max_tokens=200, response_format={"type": "json_object"})
    assert isinstance(json.loads(w.text), dict)
    g = 'root ::= ("yes" | "no") ", because " [a-z ]{1,30} "."'
    w = model_rt.complete(prompt="Is the sea blue?", max_tokens=40, grammar=g)
    assert re.fullmatch(r"(yes|no), because [a-z ]{1,30}\.", w.text), w.text


def test_stream_equals_complete(model_rt):
    rf = schema_format(PERSON)
    text = "".join(c.text for c in model_rt.generate(messages=ASK, max_tokens=300, response_format=rf))
    assert text == model_rt.complete(messages=ASK, max_tokens=300, response_format=rf).text


@pytest.mark.parametrize("fields,needle", [
    (dict(grammar="root ::= missing"), 'rule "missing" is used but never defined'),
    (dict(response_format=schema_format({"type": "object", "patternProperties": {}})),
     'keyword "patternProperties" is not supported'),
    (dict(response_format=schema_format({"type": "string", "format": "email"})), 'format "email"'),
    (dict(response_format={"type": "yaml"}), 'type must be "text", "json_object" or "json_schema"'),
    # A class that matches no character (a pattern's class of what JSON
    # must escape, which the converter leaves out), and a byte the default
    # model's vocabulary has no token for: refused here, not by a stream
    # that no token can continue.
    (dict(response_format=schema_format({"type": "string", "pattern": '["]'})), "matches no character"),
    (dict(grammar="root ::= [^\\x00-\\U0010FFFF]"), "matches no character"),
    (dict(grammar="root ::= [\\x04]+"), "cannot be written with this model's tokens"),
])
def test_refused_at_submit(model_rt, fields, needle):
    with pytest.raises(lmstream.InvalidRequest) as e:
        model_rt.generate(prompt="x", **fields)
    assert needle in str(e.value)


def test_ambiguous_schema_is_followed_to_the_end(model_rt):
    """Alternatives sharing a prefix, each opening many ways after it, keep
    more parses alive than the matcher follows; it follows the first ones,
    so the answer goes on past the prefix and ends valid (it used to die
    right after "x")."""
    schema = {"anyOf": [{"type": "string", "pattern": "^x(a?){200}%s$" % c} for c in "bcd"]}
    w = model_rt.complete(messages=[{"role": "user", "content": "Write x, some a letters, then b."}],
                          max_tokens=300, temperature=0, response_format=schema_format(schema))
    assert w.reason == lmstream.FinishReason.END_ID, w.text
    jsonschema.validate(json.loads(w.text), schema)
