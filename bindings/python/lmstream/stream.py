"""Streams and chunks: reading a channel from Python threads and asyncio."""
from __future__ import annotations

import asyncio
import ctypes
import enum
import operator
import struct
import threading
import time
import weakref
from itertools import repeat
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from . import _lib
from ._lib import (
    LMS_DONE,
    LMS_EMPTY,
    LMS_ERR_BUFFER_TOO_SMALL,
    LMS_ERR_CLOSED,
    LMS_ERR_INVALID_HANDLE,
    LMS_OK,
    LmsChunk,
    lib,
)
from .errors import ChannelClosed, ForkedProcess, LmstreamError, error_for

if TYPE_CHECKING:  # pragma: no cover
    from .runtime import Runtime

__all__ = ["FinishReason", "QueuePolicy", "Usage", "Chunk", "Stream", "StreamState", "Reply", "ToolCallDelta"]

#: How long one blocking wait lasts before Python gets control back (signal
#: handlers, KeyboardInterrupt). The wait loops until a chunk arrives.
WAIT_SLICE_MS = 50


class FinishReason(enum.IntEnum):
    """Why a stream ended (LMS_FINISH_*)."""

    NOT_FINISHED = 0
    END_ID = 1
    LENGTH = 2
    CANCELLED = 3
    ERROR = 4
    STOP_WORDS = 5

    @property
    def ident(self) -> str:
        """The snake-case name ("end_id", "stop_words"), as the library and
        the conformance vectors spell it."""
        return self.name.lower()

    def __str__(self) -> str:
        return self.ident


class QueuePolicy(enum.IntEnum):
    """What a full channel queue does (LMS_QUEUE_*)."""

    COALESCE = 0  #: merge new deltas into the last queued chunk
    PAUSE = 1  #: the request stops decoding until the consumer drains


class Usage(NamedTuple):
    """Usage of a finished stream (carried by its terminal chunk)."""

    prompt_tokens: int
    generated_tokens: int
    ttft_ms: float
    tpot_ms: float
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    verify_passes: int
    #: Prompt tokens found in the prefix cache, not prefilled again (ABI 4).
    cached_tokens: int = 0


class Logprob(NamedTuple):
    """A token and its log-probability (natural log). ``bytes`` is the
    token's piece, which may be part of a character."""

    token_id: int
    logprob: float
    bytes: bytes

    def to_dict(self) -> Dict[str, Any]:
        """OpenAI's shape: token (the piece as text, U+FFFD for a split
        character), logprob, bytes (a list of ints), plus token_id."""
        return {"token": self.bytes.decode("utf-8", "replace"), "logprob": self.logprob,
                "bytes": list(self.bytes), "token_id": self.token_id}


class TokenLogprob(NamedTuple):
    """A generated token's log-probability and the most likely tokens at
    its position (``top``, most likely first), for requests with
    ``logprobs=True`` (and ``top_logprobs=k``). See lms_token_logprob in
    lmstream.h for what the values are: the log-softmax of the model's
    logits after penalties, at temperature 1."""

    token_id: int
    logprob: float
    bytes: bytes
    top: List[Logprob]

    def to_dict(self) -> Dict[str, Any]:
        """OpenAI's shape, as Logprob.to_dict, with top_logprobs."""
        d = Logprob(self.token_id, self.logprob, self.bytes).to_dict()
        d["top_logprobs"] = [t.to_dict() for t in self.top]
        return d


def _read_logprobs(c: "_lib.LmsChunk") -> List[TokenLogprob]:
    """Copies a chunk's lms_token_logprob array out of the pop buffer."""
    at = ctypes.string_at
    out = []
    for i in range(c.n_logprobs):
        lp = c.logprobs[i]
        top = [Logprob(t.token_id, t.logprob, at(t.bytes, t.n_bytes) if t.n_bytes else b"")
               for t in (lp.top[k] for k in range(lp.n_top))]
        out.append(TokenLogprob(lp.token_id, lp.logprob, at(lp.bytes, lp.n_bytes) if lp.n_bytes else b"", top))
    return out


