#!/usr/bin/env python3
"""Start-up to the first token, cold and warm, for each model: the time
from starting the server process to /health answering 200 and to the
first streamed token of a short greedy chat sent then (issue 48).

    bench_start.py [--repeat 3] [MODEL.gguf ...]

Cold: an empty cache directory (XDG_CACHE_HOME), so lmstream-serve has no
cost curve kept from an earlier start and measures a coarse one before it
serves; that server is then left idle until its whole curve is measured
and kept (the "idle" calibration lmstream-serve runs). Warm: the same
directory again, the curve found on disk. The model file itself is in the
OS page cache both times (the first run reads it; the figures are not of
the disk). With LMSTREAM_PEER_LLAMA_SERVER set, llama-server on the same
file beside each (it keeps nothing between starts, so one figure).
Prints the median of --repeat starts of each.

LMSTREAM_SERVE names the built lmstream-serve; the models default to
LMSTREAM_MODEL.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from bench_common import (
    MODEL,
    PEER,
    PEER_ARGS,
    SERVE,
    ask,
    free_port,
    listening_url,
    load_note,
    stop_on_sigterm,
    wait_healthy,
)

QUESTION = [{"role": "user", "content": "Say hello."}]


def one_start(cmd, env, url_of, extra, timeout=900, then=None):
    """(s to healthy, s to the first token) of one start of cmd; then(),
    when given, runs before the server is stopped."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = url_of(proc)
        ready = wait_healthy(proc, url, t0, timeout, 0.02)
        ttft, _, _ = ask(url, QUESTION, 8, extra)
        if then:
            then(proc)
        return ready, ready + ttft
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def curve_kept(cache, timeout=900):
    """A function that waits, up to timeout seconds, until a cost curve
    is kept under the cache directory cache (idle calibration done)."""
    curves = os.path.join(cache, "lmstream", "curves")

    def wait(proc):
        t0 = time.monotonic()
        while not (os.path.isdir(curves) and os.listdir(curves)):
            if proc.poll() is not None:
                raise SystemExit(f"lmstream-serve exited ({proc.returncode}) before it kept a cost curve")
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"no cost curve kept under {curves} after {timeout} s idle")
            time.sleep(0.2)

    return wait


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=[MODEL])
    ap.add_argument("--repeat", type=int, default=3, help="starts of each kind; medians printed")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    stop_on_sigterm()
    print(f"start-up to /health 200 and to the first token of a short chat, median of {args.repeat}")
    print(f"({load_note()})")
    for model in args.models:
        name = os.path.basename(model)
        cmd = [SERVE, "--model", model, "--port", "0"]
        cold, warm = [], []
        for _ in range(args.repeat):
            cache = tempfile.mkdtemp(prefix="lmstream-start-")
            try:
                env = dict(os.environ, XDG_CACHE_HOME=cache)
                cold.append(one_start(cmd, env, listening_url, None, then=curve_kept(cache)))
                warm.append(one_start(cmd, env, listening_url, None))
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        rows = [("lmstream cold", cold), ("lmstream warm", warm)]
        if PEER:
            peer = []
            for _ in range(args.repeat):
                port = free_port()
                pcmd = [PEER, "-m", model, "--host", "127.0.0.1", "--port", str(port), "--jinja"] + PEER_ARGS
                peer.append(one_start(pcmd, None, lambda p, port=port: f"http://127.0.0.1:{port}", {}))
            rows.append(("llama-server", peer))
        for what, starts in rows:
            print(f"{name:>44} {what:>14}: ready {statistics.median(x[0] for x in starts):6.2f} s, "
                  f"first token {statistics.median(x[1] for x in starts):6.2f} s", flush=True)
    print(f"({load_note()})")


if __name__ == "__main__":
    main()
