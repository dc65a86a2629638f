"""Runtime: a model and its engine loop, and the requests submitted to it."""
from __future__ import annotations

import atexit
import ctypes
import json
import math
import os
import threading
import weakref
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Union,
)

from . import _lib
from ._lib import LMS_ERR_INVALID_HANDLE, LMS_OK, lib
from .errors import (
    ForkedProcess,
    InvalidRequest,
    InvalidType,
    LmstreamError,
    ShutdownError,
    error_for,
)
from .stream import (
    Chunk,
    QueuePolicy,
    Reply,
    Stream,
    TokenLogprob,
    _live as _live_streams,
)

__all__ = ["Runtime", "configure_process"]

PathLike = Union[str, "os.PathLike[str]"]
#: A chat message: {"role", "content"}, and as OpenAI's API has them
#: "tool_calls", "tool_call_id", "name", "reasoning_content".
Message = Mapping[str, Any]

_ERR_SIZE = 4096


def _check_forked() -> None:
    if _lib.FORKED:
        raise ForkedProcess("lmstream cannot be used in a child process after fork(); "
                            "use it in the parent, or start workers with the 'spawn' method")


def _err_buf() -> "ctypes.Array[ctypes.c_char]":
    return ctypes.create_string_buffer(_ERR_SIZE)


def _raise(rc: int, err: "ctypes.Array[ctypes.c_char]") -> None:
    raise error_for(rc, err.value.decode("utf-8", "replace"))


# ---- validation of known parameters (before anything reaches C) --------

def _type_name(v: object) -> str:
    return type(v).__name__


