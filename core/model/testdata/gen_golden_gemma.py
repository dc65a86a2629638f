#!/usr/bin/env python3
"""Golden numbers for Gemma 3 270M (Q4_K_M), from llama.cpp.

Run BY HAND (not in CI) when the model, the prompts or the passage change:

    python3 -m venv /tmp/llvenv
    CMAKE_ARGS="-DGGML_NATIVE=ON" /tmp/llvenv/bin/pip install jinja2 llama-cpp-python==0.3.36
    /tmp/llvenv/bin/python core/model/testdata/gen_golden_gemma.py \\
        models/gemma-3-270m-q4_k_m.gguf > core/model/testdata/golden_gemma3-270m.json

The oracle is llama.cpp through
llama-cpp-python, which builds llama.cpp from source; 2 threads, CPU.
real_gemma_test.go reads the output and checks Forward against it:

- "logits": for a few prompts (prose, a chat turn, code, and the passage
  repeated past the 512-token sliding window so that the local layers'
  window is exercised), the prompt is tokenized by llama.cpp (special
  tokens parsed, BOS prepended: Gemma's add_bos_token is true), evaluated
  in one batch with every logit kept, and the top 5 ids with their raw
  logits are recorded at a few positions.
- "greedy": short questions, rendered in Gemma's chat format (this GGUF
  ships no tokenizer.chat_template; GEMMA_TEMPLATE is Gemma 3's published
  one, rendered with jinja2 the way transformers' apply_chat_template does),
  prefilled in one batch, then decoded greedily one token per evaluation
  (as the Go test does), up to N_GREEDY tokens or an end-of-generation
  token. Each step also records the margin between the chosen token's
  logit and the runner-up's, so a near-tie that flips is recognisable.
  (The answers echo the question: this file behaves like the pretrained
  model, not the instruction-tuned one; they are compared all the same.)
- "perplexity": llama.cpp's perplexity on BOS and the first tokens of
  testdata/passage.txt (PPL_TOKENS in all), in one batch, for comparison
  with ours. A prefix, not the whole passage, keeps the Go test short on
  the portable kernels.
"""
import json
import sys
from pathlib import Path

import numpy as np
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import Llama, __version__ as llama_cpp_version

HERE = Path(__file__).resolve().parent

PASSAGE = (HERE / "passage.txt").read_text(encoding="utf-8")
LOGIT_PROMPTS = [
    "The quick brown fox jumps over the lazy dog. In 2024, about 8,100 million people lived on Earth, and",
    "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    # Past the sliding window (512): the passage twice over.
    (PASSAGE + "\n\n") * 2,
]

GREEDY_QUESTIONS = [
    "What is the capital of France?",
    "Write a Python function that returns the factorial of n.",
    "Name three primary colors.",
]

# Gemma 3's chat template (instruction-tuned models), text-only part.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)
N_GREEDY = 24
PPL_TOKENS = 128


def render_chat(template, messages):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token="<bos>")


def main():
    path = sys.argv[1]
    llm = Llama(model_path=path, n_ctx=4096, n_batch=4096, n_ubatch=4096, logits_all=True,
                n_threads=2, verbose=False)
    out = {"model": path.split("/")[-1],
           "oracle": f"llama.cpp via llama-cpp-python {llama_cpp_version}",
           "logits": [], "greedy": []}

    def tokenize(text, bos=False):
        return llm.tokenize(text.encode(), add_bos=bos, special=True)

    for text in LOGIT_PROMPTS:
        toks = tokenize(text, bos=True)
        if len(toks) > 512:
            assert len(toks) > 640, len(toks)
        llm.reset()
        llm.eval(toks)
        logits = np.array(llm.scores[: len(toks)], dtype=np.float32)
        n = len(toks)
        rows = []
        for p in sorted({0, n // 3, (2 * n) // 3, n - 1} | ({520, 600} if n > 640 else set())):
            top = np.argsort(-logits[p], kind="stable")[:5]
            rows.append({"pos": p,
                         "top5": [int(i) for i in top],
                         "logits": [round(float(logits[p][i]), 4) for i in top]})
        out["logits"].append({"text": text, "tokens": [int(t) for t in toks], "positions": rows})

    template = GEMMA_TEMPLATE
    eog = {llm.token_eos(), *(int(t) for t in tokenize("<end_of_turn>"))}
    for q in GREEDY_QUESTIONS:
        prompt = render_chat(template, [{"role": "user", "content": q}])
        toks = tokenize(prompt)
        llm.reset()
        llm.eval(toks)
        gen, margins = [], []
        while len(gen) < N_GREEDY:
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            a, b = np.argsort(-row, kind="stable")[:2]
            gen.append(int(a))
            margins.append(round(float(row[a] - row[b]), 4))
            if int(a) in eog:
                break
            llm.eval([int(a)])
        out["greedy"].append({"question": q, "prompt": prompt, "tokens": [int(t) for t in toks],
                              "answer": gen, "margins": margins,
                              "text": llm.detokenize([t for t in gen if t not in eog]).decode("utf-8", "replace")})

    toks = llm.tokenize(PASSAGE.encode(), add_bos=True, special=False)[:PPL_TOKENS]
    llm.reset()
    llm.eval(toks)
    scores = np.array(llm.scores[: len(toks)], dtype=np.float64)
    mx = scores.max(axis=1, keepdims=True)
    logz = (mx[:, 0] + np.log(np.exp(scores - mx).sum(axis=1)))
    nll = -sum(scores[i, toks[i + 1]] - logz[i] for i in range(len(toks) - 1))
    out["perplexity"] = {"tokens": len(toks), "value": round(float(np.exp(nll / (len(toks) - 1))), 4)}

    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
