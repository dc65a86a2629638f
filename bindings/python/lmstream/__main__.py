"""python -m lmstream: stream an answer to the terminal.

    python -m lmstream "Why is the sky blue?"
    python -m lmstream --chat --system "You are terse."
    python -m lmstream --replay "hello"          # a demo without a model
    python -m lmstream pull smollm2-135m         # fetch a model by name
    python -m lmstream serve --model FILE.gguf    # OpenAI-compatible HTTP server (lmstream-serve)

Ctrl-C stops the generation (in --chat, it returns to the prompt). In
--chat, /help lists the commands (/reset, /quit); they never reach the model.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

from . import LmstreamError, Runtime
from .models import KNOWN_MODELS, model_path
from .runtime import invalid_utf8
from .stream import Stream

DEFAULT_MODEL = os.path.join("models", "SmolLM2-135M-Instruct.Q4_1.gguf")
#: The default model's name: its file in the model cache (`lmstream pull`).
DEFAULT_MODEL_NAME = "smollm2-135m"


def default_model() -> str:
    """--model's default: $LMSTREAM_MODEL, models/... under the current
    directory or under the repository this package sits in, else the
    default model's name (its file in the model cache)."""
    env = os.environ.get("LMSTREAM_MODEL")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for base in (os.getcwd(), os.path.join(here, "..", "..", "..")):
        p = os.path.normpath(os.path.join(base, DEFAULT_MODEL))
        if os.path.exists(p):
            return p
    return DEFAULT_MODEL_NAME


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m lmstream", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="In --chat, /help lists the commands (/reset, /quit); they are "
                                        "not sent to the model.\nCtrl-C stops an answer.")
    ap.add_argument("prompt", nargs="*",
                    help="the prompt, sent as a user message rendered with the model's chat template "
                         "(--raw sends it as plain text); read from stdin when absent and not --chat")
    ap.add_argument("--model", "-m", default=None,
                    help=f"a GGUF file, or a model's name: {', '.join(KNOWN_MODELS)} "
                         f"(default: {DEFAULT_MODEL_NAME}; `lmstream pull NAME` fetches one)")
    ap.add_argument("--max-tokens", "-n", type=int, default=256)
    ap.add_argument("--temperature", "-t", type=float, default=None)
    ap.add_argument("--top-p", type=float, default=None)
    ap.add_argument("--top-k", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--stop", action="append", default=None, help="a stop string (repeatable)")
    ap.add_argument("--system", default=None, help="a system message")
    ap.add_argument("--chat", action="store_true", help="an interactive conversation")
    ap.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    ap.add_argument("--replay", action="store_true", help="a demo on the replay backend (no model)")
    ap.add_argument("--stats", action="store_true", help="print usage after each answer (stderr)")
    args = ap.parse_args(argv)
    problem = check_args(args)
    if problem:
        ap.error(problem)  # exits 2 with the usage, before any model loads
    return args


def check_args(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the arguments, or None. The ranges are the
    library's (include/lmstream.h), checked here so that a typo costs no
    model load and is reported as a usage error rather than a request
    error after loading."""
    if args.max_tokens < 1:
        return f"--max-tokens must be at least 1, got {args.max_tokens}"
    if args.temperature is not None and not 0 <= args.temperature <= 100:
        return f"--temperature must be in [0, 100], got {args.temperature}"
    if args.top_p is not None and not 0 < args.top_p <= 1:
        return f"--top-p must be in (0, 1], got {args.top_p}"
    if args.top_k is not None and args.top_k < 0:
        return f"--top-k must be at least 0, got {args.top_k}"
    if args.seed is not None and not 0 <= args.seed < 1 << 64:
        return f"--seed must be in [0, 2**64), got {args.seed}"
    if args.stop is not None and any(not s for s in args.stop):
        return "--stop needs a non-empty string"
    if args.replay and args.model is not None:
        return "--replay runs without a model; drop --model or --replay"
    return None


# ---- --chat commands ---------------------------------------------------

CHAT_COMMANDS = {
    "/help": "this list",
    "/reset": "forget the conversation (the --system message stays)",
    "/quit": "leave (also /exit, Ctrl-D)",
}


def chat_help() -> str:
    lines = ["commands (a line that is exactly one of these is not sent to the model):"]
    lines += [f"  {name:<7} {what}" for name, what in CHAT_COMMANDS.items()]
    lines.append("Ctrl-C stops an answer.")
    return "\n".join(lines)


# ---- the replay demo ---------------------------------------------------

REPLAY_VOCAB: List[bytes] = [b"</s>"] + [bytes([b]) for b in range(256)]


def replay_script(answer: str, rng: random.Random) -> List[List[int]]:
    """Tokens of 1-3 bytes (cutting characters apart, as byte-level BPE
    does), in bursts of one or two tokens (as speculation accepts)."""
    raw = answer.encode("utf-8")
    toks: List[List[int]] = []
    i = 0
    while i < len(raw):
        n = rng.choice((1, 1, 2, 3))
        toks.append([b + 1 for b in raw[i:i + n]])
        i += n
    # A replay token is one piece; the demo vocabulary has single bytes, so
    # a multi-byte "token" becomes a burst of byte tokens.
    return toks


def replay_answer(messages: List[Dict[str, str]]) -> str:
    said = messages[-1]["content"].strip() or "nothing"
    turns = sum(m["role"] == "user" for m in messages)
    return (f"(replay demo, turn {turns}) You said: \u201c{said}\u201d. lmstream hands you whole "
            "UTF-8 characters even when tokens split them: café, naïve, 中文, 😀. "
            "Run without --replay to use a real model.")


# ---- running -----------------------------------------------------------

def load_runtime(args: argparse.Namespace) -> Runtime:
    if args.replay:
        return Runtime.replay(vocab=REPLAY_VOCAB, eos_id=0)
    path = args.model or default_model()
    if path in KNOWN_MODELS:
        # A name: its file in the model cache, fetched by `lmstream pull`.
        cached = model_path(path)
        if cached is None:
            raise SystemExit(f"lmstream: model {path} is not downloaded yet: run "
                             f"`lmstream pull {path}` (or pass --model FILE.gguf, or try --replay)")
        path = cached
    elif not os.path.exists(path):
        raise SystemExit(f"lmstream: model {path} not found (run `lmstream pull {DEFAULT_MODEL_NAME}` "
                         f"and use --model {DEFAULT_MODEL_NAME}, or pass --model FILE.gguf, or try --replay)")
    box: List[object] = []
    # The loading thread's latest progress report, drawn by this thread:
    # loading runs beside it so that Ctrl-C leaves at once.
    progress: List[object] = ["open", 0.0]

    def report(stage: str, fraction: float) -> None:
        progress[:] = [stage, fraction]

    def load() -> None:
        try:
            box.append(Runtime(model_path=path, progress=report))
        except BaseException as e:  # handed to the main thread
            box.append(e)

    t = threading.Thread(target=load, name="lmstream-load", daemon=True)
    t.start()
    t0 = time.monotonic()
    tty = sys.stderr.isatty()
    name = os.path.basename(path)
    while t.is_alive():
        t.join(0.1)
        if tty:
            stage, fraction = str(progress[0]), float(progress[1])  # type: ignore[arg-type]
            bar = "#" * int(fraction * 20 + 0.5)
            sys.stderr.write(f"\rloading {name} [{bar:<20}] {fraction:4.0%} {stage:<12} "
                             f"{time.monotonic() - t0:4.1f} s")
            sys.stderr.flush()
    if tty:
        sys.stderr.write("\r\033[K")
    else:
        sys.stderr.write(f"loaded {name} in {time.monotonic() - t0:.1f} s\n")
    sys.stderr.flush()
    got = box[0]
    if isinstance(got, BaseException):
        if 'unknown backend "cpu"' in str(got):
            raise SystemExit(f"lmstream: this liblmstream has no CPU backend yet ({got}); try --replay")
        raise SystemExit(f"lmstream: cannot load {path}: {got}")
    assert isinstance(got, Runtime)
    return got


def start(rt: Runtime, args: argparse.Namespace, messages: List[Dict[str, str]],
          rng: random.Random) -> Stream:
    kw: Dict[str, object] = {"max_tokens": args.max_tokens}
    for k in ("temperature", "top_p", "top_k", "seed", "stop"):
        v = getattr(args, k)
        if v is not None:
            kw[k] = v
    if args.replay:
        kw["script"] = replay_script(replay_answer(messages), rng)
        kw["delay_ms"] = 15
        return rt.generate(messages[-1]["content"], **kw)  # type: ignore[arg-type]
    if args.raw:
        return rt.generate("\n".join(m["content"] for m in messages), **kw)  # type: ignore[arg-type]
    return rt.generate(messages=messages, **kw)  # type: ignore[arg-type]


def show(stream: Stream, args: argparse.Namespace) -> str:
    """Prints the stream as it comes; returns its text. KeyboardInterrupt
    propagates after the request was cancelled."""
    out = sys.stdout
    parts: List[str] = []
    try:
        for chunk in stream:
            if chunk.text:
                out.write(chunk.text)
                out.flush()
                parts.append(chunk.text)
    finally:
        out.write("\n")
        out.flush()
    if args.stats and stream.usage is not None:
        u = stream.usage
        rate = 1000.0 / u.tpot_ms if u.tpot_ms > 0 else 0.0
        sys.stderr.write(f"[{u.generated_tokens} tokens, ttft {u.ttft_ms:.0f} ms, "
                         f"{rate:.1f} tok/s, {stream.reason.ident}]\n")
    return "".join(parts)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["pull"]:
        # A subcommand only as the first word alone: `lmstream "pull it"`
        # is still a prompt.
        from .pull_cli import main as pull_main
        return pull_main(argv[1:])
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    try:
        return run(parse_args(argv))
    except BrokenPipeError:
        # The reader went away (| head): the stream was cancelled on the way
        # out; keep Python from complaining again when it flushes stdout.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def serve(argv: Sequence[str]) -> int:
    """`lmstream serve ...` runs lmstream-serve (the OpenAI-compatible HTTP
    server, a Go program built beside the library) with these arguments:
    $LMSTREAM_SERVE, else the one the wheel carries (lmstream/bin), else
    the one on PATH (make install), else the checkout's
    build/lmstream-serve."""
    import shutil
    here = os.path.dirname(os.path.abspath(__file__))
    packaged = os.path.join(here, "bin", "lmstream-serve")
    built = os.path.join(here, "..", "..", "..", "build", "lmstream-serve")
    for cmd in (os.environ.get("LMSTREAM_SERVE"), packaged, shutil.which("lmstream-serve"), built):
        if cmd and os.access(cmd, os.X_OK):
            os.execv(cmd, [cmd, *argv])
    print("lmstream: lmstream-serve not found (the wheel carries it; in a checkout `make` builds it "
          "into build/, make install into PREFIX/bin)", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    prompt = " ".join(args.prompt)
    if not prompt and not args.chat:
        if sys.stdin.isatty():
            print("lmstream: give a prompt, or --chat", file=sys.stderr)
            return 2
        # Bytes, so that text that is not UTF-8 is reported below rather
        # than raised from inside io.
        prompt = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    # Arguments that are not UTF-8 (sys.argv keeps such bytes as
    # surrogates) would be refused by the library only after the model
    # loaded; say so now, naming the byte.
    for what, text in (("the prompt", prompt), ("--system", args.system or "")):
        bad = invalid_utf8(text)
        if bad:
            print(f"lmstream: {what} is not valid UTF-8: {bad}", file=sys.stderr)
            return 2
    rng = random.Random(0)
    try:
        rt = load_runtime(args)
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return 130
    with rt:
        messages: List[Dict[str, str]] = []
        if args.system:
            messages.append({"role": "system", "content": args.system})
        if not args.chat:
            messages.append({"role": "user", "content": prompt})
            try:
                show(start(rt, args, messages, rng), args)
            except KeyboardInterrupt:
                sys.stderr.write("[stopped]\n")
                return 130
            except LmstreamError as e:
                print(f"lmstream: {e}", file=sys.stderr)
                return 1
            return 0
        print("lmstream chat — Ctrl-C stops an answer, Ctrl-D or /quit leaves, /reset forgets, "
              "/help lists the commands", file=sys.stderr)
        pending = prompt
        while True:
            if pending:
                line, pending = pending, ""
                print(f"> {line}")
            else:
                try:
                    line = input("> ")
                except (EOFError, KeyboardInterrupt):
                    sys.stderr.write("\n")
                    return 0
            command = line.strip()
            if command in ("/quit", "/exit"):
                return 0
            if command == "/reset":
                del messages[int(bool(args.system)):]
                print("(conversation forgotten)", file=sys.stderr)
                continue
            if command in ("/help", "/?"):
                print(chat_help(), file=sys.stderr)
                continue
            if command.startswith("/") and len(command.split()) == 1 and command[1:].isalpha():
                # A lone /word is a mistyped command far more often than a
                # message: say so instead of spending an answer on it.
                print(f"unknown command {command}; /help lists them", file=sys.stderr)
                continue
            if not line.strip():
                continue
            messages.append({"role": "user", "content": line})
            try:
                answer = show(start(rt, args, messages, rng), args)
            except KeyboardInterrupt:
                sys.stderr.write("[stopped]\n")
                messages.pop()
                continue
            except LmstreamError as e:
                print(f"lmstream: {e}", file=sys.stderr)
                messages.pop()
                continue
            messages.append({"role": "assistant", "content": answer})


if __name__ == "__main__":
    sys.exit(main())
