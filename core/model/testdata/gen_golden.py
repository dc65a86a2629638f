#!/usr/bin/env python3
"""Golden top-5 logits of the default model, from llama.cpp.

Run BY HAND (not in CI) when the model or the prompts change:

    python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install llama-cpp-python
    /tmp/llvenv/bin/python core/model/testdata/gen_golden.py \
        models/SmolLM2-135M-Instruct.Q4_1.gguf > core/model/testdata/golden_top5.json

The oracle is llama.cpp through llama-cpp-python (which builds llama.cpp from
source). Each prompt is tokenized by llama.cpp (special tokens parsed, no
BOS: the model's add_bos_token is false), evaluated in one batch with the
logits of every position kept, and the top 5 token ids with their raw logits
are recorded at a few positions. The Go test (golden_test.go) feeds the same
token ids to Forward and compares.
"""
import json
import sys

import numpy as np
from llama_cpp import Llama

PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWrite one sentence about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "In 1969, Neil Armstrong became the first person to walk on the Moon. "
    "The mission, Apollo 11, was launched from Florida and",
]


def main():
    path = sys.argv[1]
    llm = Llama(model_path=path, n_ctx=256, n_batch=256, logits_all=True,
                n_threads=2, verbose=False)
    out = {"model": path.split("/")[-1],
           "oracle": "llama.cpp via llama-cpp-python",
           "prompts": []}
    for text in PROMPTS:
        toks = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(toks)
        logits = np.array(llm.scores[: len(toks)], dtype=np.float32)
        n = len(toks)
        positions = sorted({0, n // 3, (2 * n) // 3, n - 1})
        rows = []
        for p in positions:
            top = np.argsort(-logits[p], kind="stable")[:5]
            rows.append({"pos": p,
                         "top5": [int(i) for i in top],
                         "logits": [round(float(logits[p][i]), 4) for i in top]})
        out["prompts"].append({"text": text, "tokens": [int(t) for t in toks],
                               "positions": rows})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
