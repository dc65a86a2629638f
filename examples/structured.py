# Structured output (README, "Structured output"): the answer follows a JSON
# schema or a GBNF grammar; run from the repository root.
import json

import lmstream

schema = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "age": {"type": "integer"},
                         "role": {"enum": ["admin", "user", "guest"]}},
          "required": ["name", "age", "role"]}
ask = [{"role": "user", "content": "Describe a user of a web site as JSON."}]
with lmstream.Runtime(model_path="models/SmolLM2-135M-Instruct.Q4_1.gguf") as rt:
    r = rt.create_chat_completion(ask, max_tokens=100, response_format={
        "type": "json_schema", "json_schema": {"name": "user", "schema": schema}})
    print(json.loads(r["choices"][0]["message"]["content"]))  # a dict that validates
    # Or any grammar in llama.cpp's GBNF:
    yes_no = 'root ::= ("yes" | "no") "."'
    print(rt.generate(messages=[{"role": "user", "content": "Is the sky green?"}],
                      grammar=yes_no).text())
