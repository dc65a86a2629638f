"""Loading liblmstream and declaring its C interface (include/lmstream.h).

Every function of the header is declared here with its exact argument and
result types; tests/test_signatures.py parses the header and fails when a
declaration is missing or differs.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
)
from typing import Any, Dict, List, Optional, Tuple

#: The ABI version this binding was written for (LMS_ABI_VERSION).
ABI_VERSION = 4

LIBRARY_NAME = "liblmstream.so"

# Status codes.
LMS_OK = 0
LMS_EMPTY = 1
LMS_DONE = 2
LMS_INTERRUPTED = 3
LMS_ERR_INVALID_ARGUMENT = -1
LMS_ERR_INVALID_HANDLE = -2
LMS_ERR_BAD_JSON = -3
LMS_ERR_INVALID_REQUEST = -4
LMS_ERR_MODEL = -5
LMS_ERR_PROMPT_TOO_LONG = -6
LMS_ERR_CAPACITY = -7
LMS_ERR_BUFFER_TOO_SMALL = -8
LMS_ERR_FORKED = -9
LMS_ERR_BACKEND = -10
LMS_ERR_INTERNAL = -11
LMS_ERR_SHUTDOWN = -12
LMS_ERR_CLOSED = -13
LMS_ERR_STATE = -14

# Introspection flags.
LMS_TOKENIZE_ADD_SPECIAL = 1
LMS_TOKENIZE_PARSE_SPECIAL = 2
LMS_DETOKENIZE_SKIP_SPECIAL = 1

# Queue policies.
LMS_QUEUE_COALESCE = 0
LMS_QUEUE_PAUSE = 1

lms_runtime = c_uint64
lms_channel = c_uint64
lms_mux = c_uint64


class LmsUsage(Structure):
    _fields_ = [
        ("prompt_tokens", c_int64),
        ("generated_tokens", c_int64),
        ("ttft_ms", c_double),
        ("tpot_ms", c_double),
        ("draft_tokens_proposed", c_int64),
        ("draft_tokens_accepted", c_int64),
        ("verify_passes", c_int64),
        ("cached_tokens", c_int64),  # since ABI 4
    ]


class LmsLogprob(Structure):
    _fields_ = [
        ("token_id", c_int32),
        ("logprob", c_double),
        ("bytes", c_void_p),  # const char *, n_bytes of them, no NUL
        ("n_bytes", c_size_t),
    ]


class LmsTokenLogprob(Structure):
    _fields_ = [
        ("token_id", c_int32),
        ("logprob", c_double),
        ("bytes", c_void_p),
        ("n_bytes", c_size_t),
        ("top", POINTER(LmsLogprob)),
        ("n_top", c_size_t),
    ]


class LmsToolCallDelta(Structure):
    _fields_ = [
        ("index", c_int32),
        ("id", c_void_p),  # const char *, NUL-terminated ("" when absent)
        ("name", c_void_p),  # const char *, NUL-terminated ("" when absent)
        ("arguments", c_void_p),  # const char *, arguments_len bytes
        ("arguments_len", c_size_t),
    ]


class LmsChunk(Structure):
    _fields_ = [
        ("token_ids", POINTER(c_int32)),
        ("n_token_ids", c_size_t),
        ("text", c_void_p),  # const char *, read with its length (may hold no NUL before text_len)
        ("text_len", c_size_t),
        ("finished", c_int32),
        ("reason", c_int32),
        ("error_code", c_int32),
        ("batch_index", c_int32),
        ("error_message", c_char_p),
        ("usage", LmsUsage),
        ("logprobs", POINTER(LmsTokenLogprob)),  # since ABI 2
        ("n_logprobs", c_size_t),
        ("has_reply", c_int32),  # since ABI 3
        ("content", c_void_p),  # const char *, content_len bytes
        ("content_len", c_size_t),
        ("reasoning", c_void_p),  # const char *, reasoning_len bytes
        ("reasoning_len", c_size_t),
        ("tool_calls", POINTER(LmsToolCallDelta)),
        ("n_tool_calls", c_size_t),
    ]


lms_chunk_handler = CFUNCTYPE(c_int, POINTER(LmsChunk), c_void_p)
lms_progress_handler = CFUNCTYPE(c_int, c_char_p, c_double, c_void_p)

# Models by name: lms_model_pull's progress phases and report.
LMS_PULL_WAITING = 0
LMS_PULL_DOWNLOADING = 1
LMS_PULL_ASSEMBLING = 2
LMS_PULL_VERIFYING = 3
LMS_PULL_DONE = 4


class LmsPullProgress(Structure):
    _fields_ = [
        ("model", c_char_p),
        ("phase", c_int32),
        ("file", c_char_p),
        ("part", c_int32),
        ("parts", c_int32),
        ("done_bytes", c_int64),
        ("total_bytes", c_int64),
    ]


lms_pull_progress_fn = CFUNCTYPE(c_int, POINTER(LmsPullProgress), c_void_p)

# name -> (restype, argtypes), in header order.
FUNCTIONS: Dict[str, Tuple[Any, List[Any]]] = {
    "lms_abi_version": (c_int32, []),
    "lms_strerror": (c_char_p, [c_int]),
    "lms_finish_reason_name": (c_char_p, [c_int]),
    "lms_configure_process": (c_int, [c_char_p, POINTER(c_char), c_size_t]),
    "lms_runtime_create": (c_int, [c_char_p, POINTER(lms_runtime), POINTER(c_char), c_size_t]),
    "lms_runtime_destroy": (c_int, [lms_runtime]),
    "lms_runtime_stats": (c_int, [lms_runtime, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
    "lms_runtime_create_with_progress": (c_int, [c_char_p, lms_progress_handler, c_void_p, POINTER(lms_runtime),
                                                 POINTER(c_char), c_size_t]),
    "lms_tokenize": (c_int, [lms_runtime, c_char_p, c_size_t, c_int, POINTER(c_int32), c_size_t,
                             POINTER(c_size_t), POINTER(c_char), c_size_t]),
    "lms_count_tokens": (c_int, [lms_runtime, c_char_p, c_size_t, c_int, POINTER(c_size_t),
                                 POINTER(c_char), c_size_t]),
    "lms_detokenize": (c_int, [lms_runtime, POINTER(c_int32), c_size_t, c_int, POINTER(c_char),
                               c_size_t, POINTER(c_size_t), POINTER(c_char), c_size_t]),
    "lms_model_info": (c_int, [lms_runtime, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
    "lms_render_chat": (c_int, [lms_runtime, c_char_p, POINTER(c_char), c_size_t, POINTER(c_size_t),
                                POINTER(c_char), c_size_t]),
    "lms_channel_create": (c_int, [POINTER(lms_channel)]),
    "lms_channel_set_interval": (c_int, [lms_channel, c_int32]),
    "lms_channel_set_skip_special": (c_int, [lms_channel, c_int]),
    "lms_channel_set_queue": (c_int, [lms_channel, c_int32, c_int]),
    "lms_submit": (c_int, [lms_runtime, c_char_p, POINTER(lms_channel), c_size_t,
                           POINTER(c_char), c_size_t]),
    "lms_complete": (c_int, [lms_runtime, c_char_p, POINTER(POINTER(LmsChunk)),
                             POINTER(c_char), c_size_t]),
    "lms_channel_try_pop": (c_int, [lms_channel, POINTER(POINTER(LmsChunk))]),
    "lms_channel_wait_pop": (c_int, [lms_channel, c_int32, POINTER(POINTER(LmsChunk))]),
    "lms_channel_pop_batch": (c_int, [lms_channel, POINTER(LmsChunk), c_size_t, c_void_p,
                                      c_size_t, c_int32, POINTER(c_size_t)]),
    "lms_chunk_free": (None, [POINTER(LmsChunk)]),
    "lms_channel_consume": (c_int, [lms_channel, lms_chunk_handler, c_void_p]),
    "lms_channel_cancel": (c_int, [lms_channel]),
    "lms_channel_fd": (c_int, [lms_channel, POINTER(c_int)]),
    "lms_channel_state": (c_int, [lms_channel, POINTER(c_int), POINTER(c_int), POINTER(c_size_t)]),
    "lms_channel_release": (c_int, [lms_channel]),
    "lms_mux_create": (c_int, [POINTER(lms_mux)]),
    "lms_mux_add": (c_int, [lms_mux, lms_channel]),
    "lms_mux_remove": (c_int, [lms_mux, lms_channel]),
    "lms_mux_fd": (c_int, [lms_mux, POINTER(c_int)]),
    "lms_mux_ready": (c_int, [lms_mux, c_int32, POINTER(lms_channel), c_size_t, POINTER(c_size_t)]),
    "lms_mux_destroy": (c_int, [lms_mux]),
    # Models by name
    "lms_model_pull": (c_int, [c_char_p, lms_pull_progress_fn, c_void_p, POINTER(c_char), c_size_t]),
    "lms_model_path": (c_int, [c_char_p, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
}


class LibraryNotFound(ImportError):
    """liblmstream.so is neither in the package, at LMSTREAM_LIBRARY, nor in
    the repository's build directory."""


