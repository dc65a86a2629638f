"""Several lmstream-serve processes behind nginx as one OpenAI-compatible
pool: least-connections balancing, server-sent events passed through
unbuffered. Two replay servers and nginx run on loopback; streams must
spread over both, and a server that is stopped mid-stream must end its
own streams with an error event while the other keeps serving.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from test_serve import REPLAY, ROOT, Server

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# The pool's nginx config around README.md's block (tagged checked-by:
# test-serve, in "Several servers behind nginx"), which is used as written
# with its addresses replaced: what a user needs is least_conn, HTTP/1.1
# keep-alive to the servers and no buffering, so each event reaches the
# client as the server writes it.
CONF = """
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{pool}
}}
"""


def readme_pool():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    block = re.search(r"<!-- checked-by: test-serve -->\n```nginx\n(.*?)```", readme, re.S)
    assert block, "README.md has no nginx block tagged checked-by: test-serve"
    return block.group(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_flight(srv):
    with urllib.request.urlopen(srv.url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("lmstream_http_requests_in_flight "):
                return float(line.split()[1])
    raise AssertionError("no lmstream_http_requests_in_flight in /metrics")


class Reader(threading.Thread):
    """One streaming completion through the pool, read to its end."""

    def __init__(self, url, body):
        super().__init__(daemon=True)
        self.req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                          headers={"Content-Type": "application/json"})
        self.first = threading.Event()
        self.events, self.error = [], None

    def run(self):
        try:
            with urllib.request.urlopen(self.req, timeout=60) as r:
                for line in r:
                    line = line.decode()
                    if line.startswith("data: "):
                        self.events.append(line[6:].strip())
                        self.first.set()
        except Exception as e:  # reported by the test, not lost in the thread
            self.error = e
        self.first.set()


@pytest.fixture
def pool(tmp_path):
    if not os.access(NGINX, os.X_OK):
        pytest.fail("nginx is not installed (make deps-test installs Debian's package)")
    cfg = tmp_path / "replay.json"
    cfg.write_text(json.dumps(REPLAY))
    a = Server(["--runtime-config", str(cfg), "--grace", "200ms"])
    b = Server(["--runtime-config", str(cfg), "--grace", "200ms"])
    port = free_port()
    conf = tmp_path / "nginx.conf"
    text = readme_pool()
    for want in ("127.0.0.1:8080;", "127.0.0.1:8081;", "listen 127.0.0.1:8000;"):
        assert want in text, f"README's nginx block has no {want!r}"
    text = (text.replace("127.0.0.1:8080;", a.url[len("http://"):] + ";")
            .replace("127.0.0.1:8081;", b.url[len("http://"):] + ";")
            .replace("listen 127.0.0.1:8000;", f"listen 127.0.0.1:{port};"))
    # Run as root (CI), the workers must stay root to reach the test's
    # private temporary directory.
    conf.write_text(CONF.format(dir=tmp_path, pool=text, user="user root;" if os.geteuid() == 0 else ""))
    nginx = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(conf), "-g", "daemon off;"],
                             stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=5).close()
            break
        except OSError:
            if nginx.poll() is not None or time.time() > deadline:
                nginx.kill()
                pytest.fail(f"nginx did not start: {nginx.communicate()[1]}")
            time.sleep(0.05)
    yield url, a, b
    nginx.send_signal(signal.SIGQUIT)
    try:
        nginx.wait(30)
    except subprocess.TimeoutExpired:
        nginx.kill()
        nginx.wait()
    a.stop()
    b.stop()


def test_nginx_pool_spreads_streams_and_survives_a_stopped_server(pool):
    url, a, b = pool
    # 8 streams of about 4 s each: least_conn puts them on both servers.
    slow = {"prompt": "x", "stream": True, "delay_ms": 50, "script": [[3]] * 80}
    readers = [Reader(url, slow) for _ in range(8)]
    for r in readers:
        r.start()
        r.first.wait(30)  # one at a time, so least_conn sees each connection
    on_a, on_b = in_flight(a), in_flight(b)
    assert on_a + on_b == 8 and on_a >= 2 and on_b >= 2, (on_a, on_b)

    # Stop server a: its streams end with an error event at its grace's
    # end; b's streams run to [DONE].
    assert a.stop() == 0
    for r in readers:
        r.join(60)
        assert not r.is_alive() and r.error is None, r.error
    ended = [r.events[-1] for r in readers]
    errors = [e for e in ended if e != "[DONE]"]
    assert len(errors) == on_a and ended.count("[DONE]") == on_b, ended
    for e in errors:
        assert json.loads(e)["error"]["code"] == "shutdown", e
    # Every event came through whole: one burst's text each (the finishing
    # event carries none), never two events run together.
    for r in readers:
        for e in r.events[:-1]:
            assert json.loads(e)["choices"][0]["text"] in ("", " wor"), e

    # The pool keeps serving on b.
    for _ in range(4):
        r = Reader(url, {"prompt": "x", "stream": True, "script": [[1], [2]]})
        r.start()
        r.join(30)
        assert r.error is None and r.events[-1] == "[DONE]", (r.error, r.events)