class ToolCallDelta(NamedTuple):
    """Part of a tool call the model made (lms_tool_call_delta): a call's
    first delta has its ``id`` ("call_...") and ``name`` and the arguments
    so far; later deltas with the same ``index`` and an empty ``id`` add
    more ``arguments`` (JSON text, whole once the call is)."""

    # The field shadows tuple.index, as OpenAI's name for it asks.
    index: int  # type: ignore[assignment]
    id: str
    name: str
    arguments: str

    def to_dict(self) -> Dict[str, Any]:
        return {"index": self.index, "id": self.id, "name": self.name, "arguments": self.arguments}


class Reply(NamedTuple):
    """A chunk's share of the parsed answer, for requests that parse it (a
    chat with ``tools``, or a model whose template thinks): the answer's
    ``content``, the model's ``reasoning`` (OpenAI's reasoning_content) and
    the ``tool_calls`` deltas. Markers such as ``<tool_call>`` belong to
    none of them; the chunk's ``text`` keeps the raw output."""

    content: str
    reasoning: str
    tool_calls: List[ToolCallDelta]

    def to_dict(self) -> Dict[str, Any]:
        return {"content": self.content, "reasoning": self.reasoning,
                "tool_calls": [t.to_dict() for t in self.tool_calls]}

    @classmethod
    def join(cls, parts: Iterable[Optional["Reply"]]) -> "Reply":
        """The whole reply of a stream's chunks' replies (None ones are
        skipped): contents and reasonings concatenated, and each call's
        deltas assembled into one ToolCallDelta with its whole arguments. A
        delta with an id, or an index not seen yet, begins a call; one
        without adds to the call of its index."""
        content: List[str] = []
        reasoning: List[str] = []
        calls: List[List[Any]] = []  # [index, id, name, [argument parts]]
        at: Dict[int, int] = {}  # index -> position in calls
        for r in parts:
            if r is None:
                continue
            content.append(r.content)
            reasoning.append(r.reasoning)
            for d in r.tool_calls:
                if d.id or d.index not in at:
                    at[d.index] = len(calls)
                    calls.append([d.index, d.id, d.name, [d.arguments]])
                else:
                    calls[at[d.index]][3].append(d.arguments)
        return cls("".join(content), "".join(reasoning),
                   [ToolCallDelta(i, ident, name, "".join(args)) for i, ident, name, args in calls])


def _read_reply(c: "_lib.LmsChunk") -> Reply:
    """Copies a chunk's parsed reply out of the pop buffer."""
    at = ctypes.string_at
    calls = []
    for i in range(c.n_tool_calls):
        t = c.tool_calls[i]
        calls.append(ToolCallDelta(
            t.index, at(t.id).decode("utf-8", "replace") if t.id else "",
            at(t.name).decode("utf-8", "replace") if t.name else "",
            at(t.arguments, t.arguments_len).decode("utf-8", "replace") if t.arguments_len else ""))
    content = at(c.content, c.content_len).decode("utf-8", "replace") if c.content_len else ""
    reasoning = at(c.reasoning, c.reasoning_len).decode("utf-8", "replace") if c.reasoning_len else ""
    return Reply(content, reasoning, calls)


class StreamState(NamedTuple):
    finished: bool
    reason: FinishReason
    pending: int


_REASONS = tuple(FinishReason)
_NOT_FINISHED = FinishReason.NOT_FINISHED

# The lms_chunk array is read through a memoryview of 64-bit words instead
# of ctypes attribute access: word 0 is the ids pointer, 1 the number of ids,
# 2 the text pointer, 3 the text length, 4 finished (low half) and reason
# (high half), 5 error code and batch index, 6 the message pointer, then
# the usage (read only for the terminal chunk).
_SZ = ctypes.sizeof(LmsChunk)
_W = _SZ // 8
_USAGE_OFF = LmsChunk.usage.offset
_USAGE = struct.Struct("@qqddqqqq")
_TAIL = struct.Struct("@iiiiP")  # finished, reason, error code, batch index, message
assert _SZ % 8 == 0 and _USAGE.size == ctypes.sizeof(_lib.LmsUsage)
assert [LmsChunk.token_ids.offset, LmsChunk.n_token_ids.offset, LmsChunk.text.offset,
        LmsChunk.text_len.offset, LmsChunk.finished.offset] == [0, 8, 16, 24, 32]