def candidate_paths() -> List[str]:
    """Where the library is looked for, in order: $LMSTREAM_LIBRARY alone
    when it is set; else inside the package (wheels carry it there), then
    <repo>/build/ for in-repo development."""
    env = os.environ.get("LMSTREAM_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.join(here, LIBRARY_NAME),
        # <repo>/bindings/python/lmstream -> <repo>/build
        os.path.normpath(os.path.join(here, "..", "..", "..", "build", LIBRARY_NAME)),
    ]


def _load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    for path in candidate_paths():
        if not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    hint = ("fix LMSTREAM_LIBRARY" if os.environ.get("LMSTREAM_LIBRARY")
            else "set LMSTREAM_LIBRARY, or build it with `make lib` at the repository root")
    raise LibraryNotFound(f"cannot load liblmstream.so ({hint}); tried: " + "; ".join(tried))


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


lib, path = _load()
try:
    _abi_fn = lib.lms_abi_version
except AttributeError:
    raise ImportError(f"{path} is not liblmstream (it has no lms_abi_version)") from None
_abi_fn.restype, _abi_fn.argtypes = FUNCTIONS["lms_abi_version"]
abi = _abi_fn()
if abi != ABI_VERSION:
    raise ImportError(
        f"{path} has ABI version {abi}, but this lmstream package was written for "
        f"version {ABI_VERSION}; install matching versions")
_declare(lib)


def strerror(code: int) -> str:
    s: Optional[bytes] = lib.lms_strerror(code)
    return s.decode("utf-8", "replace") if s else f"status {code}"


#: Set in a child process after fork(): every use raises ForkedProcess
#: (the library's Go runtime does not survive a fork).
FORKED = False


def _after_fork_in_child() -> None:
    global FORKED
    FORKED = True


os.register_at_fork(after_in_child=_after_fork_in_child)
