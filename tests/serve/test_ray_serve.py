"""lmstream.Runtime replicas as a Ray Serve deployment (lmstream.ray_serve)
on a local Ray instance: streams through Ray Serve's HTTP proxy spread over
two replicas, the openai client streams from the real model, and a client
that disconnects (HTTP) or cancels (a deployment handle) has its request
cancelled on the replica. One Ray instance and three small applications
for the module: its cost (about a minute on 2 cores) is mostly Ray's and
the replicas' start-up, paid once.
"""
import contextlib
import http.client
import importlib.util
import io
import json
import os
import re
import shlex
import socket
import sys
import threading
import time

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PKG = os.path.join(ROOT, "bindings", "python")
sys.path.insert(0, PKG)
# Ray's workers are new processes: they find the package (and through it
# build/liblmstream.so) on PYTHONPATH, which they inherit from this one.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PKG, os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# ray[serve] comes with make deps-test (tests/scripts/setup.sh): missing, it
# is an error here, not a skip.
import ray  # noqa: E402
from ray import serve  # noqa: E402

import openai  # noqa: E402

from lmstream.ray_serve import app  # noqa: E402

_spec = importlib.util.spec_from_file_location("ray_example", os.path.join(ROOT, "examples", "ray_serve.py"))
ray_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ray_example)

MODEL = os.environ.get("LMSTREAM_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
# 0 is the end token; 1..4 spell "Hello world"; 5 and 6 are the halves of 😀.
REPLAY = {"backend": "replay", "max_slots": 8, "eos_id": 0, "special_ids": [0],
          "vocab": ["3c2f733e", "48656c", "6c6f", "20776f72", "6c64", "f09f", "9880"]}
SLOW = [[1]] * 1000  # with delay_ms, a stream that runs until it is cancelled
LIGHT = {"ray_actor_options": {"num_cpus": 0.1}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # no /dev/shm, no loopback, ...: the machine, not lmstream
        pytest.skip(f"Ray cannot start a local instance here: {type(e).__name__}: {e}")
    try:
        # README's example line, run in this process on this Ray instance
        # (on a free port, --keep dropped): it starts Serve's proxy,
        # deploys the real model at / and streams an answer through it.
        port = free_port()
        argv = readme_example_args()
        argv[argv.index("--model") + 1] = MODEL
        argv.remove("--keep")
        argv += ["--port", str(port)]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ray_example.main(argv)
        handles = {
            "example": out.getvalue(),
            "pool": serve.run(app(REPLAY, num_replicas=2, **LIGHT), name="pool", route_prefix="/pool"),
            "one": serve.run(app(REPLAY, **LIGHT), name="one", route_prefix="/one"),
        }
        yield f"http://127.0.0.1:{port}", handles
    finally:
        serve.shutdown()
        ray.shutdown()


def readme_example_args():
    """The arguments of README.md's examples/ray_serve.py line."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    m = re.search(r"^python3 examples/ray_serve\.py (.*?) &$", readme, re.M)
    assert m, "README.md has no `python3 examples/ray_serve.py ... &` line"
    return shlex.split(m.group(1))


def post(base, path, body):
    host, port = base.rsplit("/", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    return conn, conn.getresponse()


def events(resp):
    """The events of an SSE response, the [DONE] marker checked and dropped."""
    raw = resp.read().decode("utf-8")
    evs = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in evs), raw
    assert evs[-1] == "data: [DONE]", raw
    return [json.loads(e[6:]) for e in evs[:-1]]


def idle(handle, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        st = handle.stats.remote().result()
        if st["active_slots"] == 0 and st["queued"] == 0:
            return st
        assert time.monotonic() < deadline, f"the request still holds a slot after {timeout}s: {st}"
        time.sleep(0.05)


def test_http_streams_spread_over_two_replicas(cluster):
    base, _ = cluster
    got = []

    def one():
        conn, resp = post(base, "/pool/v1/chat/completions", {
            "model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}],
            "script": [[1], [2], [5], [6], [3], [4]], "delay_ms": 100})
        assert resp.status == 200, resp.read()
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        got.append((resp.getheader("x-lmstream-replica"), events(resp)))
        conn.close()

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(60)
    assert len(got) == 6
    assert len({r for r, _ in got}) == 2, f"every stream went to one replica: {[r for r, _ in got]}"
    for _, evs in got:
        # The emoji's halves arrive as one whole character, never U+FFFD.
        text = "".join(c["delta"].get("content", "") for e in evs for c in e["choices"])
        assert text == "Hello😀 world"
        assert all("\ufffd" not in json.dumps(e, ensure_ascii=False) for e in evs)
        assert [e["usage"] for e in evs[:-1]] == [None] * (len(evs) - 1)
        assert evs[-1]["choices"] == [] and evs[-1]["usage"]["completion_tokens"] == 7
        assert [c["finish_reason"] for e in evs for c in e["choices"] if c["finish_reason"]] == ["stop"]


def test_the_example_streamed_an_answer_from_the_model(cluster):
    _, handles = cluster
    assert "Tokyo" in handles["example"], handles["example"]


def test_openai_client_streams_from_the_model(cluster):
    base, _ = cluster
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == [os.path.basename(MODEL)]
    parts, reasons = [], []
    for chunk in client.chat.completions.create(
            model="m", stream=True, max_tokens=24,
            messages=[{"role": "user", "content": "What is the capital of Japan?"}]):
        for c in chunk.choices:
            parts.append(c.delta.content or "")
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert "Tokyo" in "".join(parts)
    assert reasons in (["stop"], ["length"])


def test_disconnecting_cancels_the_request_on_the_replica(cluster):
    base, handles = cluster
    conn, resp = post(base, "/one/v1/completions",
                      {"prompt": "x", "stream": True, "script": SLOW, "delay_ms": 50})
    assert resp.status == 200
    first = resp.readline()
    assert first.startswith(b"data: "), first
    assert handles["one"].stats.remote().result()["active_slots"] == 1
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    # Left alone the stream would run 50 s.
    st = idle(handles["one"])
    assert st["finished"] >= 1


def test_cancelling_a_handle_stream_cancels_the_request(cluster):
    _, handles = cluster
    gen = handles["one"].options(stream=True).chat.remote(
        {"messages": [{"role": "user", "content": "hi"}], "script": SLOW, "delay_ms": 50})
    first = [next(gen), next(gen)]
    assert first[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert first[1]["choices"][0]["delta"]["content"] == "Hel"
    assert handles["one"].stats.remote().result()["active_slots"] == 1
    gen.cancel()
    idle(handles["one"])


def test_bad_requests_are_400_in_openais_shape(cluster):
    base, _ = cluster
    for body, words in [
        ({"prompt": "x", "no_such_field": 1}, "no_such_field"),
        ({"prompt": "x", "n": 2}, "n must be 1"),
        ({"prompt": "x", "max_tokens": "many"}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}]}, "takes prompt"),
    ]:
        conn, resp = post(base, "/one/v1/completions", dict(body, script=[[1]]))
        assert resp.status == 400, (body, resp.read())
        err = json.loads(resp.read())["error"]
        assert err["type"] == "invalid_request_error" and words in err["message"], (body, err)
        conn.close()

