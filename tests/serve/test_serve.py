"""lmstream-serve as its users meet it: the built command started on a free
loopback port, the `openai` package and curl as clients.

LMSTREAM_SERVE names the built command and LMSTREAM_MODEL the default
model (make test-serve sets both). The replay backend scripts exact token
streams; the model run checks the real path end to end.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import openai
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVE = os.environ.get("LMSTREAM_SERVE", os.path.join(ROOT, "build", "lmstream-serve"))
MODEL = os.environ.get("LMSTREAM_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))

# Token 5 and 6 are the halves of one emoji; 7 and 8 spell "STOP".
REPLAY = {
    "backend": "replay", "max_slots": 8, "eos_id": 0, "special_ids": [0],
    "vocab": ["3c2f733e", "48656c", "6c6f", "20776f72", "6c64", "f09f", "9880", "5354", "4f50", "21"],
}


class Server:
    """A running lmstream-serve; the address comes from its first line
    (it listens at once, answering 503 while the model loads), and the
    second says the model is loaded."""

    def __init__(self, args, tmp_path=None):
        if not os.access(SERVE, os.X_OK):
            pytest.fail(f"{SERVE} is not built (make serve)")
        self.proc = subprocess.Popen([SERVE, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://[^;\s]+)", line)
        ready = self.proc.stdout.readline() if m else ""
        if not m or "ready" not in ready:
            self.proc.kill()
            _, err = self.proc.communicate()
            pytest.fail(f"lmstream-serve did not start: {line!r} {ready!r} {err!r}")
        self.url = m.group(1)

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", "unused"), max_retries=0, **kw)

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def replay(tmp_path):
    cfg = tmp_path / "replay.json"
    cfg.write_text(json.dumps(REPLAY))
    srv = Server(["--runtime-config", str(cfg), "--grace", "300ms"])
    yield srv
    srv.stop()


def test_openai_client_streams_a_chat_from_replay(replay):
    client = replay.client()
    stream = client.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True}, stop=["STOP"],
        extra_body={"script": [[1], [5], [6], [2], [7], [8], [9]]})
    deltas, reasons, usage = [], [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                deltas.append(choice.delta.content)
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    # The emoji arrives whole in one delta, and the stop string split over
    # two tokens is cut out whole.
    assert "".join(deltas) == "Hel\U0001F600lo"
    assert "\U0001F600" in deltas
    assert reasons == ["stop"]
    assert usage is not None and usage.completion_tokens == 6


def test_openai_client_completions_and_models(replay):
    client = replay.client()
    out = client.completions.create(model="m", prompt="x", n=2, max_tokens=2,
                                    extra_body={"script": [[1], [2], [3]]})
    assert [c.text for c in out.choices] == ["Hello", "Hello"]
    assert [c.finish_reason for c in out.choices] == ["length", "length"]
    assert [m.id for m in client.models.list().data] == ["lmstream"]


def test_openai_client_sees_bad_requests_as_errors(replay):
    client = replay.client()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                       logprobs=True, top_logprobs=21, extra_body={"script": [[1]]})
    assert "top_logprobs" in str(e.value)


def test_openai_client_reads_logprobs(replay):
    """The openai package parses the chat logprobs into its own types."""
    out = replay.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], logprobs=True, top_logprobs=1,
        extra_body={"script": [[1], [2]]})
    content = out.choices[0].logprobs.content
    assert [c.token for c in content] == ["Hel", "lo"] and [c.bytes for c in content] == [[72, 101, 108], [108, 111]]
    assert all(c.logprob == 0 and [t.token for t in c.top_logprobs] == [c.token] for c in content)


def test_curl_streams_and_shutdown_ends_streams_with_an_error_event(replay):
    body = json.dumps({"model": "m", "prompt": "x", "stream": True, "script": [[1], [2]]})
    out = subprocess.run(["curl", "-sSN", replay.url + "/v1/completions", "-H", "Content-Type: application/json",
                          "-d", body], capture_output=True, text=True, timeout=60, check=True).stdout
    events = [e for e in out.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), out
    assert events[-1] == "data: [DONE]"
    assert "".join(json.loads(e[6:])["choices"][0]["text"] for e in events[:-1]) == "Hello"

    # A stream that runs past the grace period: SIGTERM ends it with an
    # error event, and the server exits cleanly.
    slow = json.dumps({"prompt": "x", "stream": True, "delay_ms": 100, "script": [[3]] * 1000})
    curl = subprocess.Popen(["curl", "-sSN", replay.url + "/v1/completions", "-d", slow],
                            stdout=subprocess.PIPE, text=True)
    first = curl.stdout.readline()
    assert " wor" in first, first
    assert replay.stop() == 0
    rest = curl.communicate(timeout=30)[0]
    last = [e for e in rest.split("\n\n") if e][-1]
    assert json.loads(last[6:])["error"]["code"] == "shutdown", last


def test_curl_with_an_api_key(tmp_path):
    cfg = tmp_path / "replay.json"
    cfg.write_text(json.dumps(REPLAY))
    env = dict(os.environ, LMSTREAM_API_KEY="sekrit")
    proc = subprocess.Popen([SERVE, "--port", "0", "--runtime-config", str(cfg)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"(http://[^;\s]+)", proc.stdout.readline()).group(1)
        assert "ready" in proc.stdout.readline()
        code = lambda *h: subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", *h, url + "/v1/models"],
                                         capture_output=True, text=True, timeout=30).stdout
        assert code() == "401"
        assert code("-H", "Authorization: Bearer sekrit") == "200"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.skipif(not os.path.exists(MODEL), reason="the default model is fetched by make test-serve")
def test_openai_client_streams_from_the_real_model():
    srv = Server(["--model", MODEL, "--ctx", "512", "--slots", "2"])
    try:
        stream = srv.client().chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "What is the capital of Japan?"}],
            stream=True, max_tokens=24, temperature=0)
        text, reasons = "", []
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                if choice.finish_reason:
                    reasons.append(choice.finish_reason)
        assert "Tokyo" in text, text
        assert len(reasons) == 1 and reasons[0] in ("stop", "length")

        # The README's curl line, as written, against this server.
        curl = readme_curl().replace("http://127.0.0.1:8080", srv.url)
        out = subprocess.run(curl, shell=True, capture_output=True, text=True, timeout=300, check=True).stdout
        events = [e for e in out.split("\n\n") if e]
        assert events[-1] == "data: [DONE]", out
        said = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content", "") for e in events[:-1])
        assert "Tokyo" in said, said
    finally:
        assert srv.stop() == 0


def readme_curl():
    """The curl line of README.md's serving block (tagged checked-by: test-serve)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    block = re.search(r"<!-- checked-by: test-serve -->\n```sh\n(.*?)```", readme, re.S)
    assert block, "README.md has no block tagged checked-by: test-serve"
    lines = [l for l in block.group(1).splitlines() if l.startswith("curl ")]
    assert len(lines) == 1, block.group(1)
    assert "http://127.0.0.1:8080" in lines[0]
    return lines[0]


def test_lmstream_serve_subcommand_runs_the_server(tmp_path):
    """`lmstream serve ...` (the Python CLI) is lmstream-serve with the same
    arguments."""
    cfg = tmp_path / "replay.json"
    cfg.write_text(json.dumps(REPLAY))
    env = dict(os.environ, LMSTREAM_SERVE=SERVE,
               PYTHONPATH=os.path.join(ROOT, "bindings", "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "lmstream", "serve", "--runtime-config", str(cfg), "--port", "0"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
