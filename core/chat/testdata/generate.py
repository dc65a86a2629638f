#!/usr/bin/env python3
"""Render the chat-template corpus with Python's jinja2 as the reference.

Every template in templates/ is rendered for every scenario in
scenarios.json in the environment Hugging Face transformers'
apply_chat_template builds (core/jinja/testdata/hfenv.py). strftime_now
reads the fixed time in scenarios.json, so the outputs do not depend on
the day they were made.

The outputs (or the error jinja2 raised) go to expected/<template>.json,
which the Go tests compare against byte for byte. CI does not run this:
regenerate after changing a template or a scenario with

    python3 -m venv /tmp/jinja-venv && /tmp/jinja-venv/bin/pip install jinja2==3.1.6
    /tmp/jinja-venv/bin/python core/chat/testdata/generate.py
"""

import datetime
import json
import os
import sys

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "jinja", "testdata"))
import hfenv  # noqa: E402  (apply_chat_template's environment)

# The BOS and EOS texts a model of each family's tokenizer has; the first
# name fragment that matches a template's file name wins. They only need to
# be plausible: the Go test reads them from the expected files.
SPECIAL_TOKENS = [
    ("Llama-3", "<|begin_of_text|>", "<|eot_id|>"),
    ("llama-3", "<|begin_of_text|>", "<|eot_id|>"),
    ("Hermes", "<|begin_of_text|>", "<|eot_id|>"),
    ("functionary", "<|begin_of_text|>", "<|eot_id|>"),
    ("Qwen", "", "<|im_end|>"),
    ("gemma", "<bos>", "<eos>"),
    ("deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("granite", "", "<|end_of_text|>"),
    ("Phi-3", "<s>", "<|endoftext|>"),
    ("GLM", "[gMASK]<sop>", "<|endoftext|>"),
    ("SmolLM3", "", "<|im_end|>"),
    ("gpt-oss", "<|startoftext|>", "<|return|>"),
]


def special_tokens(name):
    for fragment, bos, eos in SPECIAL_TOKENS:
        if fragment in name:
            return bos, eos
    return "<s>", "</s>"


def main():
    with open(os.path.join(HERE, "scenarios.json"), encoding="utf-8") as f:
        spec = json.load(f)
    now = datetime.datetime.fromisoformat(spec["now"])
    env = hfenv.environment(now)
    outdir = os.path.join(HERE, "expected")
    os.makedirs(outdir, exist_ok=True)
    names = sorted(n for n in os.listdir(os.path.join(HERE, "templates")) if n.endswith(".jinja"))
    summary = {"rendered": 0, "raised": 0, "error": 0, "unparsable": 0}
    for name in names:
        with open(os.path.join(HERE, "templates", name), encoding="utf-8") as f:
            text = f.read()
        bos, eos = special_tokens(name)
        record = {"template": name, "bos_token": bos, "eos_token": eos, "jinja2": jinja2.__version__, "results": []}
        try:
            tmpl = env.from_string(text)
        except jinja2.exceptions.TemplateSyntaxError as e:
            tmpl = None
            record["parse_error"] = str(e)
            summary["unparsable"] += 1
        for sc in spec["scenarios"] if tmpl is not None else []:
            ctx = {
                "messages": sc["messages"],
                "tools": spec["tools"] if sc.get("tools") else None,
                "documents": None,
                "add_generation_prompt": sc["add_generation_prompt"],
                "bos_token": bos,
                "eos_token": eos,
            }
            ctx.update(sc.get("vars", {}))
            result = {"scenario": sc["name"]}
            try:
                result["output"] = tmpl.render(**ctx)
                summary["rendered"] += 1
            except jinja2.exceptions.TemplateError as e:
                # raise_exception's own class: the template rejected the
                # conversation (its subclasses are jinja2's own errors).
                if type(e) is jinja2.exceptions.TemplateError:
                    result["raised"] = str(e)
                    summary["raised"] += 1
                else:
                    result["error"] = "%s: %s" % (type(e).__name__, e)
                    summary["error"] += 1
            except Exception as e:  # TypeError, KeyError, ... from Python itself
                result["error"] = "%s: %s" % (type(e).__name__, e)
                summary["error"] += 1
            record["results"].append(result)
        with open(os.path.join(outdir, name[: -len(".jinja")] + ".json"), "w", encoding="utf-8") as f:
            json.dump(record, f, ensure_ascii=False, indent=1)
            f.write("\n")
    print("%d templates: %s" % (len(names), summary), file=sys.stderr)


if __name__ == "__main__":
    main()