def _int(name: str, v: object, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidType(f"{name} must be an int, got {_type_name(v)} {v!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"at least {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise InvalidRequest(f"{name} must be {rng}, got {v}")
    return int(v)


def _num(name: str, v: object, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidType(f"{name} must be a number, got {_type_name(v)} {v!r}")
    f = float(v)
    if math.isnan(f) or f < lo or f > hi or (lo_open and f == lo):
        raise InvalidRequest(f"{name} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {v!r}")
    return f


def _bool(name: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise InvalidType(f"{name} must be a bool, got {_type_name(v)} {v!r}")
    return v


def _str(name: str, v: object) -> str:
    if not isinstance(v, str):
        raise InvalidType(f"{name} must be a str, got {_type_name(v)} {v!r}")
    return v


def _str_list(name: str, v: object) -> List[str]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise InvalidType(f"{name} must be a list of str, got {_type_name(v)} {v!r}")
    return [_str(f"{name}[{i}]", s) for i, s in enumerate(v)]


def _int_list(name: str, v: object, lo: Optional[int] = None) -> List[int]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise InvalidType(f"{name} must be a list of int, got {_type_name(v)} {v!r}")
    return [_int(f"{name}[{i}]", x, lo) for i, x in enumerate(v)]


# The keys of a message, as OpenAI's API has them: an assistant turn's
# tool_calls and reasoning_content, a tool turn's tool_call_id and name.
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content"})
_TOOL_CALL_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


def _keys(where: str, m: Mapping[Any, Any], allowed: "frozenset[str]") -> None:
    unknown = set(m) - allowed
    if unknown:
        raise InvalidRequest(f"{where} has unknown keys {sorted(map(str, unknown))}")


def _mapping(name: str, v: object, what: str) -> Mapping[Any, Any]:
    if not isinstance(v, Mapping):
        raise InvalidType(f"{name} must be a dict {what}, got {_type_name(v)}")
    return v


def _tool_calls(name: str, v: object) -> List[Dict[str, Any]]:
    """An assistant message's tool_calls: [{"id", "type", "function":
    {"name", "arguments"}}]. arguments go as given: a str (OpenAI's wire
    form, JSON text) or a dict (the object itself, what templates expect;
    the library turns a string holding an object into one too)."""
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise InvalidType(f"{name} must be a list of {{'id', 'type', 'function'}} dicts, got {_type_name(v)}")
    out = []
    for j, c in enumerate(v):
        at = f"{name}[{j}]"
        c = _mapping(at, c, "with 'id', 'type' and 'function'")
        _keys(at, c, _TOOL_CALL_KEYS)
        call: Dict[str, Any] = {}
        for k in ("id", "type"):
            if c.get(k) is not None:
                call[k] = _str(f"{at}[{k!r}]", c[k])
        if "function" not in c:
            raise InvalidRequest(f"{at} has no 'function'")
        fn = _mapping(f"{at}['function']", c["function"], "with 'name' and 'arguments'")
        _keys(f"{at}['function']", fn, _FUNCTION_KEYS)
        f: Dict[str, Any] = {"name": _str(f"{at}['function']['name']", fn.get("name"))}
        if fn.get("arguments") is not None:
            args = fn["arguments"]
            if isinstance(args, Mapping):
                args = dict(args)
            elif not isinstance(args, str):
                raise InvalidType(f"{at}['function']['arguments'] must be a str (JSON text) or a dict, "
                                  f"got {_type_name(args)}")
            f["arguments"] = args
        call["function"] = f
        out.append(call)
    return out


def _messages(v: object) -> List[Dict[str, Any]]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise InvalidType(f"messages must be a list of {{'role': ..., 'content': ...}} dicts, got {_type_name(v)}")
    if not v:
        raise InvalidRequest("messages must hold at least one message")
    out = []
    for i, m in enumerate(v):
        if not isinstance(m, Mapping):
            raise InvalidType(f"messages[{i}] must be a dict with 'role' and 'content', got {_type_name(m)}")
        _keys(f"messages[{i}]", m, _MESSAGE_KEYS)
        if "role" not in m:
            raise InvalidRequest(f"messages[{i}] has no 'role'")
        role = _str(f"messages[{i}]['role']", m["role"])
        if not role:
            raise InvalidRequest(f"messages[{i}] has an empty 'role'")
        # content None is how OpenAI returns an answer that is only calls:
        # it goes back as "" (the library takes no nulls).
        content = m.get("content")
        msg: Dict[str, Any] = {"role": role, "content": "" if content is None else _str(
            f"messages[{i}]['content']", content)}
        for k in ("reasoning_content", "tool_call_id", "name"):
            if m.get(k) is not None:
                msg[k] = _str(f"messages[{i}][{k!r}]", m[k])
        if m.get("tool_calls") is not None:
            msg["tool_calls"] = _tool_calls(f"messages[{i}]['tool_calls']", m["tool_calls"])
        out.append(msg)
    return out


def _dict_list(name: str, v: object) -> List[Dict[str, Any]]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise InvalidType(f"{name} must be a list of dicts, got {_type_name(v)} {v!r}")
    return [dict(_mapping(f"{name}[{i}]", t, "")) for i, t in enumerate(v)]


def _str_or_dict(name: str, v: object) -> Any:
    if isinstance(v, str):
        return v
    return dict(_mapping(name, v, "or a str"))


# The chat fields a request may carry (generate's **extra,
# create_chat_completion's keywords): their types are checked here, their
# values by the library (lms_submit in lmstream.h).
_CHAT_FIELDS: Dict[str, Callable[[str, Any], Any]] = {
    "tools": _dict_list,
    "tool_choice": _str_or_dict,
    "parallel_tool_calls": _bool,
    "reasoning_format": _str,
    "chat_template_kwargs": lambda name, v: dict(_mapping(name, v, "of template variables")),
}


def _policy(v: object) -> int:
    if isinstance(v, QueuePolicy):
        return int(v)
    if isinstance(v, str):
        try:
            return int(QueuePolicy[v.upper()])
        except KeyError:
            pass
        raise InvalidRequest(f"queue_policy must be 'coalesce' or 'pause', got {v!r}")
    raise InvalidType(f"queue_policy must be 'coalesce', 'pause' or a QueuePolicy, got {_type_name(v)} {v!r}")


class _ChannelSettings:
    __slots__ = ("interval", "skip", "limit", "policy")

    def __init__(self, stream_interval: Optional[int], skip_special_tokens: Optional[bool],
                 queue_limit: Optional[int], queue_policy: object) -> None:
        self.interval = None if stream_interval is None else _int("stream_interval", stream_interval, 0, 2**31 - 1)
        self.skip = None if skip_special_tokens is None else _bool("skip_special_tokens", skip_special_tokens)
        self.limit = None if queue_limit is None else _int("queue_limit", queue_limit, 1, 2**31 - 1)
        self.policy = None if queue_policy is None else _policy(queue_policy)

    def make_channel(self) -> int:
        h = ctypes.c_uint64()
        rc = lib.lms_channel_create(h)
        if rc != LMS_OK:
            raise error_for(rc)
        try:
            if self.interval is not None:
                _ok(lib.lms_channel_set_interval(h, self.interval))
            if self.skip is not None:
                _ok(lib.lms_channel_set_skip_special(h, int(self.skip)))
            if self.limit is not None or self.policy is not None:
                _ok(lib.lms_channel_set_queue(h, self.limit if self.limit is not None else 256,
                                              self.policy if self.policy is not None else 0))
        except BaseException:
            lib.lms_channel_release(h)
            raise
        return h.value


def _ok(rc: int) -> None:
    if rc < 0:
        raise error_for(rc)


def _request(prompt: Any, prompts: Any, messages: Any, *, max_tokens: Any, temperature: Any,
             top_p: Any, top_k: Any, min_p: Any, seed: Any, stop: Any, stop_token_ids: Any,
             include_stop: Any, tpot_slo_ms: Any, ttft_slo_ms: Any,
             extra: Dict[str, Any]) -> bytes:
    req: Dict[str, Any] = {}
    given = sum(x is not None for x in (prompt, prompts, messages))
    if given == 0:
        raise InvalidRequest("give a prompt or messages")
    if given > 1:
        raise InvalidRequest("give only one of prompt and messages")
    if prompt is not None:
        req["prompt"] = _str("prompt", prompt)
    elif prompts is not None:
        req["prompts"] = _str_list("prompts", prompts)
        if not req["prompts"]:
            raise InvalidRequest("prompts must hold at least one prompt")
    else:
        req["messages"] = _messages(messages)
    if max_tokens is not None:
        req["max_tokens"] = _int("max_tokens", max_tokens, 1)
    if temperature is not None:
        req["temperature"] = _num("temperature", temperature, 0, 100)
    if top_p is not None:
        req["top_p"] = _num("top_p", top_p, 0, 1, lo_open=True)
    if top_k is not None:
        req["top_k"] = _int("top_k", top_k, 0)
    if min_p is not None:
        req["min_p"] = _num("min_p", min_p, 0, 1)
    if seed is not None:
        req["seed"] = _int("seed", seed, 0, 2**64 - 1)
    if stop is not None:
        req["stop"] = [stop] if isinstance(stop, str) else _str_list("stop", stop)
    if stop_token_ids is not None:
        req["stop_token_ids"] = _int_list("stop_token_ids", stop_token_ids, 0)
    if include_stop is not None:
        req["include_stop"] = _bool("include_stop", include_stop)
    if tpot_slo_ms is not None:
        req["tpot_slo_ms"] = _num("tpot_slo_ms", tpot_slo_ms, 0, math.inf)
    if ttft_slo_ms is not None:
        req["ttft_slo_ms"] = _num("ttft_slo_ms", ttft_slo_ms, 0, math.inf)
    for k, v in extra.items():
        if k in req or k in ("prompt", "prompts", "messages"):
            raise InvalidRequest(f"{k!r} given twice")
        check = _CHAT_FIELDS.get(k)
        req[k] = v if check is None else check(k, v)
    return _dumps(req, "request")


def _dumps(obj: Dict[str, Any], what: str) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except TypeError as e:
        raise InvalidType(f"{what}: a value is not JSON-serializable: {e}") from None
    except ValueError as e:
        raise InvalidRequest(f"{what}: {e}") from None
    return _utf8(text)


def _utf8(text: str) -> bytes:
    """text as UTF-8 bytes. A str holding surrogates (bytes that were not
    UTF-8, as sys.argv and os.fsdecode carry them with surrogateescape, or
    lone surrogates) cannot be UTF-8: its bytes go to the library as they
    came (surrogateescape) or as their 3-byte surrogate form, which the
    library refuses with BadJSON naming the byte and its offset in the
    JSON, the same answer a C caller gets."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def invalid_utf8(text: str) -> Optional[str]:
    """None when text is valid Unicode (it can be sent as UTF-8), else a
    message naming the first bad byte and its offset in text's bytes."""
    raw = _utf8(text)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"invalid UTF-8 byte 0x{raw[e.start]:02x} at byte {e.start}"
    return None


def _chat_kw(kw: Dict[str, Any], tools: Any, tool_choice: Any, parallel_tool_calls: Any,
             reasoning_format: Any, chat_template_kwargs: Any) -> Dict[str, Any]:
    """generate()'s keywords with the chat fields that were given (their
    types are checked in _request, with generate's own **extra)."""
    given = {"tools": tools, "tool_choice": tool_choice, "parallel_tool_calls": parallel_tool_calls,
             "reasoning_format": reasoning_format, "chat_template_kwargs": chat_template_kwargs}
    return {**kw, **{k: v for k, v in given.items() if v is not None}}


_live_runtimes: "weakref.WeakSet[Runtime]" = weakref.WeakSet()


class Runtime:
    """A model and its engine loop.

    ``Runtime(model_path="models/x.gguf", max_slots=8)`` loads a GGUF model
    with the default (cpu) backend; ``Runtime.replay(vocab=[b"a", ...],
    eos_id=0)`` makes the scripted replay backend. Other keyword arguments
    go into the runtime config JSON ("backend", "max_slots", "max_queue" and
    backend-specific fields). Use it as a context manager, or call close().
    One runtime may be shared by any number of threads.

    ``progress``, when given, is called as ``progress(stage, fraction)`` while
    the model loads, on the creating thread, before the constructor returns:
    ``stage`` is "open", "weights", "speculation", "calibration" or "ready"
    (always last on success; later versions may add stages), ``fraction`` the share of the
    loading done, from 0 to 1, never decreasing. An exception it raises
    (KeyboardInterrupt included) stops the reports; the runtime is then freed
    once loading ends and the exception propagates from the constructor.
    """

    def __init__(self, model_path: Optional[PathLike] = None, *,
                 progress: Optional[Callable[[str, float], Any]] = None, **config: Any) -> None:
        _check_forked()
        self._h = 0
        self._lock = threading.Lock()
        cfg: Dict[str, Any] = {}
        if model_path is not None:
            if not isinstance(model_path, (str, os.PathLike)):
                raise InvalidType(f"model_path must be a str or path, got {_type_name(model_path)}")
            cfg["model_path"] = os.fspath(model_path)
        if "backend" in config:
            _str("backend", config["backend"])
        if "max_slots" in config:
            _int("max_slots", config["max_slots"], 1, 4096)
        if "max_queue" in config:
            _int("max_queue", config["max_queue"], 1)
        cfg.update(config)
        self.config = cfg
        data = _dumps(cfg, "config")
        h = ctypes.c_uint64()
        err = _err_buf()
        if progress is None:
            rc = lib.lms_runtime_create(data, h, err, _ERR_SIZE)
        else:
            if not callable(progress):
                raise InvalidType(f"progress must be callable, got {_type_name(progress)}")
            raised: List[BaseException] = []

            # The library calls back on this thread while it loads; an
            # exception cannot cross C, so it is kept, loading is told to
            # stop, and it is raised here once the call returns.
            def report(stage: bytes, fraction: float, _user: Any) -> int:
                try:
                    progress(stage.decode("utf-8", "replace"), fraction)
                    return 0
                except BaseException as e:  # KeyboardInterrupt too: Ctrl-C during a load
                    raised.append(e)
                    return 1

            rc = lib.lms_runtime_create_with_progress(data, _lib.lms_progress_handler(report), None, h,
                                                      err, _ERR_SIZE)
            if raised:
                raise raised[0]
        if rc != LMS_OK:
            _raise(rc, err)
        self._h = h.value
        _live_runtimes.add(self)

    @classmethod
    def replay(cls, vocab: Sequence[Union[bytes, str]], eos_id: int,
               special_ids: Sequence[int] = (), **config: Any) -> "Runtime":
        """A runtime on the deterministic replay backend: a vocabulary of raw
        byte pieces (str pieces are UTF-8 encoded), and per request a
        ``script=[[ids], ...]`` of the token bursts each iteration emits."""
        if isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
            raise InvalidType(f"vocab must be a list of bytes, got {_type_name(vocab)}")
        pieces = []
        for i, p in enumerate(vocab):
            if isinstance(p, str):
                p = p.encode("utf-8")
            if not isinstance(p, (bytes, bytearray)):
                raise InvalidType(f"vocab[{i}] must be bytes or str, got {_type_name(p)}")
            pieces.append(bytes(p).hex())
        cfg: Dict[str, Any] = {"backend": "replay", "vocab": pieces,
               "eos_id": _int("eos_id", eos_id, 0),
               "special_ids": _int_list("special_ids", special_ids, 0)}
        cfg.update(config)
        return cls(**cfg)

    # ---- lifetime -------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._h == 0

    def close(self) -> None:
        """Stops the engine. Streams still running receive an error terminal
        chunk (ShutdownError). Idempotent; from any thread."""
        with self._lock:
            h, self._h = self._h, 0
        if h and not _lib.FORKED:
            lib.lms_runtime_destroy(h)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h:
                self.close()
        except Exception:
            pass

    def _handle(self) -> int:
        _check_forked()
        h = self._h
        if not h:
            raise ShutdownError("the runtime is closed")
        return h

    def _fail(self, rc: int, err: "ctypes.Array[ctypes.c_char]") -> LmstreamError:
        if rc == LMS_ERR_INVALID_HANDLE and self._h == 0:
            return ShutdownError("the runtime is closed")
        return error_for(rc, err.value.decode("utf-8", "replace"))

    # ---- requests -------------------------------------------------------

    def generate(self, prompt: Optional[str] = None, *,
                 messages: Optional[Sequence[Message]] = None,
                 max_tokens: Optional[int] = None,
                 temperature: Optional[float] = None,
                 top_p: Optional[float] = None,
                 top_k: Optional[int] = None,
                 min_p: Optional[float] = None,
                 seed: Optional[int] = None,
                 stop: Union[str, Sequence[str], None] = None,
                 stop_token_ids: Optional[Sequence[int]] = None,
                 include_stop: Optional[bool] = None,
                 stream_interval: Optional[int] = None,
                 skip_special_tokens: Optional[bool] = None,
                 tpot_slo_ms: Optional[float] = None,
                 ttft_slo_ms: Optional[float] = None,
                 queue_limit: Optional[int] = None,
                 queue_policy: Union[str, QueuePolicy, None] = None,
                 raise_on_error: bool = True,
                 **extra: Any) -> Stream:
        """Submits a request and returns its Stream at once.

        ``prompt`` is raw text, tokenized as is; ``messages`` (a list of
        {"role", "content"} dicts, with "tool_calls", "tool_call_id",
        "name" and "reasoning_content" as OpenAI's API has them) is
        rendered with the model's chat template first (render_chat shows
        the result). Give one of them.

        ``stream_interval`` (a chunk carries at least n tokens),
        ``skip_special_tokens``, ``queue_limit`` and ``queue_policy``
        ("coalesce" or "pause") set up the channel; everything else goes
        into the request JSON, ``**extra`` included (backend-specific fields
        such as the replay backend's ``script``, and structured output:
        ``response_format={"type": "json_schema", "json_schema": {"name":
        ..., "schema": {...}}}`` or ``{"type": "json_object"}``, or
        ``grammar=`` GBNF text, and ``logprobs=True`` with
        ``top_logprobs=k``, which fill each chunk's ``logprobs``; a chat's
        ``tools``, ``tool_choice``, ``parallel_tool_calls``,
        ``reasoning_format`` and ``chat_template_kwargs``, see
        create_chat_completion, with which each chunk's ``reply`` holds the
        parsed answer). Errors known before the first token raise here.
        """
        streams = self._submit(prompt, None, messages, 1, locals(), extra)
        return streams[0]

    def generate_batch(self, prompts: Sequence[str], *,
                       max_tokens: Optional[int] = None,
                       temperature: Optional[float] = None,
                       top_p: Optional[float] = None,
                       top_k: Optional[int] = None,
                       min_p: Optional[float] = None,
                       seed: Optional[int] = None,
                       stop: Union[str, Sequence[str], None] = None,
                       stop_token_ids: Optional[Sequence[int]] = None,
                       include_stop: Optional[bool] = None,
                       stream_interval: Optional[int] = None,
                       skip_special_tokens: Optional[bool] = None,
                       tpot_slo_ms: Optional[float] = None,
                       ttft_slo_ms: Optional[float] = None,
                       queue_limit: Optional[int] = None,
                       queue_policy: Union[str, QueuePolicy, None] = None,
                       raise_on_error: bool = True,
                       **extra: Any) -> List[Stream]:
        """One request with many prompts sharing every setting: one Stream
        per prompt, in order (a single lms_submit). With a seed, prompt i
        samples with seed+i."""
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
            raise InvalidType(f"prompts must be a list of str, got {_type_name(prompts)}")
        return self._submit(None, prompts, None, len(prompts), locals(), extra)

    def _submit(self, prompt: Any, prompts: Any, messages: Any, n: int,
                kw: Dict[str, Any], extra: Dict[str, Any]) -> List[Stream]:
        self._handle()  # raises ShutdownError when the runtime is closed
        raise_on_error = _bool("raise_on_error", kw["raise_on_error"])
        settings = _ChannelSettings(kw["stream_interval"], kw["skip_special_tokens"],
                                    kw["queue_limit"], kw["queue_policy"])
        data = _request(prompt, prompts, messages, max_tokens=kw["max_tokens"],
                        temperature=kw["temperature"], top_p=kw["top_p"], top_k=kw["top_k"],
                        min_p=kw["min_p"], seed=kw["seed"], stop=kw["stop"],
                        stop_token_ids=kw["stop_token_ids"], include_stop=kw["include_stop"],
                        tpot_slo_ms=kw["tpot_slo_ms"], ttft_slo_ms=kw["ttft_slo_ms"],
                        extra=extra)
        return self._submit_json(data, n, settings, raise_on_error)

    def _submit_json(self, data: bytes, n: int, settings: "_ChannelSettings",
                     raise_on_error: bool = True) -> List[Stream]:
        """Submits request JSON as given (the conformance tests send
        malformed JSON through here) with n channels set up as settings
        says."""
        h = self._handle()
        n = max(n, 1)
        handles: List[int] = []
        try:
            for _ in range(n):
                handles.append(settings.make_channel())
            arr = (ctypes.c_uint64 * n)(*handles)
            err = _err_buf()
            rc = lib.lms_submit(h, data, arr, n, err, _ERR_SIZE)
            if rc != LMS_OK:
                raise self._fail(rc, err)
        except BaseException:
            for ch in handles:
                lib.lms_channel_release(ch)
            raise
        # Streams hold the runtime: it lives while any of its streams does.
        return [Stream(self, ch, i, raise_on_error) for i, ch in enumerate(handles)]

    def complete(self, prompt: Optional[str] = None, *,
                 messages: Optional[Sequence[Message]] = None,
                 max_tokens: Optional[int] = None,
                 temperature: Optional[float] = None,
                 top_p: Optional[float] = None,
                 top_k: Optional[int] = None,
                 min_p: Optional[float] = None,
                 seed: Optional[int] = None,
                 stop: Union[str, Sequence[str], None] = None,
                 stop_token_ids: Optional[Sequence[int]] = None,
                 include_stop: Optional[bool] = None,
                 tpot_slo_ms: Optional[float] = None,
                 ttft_slo_ms: Optional[float] = None,
                 raise_on_error: bool = True,
                 **extra: Any) -> Chunk:
        """The non-streaming call: blocks until the request ends and returns
        its whole answer as one terminal Chunk (all token ids, ``.text``,
        ``.reason``, ``.usage``, and for a request that parses its answer
        ``.reply``: Reply.join of the chunks', one ToolCallDelta per call
        with its whole arguments). A failed request raises (unless
        raise_on_error=False).

        It reads a channel internally rather than calling lms_complete,
        because lms_complete cannot be cancelled: this way Ctrl-C (or any
        exception) during the wait cancels the request and frees its slot,
        as leaving a stream does.
        """
        _bool("raise_on_error", raise_on_error)
        stream = self.generate(prompt, messages=messages, max_tokens=max_tokens,
                               temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                               seed=seed, stop=stop, stop_token_ids=stop_token_ids,
                               include_stop=include_stop, tpot_slo_ms=tpot_slo_ms,
                               ttft_slo_ms=ttft_slo_ms, raise_on_error=False, **extra)
        ids: List[int] = []
        parts: List[str] = []
        lps: Optional[List[TokenLogprob]] = None
        replies: List[Reply] = []
        final: Optional[Chunk] = None
        with stream:
            for c in stream:
                ids.extend(c.token_ids)
                parts.append(c.text)
                if c.logprobs is not None:
                    lps = (lps or []) + c.logprobs
                if c.reply is not None:
                    replies.append(c.reply)
                if c.finished:
                    final = c
        assert final is not None, "a stream always ends with a terminal chunk"
        chunk = Chunk.make(ids, "".join(parts), True, final.reason, final.usage, final.error, lps,
                           Reply.join(replies) if replies else None)
        if chunk.error is not None and raise_on_error:
            raise chunk.error
        return chunk

    # ---- OpenAI-shaped calls --------------------------------------------

    def create_chat_completion(self, messages: Sequence[Message], *, stream: bool = False,
                               tools: Optional[Sequence[Mapping[str, Any]]] = None,
                               tool_choice: Union[str, Mapping[str, Any], None] = None,
                               parallel_tool_calls: Optional[bool] = None,
                               reasoning_format: Optional[str] = None,
                               chat_template_kwargs: Optional[Mapping[str, Any]] = None,
                               **kw: Any) -> Any:
        """An OpenAI-style chat completion of ``messages`` (rendered with the
        model's chat template). ``stream=True`` returns an iterator of
        ``chat.completion.chunk`` dicts (``choices[0]["delta"]["content"]``;
        the first delta carries the role, the last the ``finish_reason``
        and ``usage``); ``stream=False`` one ``chat.completion`` dict with
        ``usage``. finish_reason is "stop", "length" or "tool_calls" (the
        answer called tools and ended); lmstream's own reason is
        ``choices[0]["native_finish_reason"]``. Other keywords are
        generate()'s (max_tokens, temperature, stop, ...);
        ``logprobs=True`` (and ``top_logprobs=k``, up to 20) fill
        ``choices[0]["logprobs"]`` as OpenAI does: ``{"content": [{"token",
        "logprob", "bytes", "top_logprobs"}, ...]}`` for the tokens of each
        delta (the end token left out), else None. Errors raise; leaving
        the iterator early cancels the request.

        Tools, as OpenAI's API has them: ``tools`` ([{"type": "function",
        "function": {"name", "description", "parameters"}}]),
        ``tool_choice`` ("auto", "none", "required" or {"type":
        "function", "function": {"name": ...}}: the last two constrain the
        output to calls whose arguments follow the schema),
        ``parallel_tool_calls`` (False: at most one call). The message then
        has ``tool_calls`` ([{"id", "type": "function", "function":
        {"name", "arguments": JSON text}}]; ``content`` None when the answer
        is only calls); streamed, each call comes as a delta with its
        index, id and name, then one with its arguments. Append the message
        as returned and a {"role": "tool", "tool_call_id", "content"} per
        call to continue. ``reasoning_format`` ("auto": a thinking model's
        reasoning arrives apart, as ``reasoning_content``; "none": left in
        the content) and ``chat_template_kwargs`` (further template
        variables, {"enable_thinking": False}) shape the chat too."""
        from .completions import chat_completion
        return chat_completion(self, messages, _bool("stream", stream), _chat_kw(
            kw, tools, tool_choice, parallel_tool_calls, reasoning_format, chat_template_kwargs))

    def create_completion(self, prompt: str, *, stream: bool = False, **kw: Any) -> Any:
        """An OpenAI-style text completion: ``prompt`` is raw text, sent
        without the chat template. ``text_completion`` dicts with
        ``choices[0]["text"]``, streamed or whole as create_chat_completion."""
        from .completions import completion
        return completion(self, _str("prompt", prompt), _bool("stream", stream), kw)

    async def acreate_chat_completion(self, messages: Sequence[Message], *, stream: bool = False,
                                      tools: Optional[Sequence[Mapping[str, Any]]] = None,
                                      tool_choice: Union[str, Mapping[str, Any], None] = None,
                                      parallel_tool_calls: Optional[bool] = None,
                                      reasoning_format: Optional[str] = None,
                                      chat_template_kwargs: Optional[Mapping[str, Any]] = None,
                                      **kw: Any) -> Any:
        """create_chat_completion for asyncio, as OpenAI's AsyncClient does
        it: ``await`` gives the ``chat.completion`` dict, or with
        ``stream=True`` an async iterator of chunk dicts (``async for``)
        that waits without blocking the event loop."""
        from .completions import achat_completion
        return await achat_completion(self, messages, _bool("stream", stream), _chat_kw(
            kw, tools, tool_choice, parallel_tool_calls, reasoning_format, chat_template_kwargs))

    async def acreate_completion(self, prompt: str, *, stream: bool = False, **kw: Any) -> Any:
        """create_completion for asyncio, as acreate_chat_completion."""
        from .completions import acompletion
        return await acompletion(self, _str("prompt", prompt), _bool("stream", stream), kw)

    # ---- introspection --------------------------------------------------

    def _read(self, call: Any, start: int = 256) -> bytes:
        """Runs call(buf, size, len_out, err, err_size) with the header's
        buffer protocol: grow to the length it asks for and call again."""
        h = self._handle()
        size = start
        n = ctypes.c_size_t()
        err = _err_buf()
        while True:
            buf = ctypes.create_string_buffer(size)
            rc = call(h, buf, size, n, err)
            if rc == LMS_OK:
                return buf.raw[:n.value]
            if rc == _lib.LMS_ERR_BUFFER_TOO_SMALL and n.value + 1 > size:
                size = n.value + 1
                continue
            raise self._fail(rc, err)

    def tokenize(self, text: Union[str, bytes], *, add_special: bool = True,
                 parse_special: bool = True) -> List[int]:
        """The token ids of text. The defaults tokenize as a submitted
        ``prompt`` is (the model's BOS when it adds one; control-token texts
        such as "<|im_start|>" become their ids), so ``len(tokenize(p))`` is
        the prompt_tokens of ``generate(p)``."""
        raw, flags = self._tok_args(text, add_special, parse_special)
        h = self._handle()
        cap = max(16, len(raw) // 2 + 8)
        n = ctypes.c_size_t()
        err = _err_buf()
        while True:
            ids = (ctypes.c_int32 * cap)()
            rc = lib.lms_tokenize(h, raw, len(raw), flags, ids, cap, n, err, _ERR_SIZE)
            if rc == LMS_OK:
                return ids[:n.value]
            if rc == _lib.LMS_ERR_BUFFER_TOO_SMALL and n.value > cap:
                cap = n.value
                continue
            raise self._fail(rc, err)

    def count_tokens(self, text: Union[str, bytes], *, add_special: bool = True,
                     parse_special: bool = True) -> int:
        """len(tokenize(text, ...)), without building the list."""
        raw, flags = self._tok_args(text, add_special, parse_special)
        n = ctypes.c_size_t()
        err = _err_buf()
        rc = lib.lms_count_tokens(self._handle(), raw, len(raw), flags, n, err, _ERR_SIZE)
        if rc != LMS_OK:
            raise self._fail(rc, err)
        return n.value

    @staticmethod
    def _tok_args(text: object, add_special: object, parse_special: object) -> "tuple[bytes, int]":
        if isinstance(text, str):
            raw = _utf8(text)
        elif isinstance(text, (bytes, bytearray)):
            raw = bytes(text)
        else:
            raise InvalidType(f"text must be a str or bytes, got {_type_name(text)}")
        flags = ((_lib.LMS_TOKENIZE_ADD_SPECIAL if _bool("add_special", add_special) else 0)
                 | (_lib.LMS_TOKENIZE_PARSE_SPECIAL if _bool("parse_special", parse_special) else 0))
        return raw, flags

    def detokenize_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> bytes:
        """The raw bytes of the pieces of ids (possibly cutting a character
        in two, where a token boundary does)."""
        ids = [_int(f"ids[{i}]", x, 0, 2**31 - 1) for i, x in enumerate(_int_list("ids", ids))]
        arr = (ctypes.c_int32 * len(ids))(*ids) if ids else None
        flags = _lib.LMS_DETOKENIZE_SKIP_SPECIAL if _bool("skip_special", skip_special) else 0
        return self._read(lambda h, buf, size, n, err: lib.lms_detokenize(
            h, arr, len(ids), flags, buf, size, n, err, _ERR_SIZE), 4 * len(ids) + 16)

    def detokenize(self, ids: Sequence[int], *, skip_special: bool = False) -> str:
        """The text of ids: detokenize_bytes decoded as UTF-8, a U+FFFD for
        each invalid part (as a stream's chunks do)."""
        return self.detokenize_bytes(ids, skip_special=skip_special).decode("utf-8", "replace")

    def model_info(self) -> Dict[str, Any]:
        """The model's metadata (lms_model_info): architecture, name,
        context_length (trained), runtime_context_length, vocab_size, bos
        and eos ({"id", "text", "end_of_generation"} or None),
        special_tokens (a list of those), chat_template (the text that
        renders messages) and chat_renderer ("jinja", a fallback family, or
        "")."""
        raw = self._read(lambda h, buf, size, n, err: lib.lms_model_info(h, buf, size, n), 4096)
        info: Dict[str, Any] = json.loads(raw)
        return info

    def render_chat(self, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                    tools: Optional[Sequence[Mapping[str, Any]]] = None,
                    tool_choice: Optional[Union[str, Mapping[str, Any]]] = None,
                    chat_template_kwargs: Optional[Mapping[str, Any]] = None) -> str:
        """The prompt text ``generate(messages=...)`` feeds the model: the
        messages rendered with the model's chat template (or the runtime
        config's ``chat_template``). With ``tools``, ``tool_choice`` and
        ``chat_template_kwargs`` (as generate takes them) it is the exact
        prompt of such a request, and fails as the request would (a
        template that ignores tools raises InvalidRequest)."""
        req: Dict[str, Any] = {"messages": _messages(messages),
                               "add_generation_prompt": _bool("add_generation_prompt", add_generation_prompt)}
        for k, v in (("tools", tools), ("tool_choice", tool_choice),
                     ("chat_template_kwargs", chat_template_kwargs)):
            if v is not None:
                req[k] = _CHAT_FIELDS[k](k, v)
        data = _dumps(req, "request")
        raw = self._read(lambda h, buf, size, n, err: lib.lms_render_chat(
            h, data, buf, size, n, err, _ERR_SIZE), 1024)
        return raw.decode("utf-8")


    def stats(self) -> Dict[str, int]:
        """The runtime's counters (lms_runtime_stats): max_slots,
        active_slots, queued, submitted, finished, tokens_generated,
        iterations, kv_bytes_in_use and kv_bytes_limit (the memory the KV
        caches hold now and may take)."""
        h = self._handle()
        size = 512
        n = ctypes.c_size_t()
        while True:
            buf = ctypes.create_string_buffer(size)
            rc = lib.lms_runtime_stats(h, buf, size, n)
            if rc == LMS_OK:
                stats: Dict[str, int] = json.loads(buf.value)
                return stats
            if rc == _lib.LMS_ERR_BUFFER_TOO_SMALL:
                size = n.value + 1
                continue
            raise self._fail(rc, buf)

    def __repr__(self) -> str:
        what = self.config.get("model_path") or self.config.get("backend", "cpu")
        return f"<lmstream.Runtime {what!s} {'closed' if self._h == 0 else 'open'}>"


def configure_process(*, threads: Optional[int] = None, gc_percent: Optional[int] = None,
                      memory_limit_bytes: Optional[int] = None) -> None:
    """Process-wide settings of the library's Go runtime: engine threads
    (GOMAXPROCS), GC percent, soft memory limit."""
    _check_forked()
    s: Dict[str, Any] = {}
    if threads is not None:
        s["threads"] = _int("threads", threads, 1, 1024)
    if gc_percent is not None:
        s["gc_percent"] = _int("gc_percent", gc_percent)
    if memory_limit_bytes is not None:
        s["memory_limit_bytes"] = _int("memory_limit_bytes", memory_limit_bytes, 1)
    err = _err_buf()
    rc = lib.lms_configure_process(_dumps(s, "settings"), err, _ERR_SIZE)
    if rc != LMS_OK:
        _raise(rc, err)


@atexit.register
def _shutdown() -> None:
    """Interpreter exit: cancel every open stream and stop every runtime."""
    if _lib.FORKED:
        return
    for s in list(_live_streams):
        try:
            s.close()
        except Exception:
            pass
    for rt in list(_live_runtimes):
        try:
            rt.close()
        except Exception:
            pass

