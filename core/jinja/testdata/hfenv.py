"""The jinja2 environment Hugging Face transformers' apply_chat_template
renders chat templates in, with strftime_now reading a fixed time.

A sandbox that forbids mutating lists and dicts, trim_blocks and
lstrip_blocks, the loopcontrols extension, a {% generation %} tag that
renders its body, a tojson filter that is json.dumps without ASCII
escaping, and the raise_exception and strftime_now globals. The reference
outputs the Go tests compare with (gen_cases.py here, generate.py in
core/chat/testdata) are made in it.
"""

import json

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers marks the
    assistant's tokens with it; rendering, it is its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment(now):
    """The environment, with strftime_now formatting the datetime now."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols],
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