_LPW = LmsChunk.n_logprobs.offset // 8  # the word holding n_logprobs
_RPW = LmsChunk.has_reply.offset // 8  # the word holding has_reply (low half)
assert LmsChunk.has_reply.offset % 8 == 0
_I32 = struct.Struct("@i")
_new = tuple.__new__


class Chunk(tuple):  # type: ignore[type-arg]  # a tuple of mixed items, named by property
    """One delta of a stream: the tokens the engine accepted since the
    previous chunk and the text they completed.

    ``token_ids`` (list of int, special tokens included), ``text`` (str,
    always whole characters), ``finished`` (True on the terminal chunk only),
    ``reason`` (a FinishReason), ``usage`` (a Usage, on the terminal chunk),
    ``error`` (an LmstreamError when the stream failed, else None),
    ``logprobs`` (a list of TokenLogprob, one per token id, when the request
    asked for them with ``logprobs=True`` and the chunk has token ids; else
    None), ``reply`` (a Reply: this chunk's content, reasoning and tool
    call deltas, on every chunk of a request that parses its answer, a chat
    with ``tools`` or a thinking model's; else None).

    A chunk keeps the bytes it was popped with and decodes its text and ids
    when they are read, so a consumer pays only for what it looks at. (It is
    a tuple underneath, for speed; use the attributes, not the items.)
    """

    __slots__ = ()

    # Items: payload bytes, the address they were copied from, the ids
    # pointer, the number of ids, the text length (the text follows the
    # ids). Terminal chunks add reason, usage and error; chunks with
    # logprobs or a reply add them after those (see _with_extras).
    finished = False
    reason = _NOT_FINISHED
    usage: Optional[Usage] = None
    error: Optional[LmstreamError] = None
    logprobs: Optional[List[TokenLogprob]] = None
    reply: Optional[Reply] = None

    @classmethod
    def make(cls, token_ids: Sequence[int] = (), text: str = "", finished: bool = False,
             reason: FinishReason = _NOT_FINISHED, usage: Optional[Usage] = None,
             error: Optional[LmstreamError] = None,
             logprobs: Optional[Sequence[TokenLogprob]] = None,
             reply: Optional[Reply] = None) -> "Chunk":
        """A chunk built from values (for tests and synthetic streams)."""
        ids = list(token_ids)
        raw = text.encode("utf-8")
        data = struct.pack("@%di" % len(ids), *ids) + raw
        if finished:
            c: Chunk = _new(_Terminal, (data, 0, 0, len(ids), len(raw), FinishReason(reason), usage, error))
        else:
            c = _new(Chunk, (data, 0, 0, len(ids), len(raw)))
        if logprobs is None and reply is None:
            return c
        return _with_extras(c, None if logprobs is None else list(logprobs), reply)

    @property
    def token_ids(self) -> List[int]:
        n = self[3]
        if n == 1:
            return [_I32.unpack_from(self[0], self[2] - self[1])[0]]
        if n == 0:
            return []
        o = self[2] - self[1]
        return memoryview(self[0])[o:o + 4 * n].cast("i").tolist()

    @property
    def text(self) -> str:
        o = self[2] - self[1] + 4 * self[3]
        text: str = self[0][o:o + self[4]].decode("utf-8", "replace")
        return text

    def _text_bytes(self) -> bytes:
        """The text as the library sent it (tests check it is UTF-8)."""
        o = self[2] - self[1] + 4 * self[3]
        raw: bytes = self[0][o:o + self[4]]
        return raw

    @property
    def error_code(self) -> int:
        """The LMS_ERR_* code of a failed stream's terminal chunk, else 0."""
        e = self.error
        return e.code if e is not None else 0

    def to_dict(self) -> Dict[str, Any]:
        """The chunk as plain data that json.dumps accepts: token_ids, text,
        finished, and on the terminal chunk reason (its snake-case name, as
        lms_finish_reason_name gives it), usage (a dict) and error (None or
        {"code", "message"})."""
        d: Dict[str, Any] = {"token_ids": self.token_ids, "text": self.text,
                             "finished": self.finished}
        if self.logprobs is not None:
            d["logprobs"] = [lp.to_dict() for lp in self.logprobs]
        if self.reply is not None:
            d["reply"] = self.reply.to_dict()
        if self.finished:
            d["reason"] = self.reason.ident
            d["usage"] = self.usage._asdict() if self.usage is not None else None
            e = self.error
            d["error"] = None if e is None else {"code": e.code, "message": str(e)}
        return d

    def __repr__(self) -> str:
        extra = ""
        if self.finished:
            extra = f", finished=True, reason={self.reason.ident}"
            if self.error is not None:
                extra += f", error={self.error!r}"
        if self.reply is not None:
            extra = f", reply={self.reply!r}" + extra
        return f"Chunk(token_ids={self.token_ids!r}, text={self.text!r}{extra})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Chunk):
            return NotImplemented
        return (self.token_ids == other.token_ids and self.text == other.text
                and self.finished == other.finished and self.reason == other.reason
                and self.error_code == other.error_code and self.logprobs == other.logprobs
                and self.reply == other.reply)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return True

    def __reduce__(self) -> "Tuple[Callable[..., Chunk], Tuple[object, ...]]":  # copy and pickle by value
        return (_make_chunk, (self.token_ids, self.text, self.finished, self.reason,
                              self.usage, self.error, self.logprobs, self.reply))


