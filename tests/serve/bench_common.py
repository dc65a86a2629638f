"""What the serving benchmarks share: starting lmstream-serve and, when
LMSTREAM_PEER_LLAMA_SERVER names a llama-server binary (llama.cpp, built
outside this repository), llama-server on the same GGUF; and one greedy
streaming chat request, timed. Only the standard library is used.

LMSTREAM_SERVE names the built lmstream-serve, LMSTREAM_MODEL the model,
LMSTREAM_PEER_LLAMA_SERVER_ARGS more arguments for llama-server.
"""
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVE = os.environ.get("LMSTREAM_SERVE", os.path.join(ROOT, "build", "lmstream-serve"))
MODEL = os.environ.get("LMSTREAM_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
PEER = os.environ.get("LMSTREAM_PEER_LLAMA_SERVER", "")
# More llama-server arguments (say "-t 1" on a machine whose cores other
# work shares: its threads spin at each barrier and lose badly to a
# descheduled thread).
PEER_ARGS = shlex.split(os.environ.get("LMSTREAM_PEER_LLAMA_SERVER_ARGS", ""))
PASSAGE = os.path.join(ROOT, "core", "model", "testdata", "passage.txt")


class Server:
    """A server process, its base URL, and the fields its requests add
    (llama-server's cache_prompt; lmstream-serve refuses fields it does
    not know)."""

    def __init__(self, name, proc, url, extra=None):
        self.name, self.proc, self.url, self.extra = name, proc, url, extra or {}

    def ask(self, messages, max_tokens):
        return ask(self.url, messages, max_tokens, self.extra)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(extra=(), stderr=None):
    """lmstream-serve on a free port, once it says it is ready."""
    proc = subprocess.Popen([SERVE, "--model", MODEL, "--port", "0"] + list(extra), stdout=subprocess.PIPE, text=True,
                            stderr=stderr)
    url = listening_url(proc)
    proc.stdout.readline()  # "... ready"
    return proc, url


def listening_url(proc):
    """The URL lmstream-serve prints on its first line, as soon as it
    listens (before the model is loaded)."""
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://[^;\s]+)", line)
    if not m:
        raise SystemExit(f"lmstream-serve said {line!r}")
    return m.group(1)


def wait_healthy(proc, url, t0, timeout, poll, hint=""):
    """Seconds from t0 (time.monotonic) until url's /health answers 200;
    SystemExit if proc exits first or timeout passes (hint is added to the
    message)."""
    name = os.path.basename(proc.args[0])
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode}{hint}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(poll)
    raise SystemExit(f"{name} was not ready within {timeout} s{hint}")


def start_lmstream(slots, ctx, extra=()):
    """lmstream-serve with slots of ctx tokens; its log goes to a file in
    /tmp, not to the benchmark's output."""
    log = open(os.path.join("/tmp", f"lmstream-serve-{os.getpid()}.log"), "a")
    proc, url = start(["--slots", str(slots), "--ctx", str(ctx)] + list(extra), stderr=log)
    return Server("lmstream", proc, url)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_peer(slots, ctx, timeout=600):
    """llama-server with prompt caching on (cache_prompt, and --cache-reuse
    for chunks found shifted), slots of ctx tokens each; None without
    LMSTREAM_PEER_LLAMA_SERVER. Its own log goes to a file beside the
    model's name in /tmp, not to the benchmark's output."""
    if not PEER:
        return None
    port = free_port()
    log = open(os.path.join("/tmp", f"llama-server-{port}.log"), "w")
    proc = subprocess.Popen([PEER, "-m", MODEL, "--host", "127.0.0.1", "--port", str(port), "-np", str(slots),
                             "-c", str(slots * ctx), "--no-kv-unified", "--cache-prompt", "--cache-reuse", "256",
                             "--jinja"] + PEER_ARGS, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, time.monotonic(), timeout, 0.5, f"; see {log.name}")
        return Server("llama-server", proc, url, {"cache_prompt": True})
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def warm(server):
    """One short raw-text completion, so that a server's first-request
    costs (buffers, threads, page faults) are not a benchmark's first
    figure. Raw text shares no prefix with a chat's template, so it leaves
    nothing in a prefix cache that the benchmark's first chat could reuse."""
    body = json.dumps({"model": "m", "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}).encode()
    req = urllib.request.Request(server.url + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        r.read()


def ask(url, messages, max_tokens, extra=None):
    """One greedy streaming chat: (TTFT s, text, usage). TTFT runs from the
    submit to the first chunk with content. usage is normalised: its
    prompt_tokens_details.cached_tokens is llama-server's timings.cache_n
    when its usage lacks the field, and completion_tokens its
    timings.predicted_n."""
    body = json.dumps({"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}, **(extra or {})}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    t0, ttft, text, usage, timings = time.monotonic(), None, [], None, None
    with urllib.request.urlopen(req) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            usage = ev.get("usage") or usage
            timings = ev.get("timings") or timings
            for c in ev.get("choices", []):
                d = (c.get("delta") or {}).get("content")
                if d:
                    ttft = ttft if ttft is not None else time.monotonic() - t0
                    text.append(d)
    usage = dict(usage or {})
    details = dict(usage.get("prompt_tokens_details") or {})
    if "cached_tokens" not in details:
        details["cached_tokens"] = (timings or {}).get("cache_n", 0)
    usage["prompt_tokens_details"] = details
    if "completion_tokens" not in usage:
        usage["completion_tokens"] = (timings or {}).get("predicted_n", 0)
    if "prompt_tokens" not in usage:
        usage["prompt_tokens"] = (timings or {}).get("prompt_n", 0) + details["cached_tokens"]
    return ttft, "".join(text), usage


def stop_on_sigterm():
    """Makes SIGTERM (timeout, a CI job's end) an exit that runs the
    benchmark's finally blocks, so no server it started outlives it."""
    def leave(signum, frame):
        raise SystemExit(f"stopped by signal {signum}")
    signal.signal(signal.SIGTERM, leave)


def percentile(xs, p):
    """The p-th percentile of xs (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs) + 0.5) - 1))]


def load_note():
    """The machine's CPU and load average, for the printed header."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
