"""Parity of lmstream's Go tokenizer with Hugging Face `tokenizers`.

The oracle is built independently of the Go code: the vocabulary and merges
are read out of the same GGUF file with the `gguf` package and handed to a
`tokenizers` ByteLevel BPE with the pre-tokenizer the model's Hugging Face
tokenizer.json uses, chosen by tokenizer.ggml.pre:

- smollm (SmolLM2-135M): Digits(individual) then ByteLevel with its regex;
- qwen2 (Qwen2.5-Coder-0.5B): Split on Qwen2's regex (isolated) then
  ByteLevel without a regex. Qwen2's tokenizer.json also has an NFC
  normalizer, which llama.cpp (whose behaviour the Go tokenizer follows)
  does not apply, so the oracle leaves it out; corpus.txt is NFC already.

Gemma 3 (tokenizer.ggml.model "llama": SentencePiece pieces with scores, no
merges) gets the BPE its tokenizer.json has: spaces normalized to "▁", no
pre-tokenizer, byte fallback to the <0xNN> pieces, and merges derived from
the pieces the way transformers' SentencePiece converter derives them:
every split of a piece into two pieces is a merge, ranked by the merged
piece's score (then by the two halves' ids).

User-defined tokens (Qwen's <tool_call>) are matched in any text, control
tokens only with ParseSpecial, as in llama.cpp. Every line of corpus.txt,
the whole corpus as one text (to exercise newlines), random strings and a
few chat-formatted strings with control tokens are encoded by both and the
ids compared exactly, once per model.

The Go side runs through core/tokenizer/cmd/tokenize, built here with
`go build`. A model's tests skip when its file is absent (`make model`,
`make model MODEL=qwen2.5-coder-0.5b`), and all skip when the Python
packages or the Go toolchain are missing. LMSTREAM_TOKENIZER_MODEL=path
runs them on that one file instead.
"""

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (make model name, file): the vocabularies the parity tests run on.
MODELS = [
    ("smollm2-135m", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("qwen2.5-coder-0.5b", ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    ("gemma3-270m", ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"),
]
if os.environ.get("LMSTREAM_TOKENIZER_MODEL"):
    MODELS = [("", Path(os.environ["LMSTREAM_TOKENIZER_MODEL"]))]

# Qwen2's pre-tokenizer regex, as in its tokenizer.json.
QWEN2_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
CORPUS = Path(__file__).with_name("corpus.txt")

# Control-token texts exercised with ParseSpecial on both sides.
CHAT_LINES = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2? Réponds en français.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|endoftext|>",
    "text<|im_end|>more text <|im_start|> spaced <|endoftext|>\n\n",
    "<|im_start|<|im_end|>|>  <<|endoftext|>>",
    # Qwen's fill-in-the-middle and tool tokens (plain text for SmolLM2).
    "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n    return c<|fim_middle|>",
    "<|repo_name|>lmstream<|file_sep|>main.go\npackage main<|endoftext|>",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call><tool_call</tool_call>>",
    # Gemma's turn markers and BOS/EOS (plain text for the others).
    "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn><eos>",
    "<start_of_turn<end_of_turn>>  <<bos>>\n\n\n",
]


def corpus_lines():
    return CORPUS.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.fixture(scope="module", params=MODELS, ids=[name or str(path) for name, path in MODELS])
def model(request):
    name, path = request.param
    if not path.exists():
        how = f"make model MODEL={name}" if name else "set LMSTREAM_TOKENIZER_MODEL to a GGUF file"
        pytest.skip(f"model {path} absent; run `{how}` to fetch it")
    return path


@pytest.fixture(scope="module")
def hf(model):
    tokenizers = pytest.importorskip("tokenizers", reason="pip install tokenizers")
    gguf = pytest.importorskip("gguf", reason="pip install gguf")

    reader = gguf.GGUFReader(str(model))

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def ints(key):
        field = reader.fields[key]
        return [int(field.parts[i][0]) for i in field.data]

    def string(key):
        field = reader.fields[key]
        return bytes(field.parts[field.data[0]]).decode("utf-8")

    if string("tokenizer.ggml.model") == "llama":
        return spm_oracle(reader, strings, ints)
    assert string("tokenizer.ggml.model") == "gpt2"
    pre = string("tokenizer.ggml.pre")
    tokens = strings("tokenizer.ggml.tokens")
    types = ints("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate token texts"

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    elif pre == "qwen2":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        pytest.fail(f"no oracle for pre-tokenizer {pre!r}")
    tok.decoder = decoders.ByteLevel()
    # User-defined tokens are recognised in any text.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])

    # A second oracle that also knows the control tokens, for ParseSpecial.
    special = Tokenizer.from_str(tok.to_str())
    special.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    )
    return tok, special


def spm_oracle(reader, strings, ints):
    """The BPE of a SentencePiece vocabulary (Gemma 3), as its tokenizer.json has it."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    tokens = strings("tokenizer.ggml.tokens")
    types = ints("tokenizer.ggml.token_type")
    field = reader.fields["tokenizer.ggml.scores"]
    scores = [float(field.parts[i][0]) for i in field.data]
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    # Normal pieces (type 1) take part in merges; byte pieces (type 6) are
    # the fallback; control and user-defined tokens are added tokens.
    normal = {t for t, ty in zip(tokens, types) if ty == 1}
    merges = []
    for piece in normal:
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in normal and b in normal:
                merges.append((-scores[vocab[piece]], vocab[a], vocab[b], a, b))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for *_, a, b in merges],
                               unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])
    special = Tokenizer.from_str(tok.to_str())
    special.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    )
    return tok, special


@pytest.fixture(scope="session")
def go_binary(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go toolchain not on PATH")
    binary = tmp_path_factory.mktemp("bin") / "tokenize"
    subprocess.run(
        [go, "build", "-o", str(binary), "./core/tokenizer/cmd/tokenize"],
        cwd=ROOT,
        check=True,
    )
    return binary


@pytest.fixture(scope="module")
def go_tokenize(go_binary, model):
    def run(texts, special=False):
        args = [str(go_binary), "-json"] + (["-special"] if special else []) + [str(model)]
        stdin = "".join(json.dumps(t) + "\n" for t in texts)
        out = subprocess.run(args, input=stdin, capture_output=True, text=True, check=True)
        result = [json.loads(line) for line in out.stdout.split("\n")[:-1]]
        assert len(result) == len(texts)
        return result

    return run


def mismatches(texts, want, got, tok):
    lines = []
    for n, (text, w, g) in enumerate(zip(texts, want, got), 1):
        if w != g:
            lines.append(
                f"line {n}: {text!r}\n  hf: {[tok.id_to_token(i) for i in w]}\n  go: {[tok.id_to_token(i) for i in g]}"
            )
    return lines


def test_corpus_line_by_line(hf, go_tokenize):
    tok, _ = hf
    texts = corpus_lines()
    assert len(texts) >= 100
    want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    got = go_tokenize(texts)
    bad = mismatches(texts, want, got, tok)
    assert not bad, f"{len(bad)}/{len(texts)} lines differ:\n" + "\n".join(bad)


def test_corpus_as_one_text(hf, go_tokenize):
    # Newlines, "\r\n" and blank-line runs only occur across lines.
    tok, _ = hf
    whole = CORPUS.read_text(encoding="utf-8")
    texts = [whole, whole.replace("\n", "\r\n"), whole.replace("\n", "\n\n \n")]
    want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    got = go_tokenize(texts)
    bad = mismatches(["whole", "whole CRLF", "whole blank lines"], want, got, tok)
    assert not bad, "\n".join(bad)


def test_round_trip_matches_hf_decode(hf, go_tokenize):
    tok, _ = hf
    texts = corpus_lines()
    for text, ids in zip(texts, go_tokenize(texts)):
        assert tok.decode(ids) == text


def test_control_tokens(hf, go_tokenize):
    _, special = hf
    want = [special.encode(t, add_special_tokens=False).ids for t in CHAT_LINES]
    got = go_tokenize(CHAT_LINES, special=True)
    bad = mismatches(CHAT_LINES, want, got, special)
    assert not bad, "\n".join(bad)


def test_random_strings(hf, go_tokenize):
    # Dense mixes of the characters where pre-tokenization and byte-level
    # merging are most fragile: partial UTF-8 of emoji and CJK, digit runs,
    # whitespace kinds, contractions.
    tok, _ = hf
    alphabet = (
        list("aAsStTrReEvVmMlLdDxZ'") * 3
        + [" ", " ", " ", "\t", "\n", "\r\n", "\xa0", "\u3000"]
        + list("0123456789")
        + ["\u0661", "\uff11", "\u00b2", "\u00bd"]
        + list(".,;:!?-_()[]{}<>\"/\\#$%&*+=@^`|~")
        + ["\u0301", "\u093e", "\u200d", "é", "ß", "Ж", "Ω", "中", "文", "日", "한", "😀", "👍", "🏽", "❤", "\ufe0f"]
    )
    rng = random.Random(7)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(2000)]
    want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    got = go_tokenize(texts)
    bad = mismatches(texts, want, got, tok)
    assert not bad, f"{len(bad)}/{len(texts)} differ:\n" + "\n".join(bad[:10])