def _make_chunk(*args: object) -> Chunk:
    return Chunk.make(*args)  # type: ignore[arg-type]


class _Terminal(Chunk):
    __slots__ = ()
    finished = True
    reason = property(operator.itemgetter(5))
    usage = property(operator.itemgetter(6))
    error = property(operator.itemgetter(7))


# Chunks with logprobs or a reply are these classes, so that a chunk
# without them stays the plain five- (or eight-) item tuple: the extras
# follow the base items, logprobs first.
class _Logprobs(Chunk):
    """A chunk of a request with logprobs: they are item 5."""
    __slots__ = ()
    logprobs = property(operator.itemgetter(5))


class _Reply(Chunk):
    """A chunk of a request that parses its reply: it is item 5."""
    __slots__ = ()
    reply = property(operator.itemgetter(5))


class _LogprobsReply(Chunk):
    __slots__ = ()
    logprobs = property(operator.itemgetter(5))
    reply = property(operator.itemgetter(6))


class _TerminalLogprobs(_Terminal):
    __slots__ = ()
    logprobs = property(operator.itemgetter(8))


class _TerminalReply(_Terminal):
    __slots__ = ()
    reply = property(operator.itemgetter(8))


class _TerminalLogprobsReply(_Terminal):
    __slots__ = ()
    logprobs = property(operator.itemgetter(8))
    reply = property(operator.itemgetter(9))


# (terminal, has logprobs, has reply) -> class.
_EXTRAS = {
    (False, True, False): _Logprobs, (False, False, True): _Reply, (False, True, True): _LogprobsReply,
    (True, True, False): _TerminalLogprobs, (True, False, True): _TerminalReply,
    (True, True, True): _TerminalLogprobsReply,
}


def _with_extras(c: Chunk, lps: Optional[List[TokenLogprob]], reply: Optional[Reply]) -> Chunk:
    """c (a chunk without extras) with logprobs and/or a reply (not both None)."""
    fin = c.finished
    items = tuple(c[:8] if fin else c[:5])
    if lps is not None:
        items += (lps,)
    if reply is not None:
        items += (reply,)
    return _new(_EXTRAS[fin, lps is not None, reply is not None], items)


class _Scratch:
    """Per-thread buffers for lms_channel_pop_batch: the chunk structs and
    the payload (ids and text). Parsed chunks copy what they need, so one
    set per thread serves every stream that thread reads."""

    __slots__ = ("cap", "chunks", "cmv", "words", "size", "buf", "addr", "nout")

    def __init__(self, cap: int = 1024, size: int = 1 << 16) -> None:
        self.cap = cap
        self.chunks = (LmsChunk * cap)()
        self.cmv = memoryview(self.chunks).cast("B")
        self.words = self.cmv.cast("Q")
        self.nout = ctypes.c_size_t()
        self.grow(size)

    def grow(self, size: int) -> None:
        self.buf = ctypes.create_string_buffer(size)
        self.size = size
        self.addr = ctypes.addressof(self.buf)


