"""The Go pre-tokenizer scanners against the regexes they hand-implement.

Go's regexp has no lookahead, so core/tokenizer replaces each pre-tokenizer
regex with a scanner. Python's `regex` module runs the original patterns
(lookahead, \\p classes, scoped (?i:...)), which makes it an independent
oracle for all four pre-tokenizers, including Llama-3 and Qwen2 whose
vocabularies are not available here. Inputs: every corpus line, the whole
corpus, and a few thousand random strings drawn from an alphabet of the
characters the scanners treat specially. No model file is needed.
"""

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

regex = pytest.importorskip("regex", reason="pip install regex")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).with_name("corpus.txt")

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")


def split_regex(pattern, text):
    return [m.group(0) for m in regex.finditer(pattern, text)]


def split_smollm(text):
    # Digits(individual_digits=True) isolates every \p{N}; the byte-level
    # regex then runs inside each remaining piece on its own.
    out = []
    for part in regex.split(r"(\p{N})", text):
        if part:
            out.extend(split_regex(GPT2, part))
    return out


ORACLES = {
    "gpt-2": lambda t: split_regex(GPT2, t),
    "smollm": split_smollm,
    "llama-bpe": lambda t: split_regex(LLAMA3, t),
    "qwen2": lambda t: split_regex(QWEN2, t),
}

# Characters that change which alternative matches: contraction letters in
# both cases, apostrophes, every whitespace kind (but not \x1c-\x1f, which
# Python's and Go's Unicode tables classify differently), digits of several
# scripts, marks, punctuation, CJK, emoji with joiners.
ALPHABET = (
    list("aAsStTrReEvVmMlLdDxZ'''") * 3
    + list("   ") * 4
    + ["\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\u2003", "\u3000", "\u2028"]
    + list("0123456789") * 2
    + ["\u0661", "\u0967", "\uff11", "\u00b2", "\u00bd", "\u216b", "\u2460"]
    + list(".,;:!?-_()[]{}<>\"/\\#$%&*+=@^`|~")
    + ["\u0301", "\u0300", "\u093e", "\u200d", "\u200b", "\u00ad"]
    + list("éßçñøЖжΩωאبحक中文字日本語한국")
    + ["😀", "👍", "🏽", "❤", "\ufe0f", "🇫", "🇷", "€", "→", "∑"]
)


def random_texts(n=3000, seed=20261122):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def go_pretokenize(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go toolchain not on PATH")
    binary = tmp_path_factory.mktemp("bin") / "tokenize"
    subprocess.run([go, "build", "-o", str(binary), "./core/tokenizer/cmd/tokenize"], cwd=ROOT, check=True)

    def run(name, texts):
        stdin = "".join(json.dumps(t) + "\n" for t in texts)
        out = subprocess.run(
            [str(binary), "-json", "-pretokenize", name], input=stdin, capture_output=True, text=True, check=True
        )
        return [json.loads(line) for line in out.stdout.split("\n")[:-1]]

    return run


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_scanner_matches_regex(name, go_pretokenize):
    corpus = CORPUS.read_text(encoding="utf-8")
    texts = corpus.split("\n") + [corpus, corpus.replace("\n", "\r\n")] + random_texts()
    want = [ORACLES[name](t) for t in texts]
    for t, w in zip(texts, want):
        assert "".join(w) == t  # the oracle covers every character
    got = go_pretokenize(name, texts)
    assert len(got) == len(texts)
    bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
    report = "\n".join(f"{t!r}\n  regex: {w}\n  go:    {g}" for t, w, g in bad[:10])
    assert not bad, f"{len(bad)}/{len(texts)} texts split differently:\n{report}"