_tls = threading.local()


def _scratch() -> _Scratch:
    try:
        s: _Scratch = _tls.s
        return s
    except AttributeError:
        s = _tls.s = _Scratch()
        return s


_pop_batch = lib.lms_channel_pop_batch
_release = lib.lms_channel_release
_cancel = lib.lms_channel_cancel

# Every stream not yet closed, so interpreter exit can release them.
_live: "weakref.WeakSet[Stream]" = weakref.WeakSet()


class Stream:
    """One stream of chunks (one channel of a request).

    Iterate it (``for chunk in stream`` or ``async for chunk in stream``),
    collect it (``stream.text()``, ``await stream.atext()``) or read it in
    batches (``stream.read()``). Leaving a loop early, ``close()``, the end
    of a ``with`` block, garbage collection and interpreter exit cancel the
    request and release the channel.

    A stream is meant to be read by one consumer at a time; ``close()`` and
    ``cancel()`` may be called from any thread.
    """

    def __init__(self, runtime: "Runtime", handle: int, index: int = 0,
                 raise_on_error: bool = True) -> None:
        self._rt = runtime
        self._h = handle
        self._done = False  # the terminal chunk was popped
        self._closed = False  # closed by the user before the end
        self._fd = -1
        # (loop, future, fd) while a task waits on the descriptor.
        self._waiter: Optional[Tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]", int]] = None
        self._raise = raise_on_error
        self._release_at_end = True
        self.index = index
        #: The terminal chunk, once popped.
        self.final: Optional[Chunk] = None
        _live.add(self)

    # ---- state -------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Whether the terminal chunk has been received."""
        return self._done

    @property
    def reason(self) -> FinishReason:
        return self.final.reason if self.final is not None else _NOT_FINISHED

    @property
    def usage(self) -> Optional[Usage]:
        return self.final.usage if self.final is not None else None

    @property
    def closed(self) -> bool:
        """Whether the channel is released (after the end, or by close())."""
        return self._h == 0

    def state(self) -> StreamState:
        """The library's view: finished (the terminal chunk was pushed, maybe
        not popped yet), its reason, and the number of queued chunks."""
        h = self._live_handle()
        fin, reason, pending = ctypes.c_int(), ctypes.c_int(), ctypes.c_size_t()
        rc = lib.lms_channel_state(h, fin, reason, pending)
        if rc < 0:
            raise self._error(rc)
        return StreamState(bool(fin.value), FinishReason(reason.value), pending.value)

    def fileno(self) -> int:
        """The channel's readiness descriptor (readable while chunks are
        pending or the stream is finished), for select/poll/epoll."""
        h = self._live_handle()
        if self._fd < 0:
            fd = ctypes.c_int()
            rc = lib.lms_channel_fd(h, fd)
            if rc < 0:
                raise self._error(rc)
            self._fd = fd.value
        return self._fd

    # ---- control -----------------------------------------------------

    def cancel(self) -> None:
        """Asks the runtime to stop the request; the stream still delivers
        the text produced so far and then its terminal chunk (reason
        CANCELLED). Idempotent, from any thread."""
        h = self._h
        if h and not _lib.FORKED:
            _cancel(h)

    def close(self) -> None:
        """Cancels the request if it still runs and releases the channel.
        Idempotent, from any thread; a consumer blocked in a wait (a thread,
        or a task in another thread's event loop) returns."""
        h = self._h
        if not h:
            return
        w = self._waiter
        if w is not None:
            loop, fut, fd = w
            if asyncio._get_running_loop() is not loop:
                # The descriptor is registered in that loop: cancel now and
                # let the loop's thread unregister it before it is closed.
                if not _lib.FORKED:
                    _cancel(h)
                try:
                    loop.call_soon_threadsafe(self.close)
                    return
                except RuntimeError:  # that loop is closed
                    pass
            else:
                self._waiter = None
                loop.remove_reader(fd)
                _wake(fut)
        self._h = 0
        if not self._done:
            self._closed = True
        if not _lib.FORKED:
            _release(h)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h:
                self.close()
        except Exception:  # interpreter shutdown: the module may be gone
            pass

    # ---- reading -----------------------------------------------------

    def _live_handle(self) -> int:
        if _lib.FORKED:
            raise ForkedProcess("lmstream cannot be used in a child process after fork()")
        h = self._h
        if not h:
            raise ChannelClosed("the stream is closed")
        return h

    def _error(self, rc: int) -> LmstreamError:
        if rc == LMS_ERR_INVALID_HANDLE and self._h == 0:
            return ChannelClosed("the stream is closed")
        return error_for(rc)

    def _pop(self, timeout_ms: int) -> Optional[List[Chunk]]:
        """One lms_channel_pop_batch: the chunks popped, [] when none came
        before the timeout, None when the stream is over (its terminal chunk
        was popped or the stream was closed)."""
        if _lib.FORKED:
            raise ForkedProcess("lmstream cannot be used in a child process after fork()")
        h = self._h
        if not h:
            return None
        sc = _scratch()
        while True:
            rc = _pop_batch(h, sc.chunks, sc.cap, sc.addr, sc.size, timeout_ms, sc.nout)
            if rc == LMS_OK:
                break
            if rc == LMS_EMPTY:
                return []
            if rc == LMS_ERR_BUFFER_TOO_SMALL:
                sc.grow(max(2 * sc.size, sc.nout.value + 64))
                continue
            if rc == LMS_DONE:
                self._done = True
                return None
            if self._h == 0 or rc == LMS_ERR_CLOSED:
                return None  # closed by another thread while we waited
            raise error_for(rc)
        n = sc.nout.value
        base = sc.addr
        w = sc.words
        k = _W * (n - 1)  # the last chunk's first word
        data = sc.buf[:w[k] - base + 4 * w[k + 1] + w[k + 3]]
        end = _W * n
        out = list(map(_new, repeat(Chunk, n), zip(repeat(data, n), repeat(base, n),
                                                   w[0:end:_W], w[1:end:_W], w[3:end:_W])))
        lps = replies = None
        # Logprobs and replies are copied out now (buf is reused); chunks
        # without them take neither branch.
        if any(w[_LPW:end:_W]):
            lps = [_read_logprobs(sc.chunks[i]) if w[_W * i + _LPW] else None for i in range(n)]
        # A request's chunks all carry a reply or none does (a stream that
        # parses its reply gives one to every chunk), so the first and the
        # last chunk say, without a pass over the others. has_reply is the
        # low half of its word.
        if (w[_RPW] | w[k + _RPW]) & 0xFFFFFFFF:
            replies = [_read_reply(sc.chunks[i]) if w[_W * i + _RPW] & 0xFFFFFFFF else None for i in range(n)]
        if w[k + 4] & 0xFFFFFFFF:
            out[-1] = self._terminal(out[-1], sc, n - 1)
        if lps is not None or replies is not None:
            none: List[Any] = [None] * n
            out = [c if lp is None and r is None else _with_extras(c, lp, r)
                   for c, lp, r in zip(out, none if lps is None else lps, none if replies is None else replies)]
            last = out[-1]
            if last.finished:
                self.final = last
                if last.error is not None:
                    last.error.chunk = last
        return out

    def _terminal(self, c: Chunk, sc: _Scratch, i: int) -> Chunk:
        fin, reason, code, _, msg_ptr = _TAIL.unpack_from(sc.cmv, i * _SZ + 32)
        reason = _REASONS[reason] if 0 <= reason < len(_REASONS) else FinishReason.ERROR
        usage = Usage(*_USAGE.unpack_from(sc.cmv, i * _SZ + _USAGE_OFF))
        err = None
        if code or reason == FinishReason.ERROR:
            msg = ctypes.string_at(msg_ptr).decode("utf-8", "replace") if msg_ptr else ""
            err = error_for(code or _lib.LMS_ERR_INTERNAL, msg)
        t = _new(_Terminal, (c[0], c[1], c[2], c[3], c[4], reason, usage, err))
        if err is not None:
            err.chunk = t
        self.final = t
        self._done = True
        if self._release_at_end:
            h = self._h
            self._h = 0
            if h:
                _release(h)
        return t

    def read(self, timeout: Optional[float] = None) -> List[Chunk]:
        """Every chunk pending now, waiting up to ``timeout`` seconds (None:
        as long as it takes) for the first. [] after a timeout, and once the
        stream is over. Error terminal chunks are returned, not raised."""
        if timeout is not None:
            if timeout <= 0:
                return self._pop(0) or []
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                ms = int(min(left * 1000, WAIT_SLICE_MS)) if left > 0 else 0
                got = self._pop(ms)
                if got is None:
                    return []
                if got or left <= 0:
                    return got
        while True:
            got = self._pop(WAIT_SLICE_MS)
            if got is None:
                return []
            if got:
                return got

    def __iter__(self) -> Iterator[Chunk]:
        """The chunks, up to and including the terminal one. An error
        terminal chunk is raised as its exception (with ``.chunk`` set)
        unless the stream was made with raise_on_error=False."""
        finished = False
        try:
            while True:
                got = self._pop(WAIT_SLICE_MS)
                if got is None:
                    finished = True
                    return
                if not got:
                    continue
                last = got[-1]
                if last.error is not None and self._raise:
                    yield from got[:-1]
                    finished = True
                    raise last.error
                yield from got
                if last.finished:
                    finished = True
                    return
        finally:
            if not finished:
                self.close()

    def text(self) -> str:
        """The whole answer (blocking). A failed stream raises its error,
        whose ``.chunk`` is the terminal chunk and ``.partial_text`` the text
        received before it (raise_on_error=False returns the text instead)."""
        parts: List[str] = []
        try:
            for c in self:
                parts.append(c.text)
        except LmstreamError as e:
            if e.chunk is not None:
                parts.append(e.chunk.text)
            e.partial_text = "".join(parts)  # type: ignore[attr-defined]
            raise
        return "".join(parts)

    # ---- asyncio -----------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return _AsyncIter(self)

    async def atext(self) -> str:
        """``text()`` for asyncio."""
        parts: List[str] = []
        try:
            async for c in self:
                parts.append(c.text)
        except LmstreamError as e:
            if e.chunk is not None:
                parts.append(e.chunk.text)
            e.partial_text = "".join(parts)  # type: ignore[attr-defined]
            raise
        return "".join(parts)

    async def _apop(self) -> Optional[List[Chunk]]:
        """The next chunks, waiting on the channel's descriptor in the
        running event loop; None when the stream is over."""
        while True:
            got = self._pop(0)
            if got is None or got:
                return got
            if not self._h:
                return None
            fd = self.fileno()
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            try:
                loop.add_reader(fd, _wake, fut)
            except OSError:
                if not self._h:  # closed by another thread meanwhile
                    return None
                raise
            w = self._waiter = (loop, fut, fd)
            if not self._h:
                self._waiter = None
                loop.remove_reader(fd)
                return None
            try:
                await fut
            finally:
                if self._waiter is w:
                    self._waiter = None
                    loop.remove_reader(fd)

    def __repr__(self) -> str:
        state = "finished" if self._done else ("closed" if self._h == 0 else "open")
        return f"<lmstream.Stream {state} index={self.index}>"


def _wake(fut: "asyncio.Future[None]") -> None:
    if not fut.done():
        fut.set_result(None)


class _AsyncIter:
    """``async for`` over a stream. Dropping it before the end (a break, a
    cancelled task, an exception) closes the stream."""

    __slots__ = ("_s", "_got", "_i", "_end")

    def __init__(self, s: Stream) -> None:
        self._s = s
        self._got: List[Chunk] = []
        self._i = 0
        self._end = False

    def __aiter__(self) -> "_AsyncIter":
        return self

    async def __anext__(self) -> Chunk:
        got, i = self._got, self._i
        if i >= len(got):
            if self._end:
                raise StopAsyncIteration
            try:
                new = await self._s._apop()
            except BaseException:
                self._end = True
                self._s.close()
                raise
            if new is None:
                self._end = True
                raise StopAsyncIteration
            self._got = got = new
            self._i = i = 0
        c = got[i]
        self._i = i + 1
        if c.finished:
            self._end = True
            if c.error is not None and self._s._raise:
                raise c.error
        return c

    def __del__(self) -> None:
        try:
            if not self._end:
                self._s.close()
        except Exception:
            pass
