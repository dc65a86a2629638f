"""OpenAI-shaped completions over Runtime.generate.

Code written against OpenAI's API (or llama-cpp-python's) expects dicts:
``choices[0].delta.content`` in a stream, ``finish_reason`` of "stop" or
"length". These functions build exactly those from a Stream, and keep
lmstream's own reason beside it (``native_finish_reason``: "end_id",
"stop_words", "length", "cancelled"). A failed request raises its
LmstreamError, as iterating a Stream does.

A chat whose answer the library parses (a request with tools, a thinking
model) is shaped from the chunks' replies, as lmstream-serve (core/serve)
shapes it: content, reasoning_content and tool_calls apart, finish_reason
"tool_calls" when the answer made calls and ended on its end token or a
stop.
"""
from __future__ import annotations

import os
import time
import uuid
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Dict,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .stream import Chunk, FinishReason, Reply, Stream

if TYPE_CHECKING:  # pragma: no cover
    from .runtime import Message, Runtime

__all__ = ["finish_reason", "chat_completion", "completion", "achat_completion", "acompletion"]

_OPENAI_REASON = {
    FinishReason.END_ID: "stop",
    FinishReason.STOP_WORDS: "stop",
    FinishReason.LENGTH: "length",
    # OpenAI has no word for a request its caller stopped; clients that
    # validate the field accept only its own values, and the caller knows
    # it cancelled. The native reason says so.
    FinishReason.CANCELLED: "stop",
}


# The native reasons after which an answer that made calls says
# "tool_calls": it ended where the model meant it to.
_CALLS_END = (FinishReason.END_ID, FinishReason.STOP_WORDS)


def finish_reason(reason: FinishReason) -> Optional[str]:
    """The OpenAI finish_reason of a native one: "stop" for an end token, a
    stop string or stop token id (and a cancellation), "length" for
    max_tokens or a full context; None while not finished. ERROR has no
    OpenAI value (the request raises instead) and maps to None."""
    return _OPENAI_REASON.get(reason)


def _model_name(rt: "Runtime") -> str:
    path = rt.config.get("model_path")
    if isinstance(path, str) and path:
        return os.path.basename(path)
    return str(rt.config.get("backend", "cpu"))


def _logprobs(c: Chunk, lps: Optional[List[Any]]) -> Optional[Dict[str, Any]]:
    """OpenAI's choices[0].logprobs for a chunk's (or a whole answer's)
    entries: {"content": [{"token", "logprob", "bytes", "top_logprobs"},
    ...]}, or None for a request without logprobs. The end token that
    closes an answer produces no content, and as OpenAI it is not listed."""
    if lps is None:
        return None
    if c.finished and c.reason == FinishReason.END_ID and lps:
        lps = lps[:-1]
    return {"content": [lp.to_dict() for lp in lps]}


def _reason(c: Chunk, calls: int) -> Optional[str]:
    if calls and c.reason in _CALLS_END:
        return "tool_calls"
    return finish_reason(c.reason)


def _message(r: Reply) -> Dict[str, Any]:
    """OpenAI's assistant message of a whole parsed reply: content None
    when the answer is only calls, reasoning_content when there is any."""
    m: Dict[str, Any] = {"role": "assistant", "content": r.content}
    if r.reasoning:
        m["reasoning_content"] = r.reasoning
    if r.tool_calls:
        m["tool_calls"] = [{"id": t.id, "type": "function",
                            "function": {"name": t.name, "arguments": t.arguments}} for t in r.tool_calls]
        if not r.content:
            m["content"] = None
    return m


def _reply_deltas(r: Reply) -> Tuple[Dict[str, Any], List[Dict[str, Any]], int]:
    """A chunk's reply as OpenAI streams it: the text delta (reasoning and
    content; maybe empty), then the calls' deltas: a call's first with its
    index, id, type, name and empty arguments, then one with its
    arguments (clients concatenate arguments by index). Also the number
    of calls begun."""
    text: Dict[str, Any] = {}
    if r.reasoning:
        text["reasoning_content"] = r.reasoning
    if r.content:
        text["content"] = r.content
    calls: List[Dict[str, Any]] = []
    begun = 0
    for t in r.tool_calls:
        if t.id:
            begun += 1
            calls.append({"tool_calls": [{"index": t.index, "id": t.id, "type": "function",
                                          "function": {"name": t.name, "arguments": ""}}]})
        if t.arguments:
            calls.append({"tool_calls": [{"index": t.index, "function": {"arguments": t.arguments}}]})
    return text, calls, begun


def _usage(c: Chunk) -> Dict[str, Any]:
    u = c.usage
    p = u.prompt_tokens if u is not None else 0
    g = u.generated_tokens if u is not None else 0
    cached = u.cached_tokens if u is not None else 0
    # prompt_tokens_details.cached_tokens as OpenAI and lmstream-serve report it.
    return {"prompt_tokens": p, "completion_tokens": g, "total_tokens": p + g,
            "prompt_tokens_details": {"cached_tokens": cached}}


class _Shape:
    """What differs between chat and text completions."""

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.prefix = "chatcmpl-" if chat else "cmpl-"
        self.obj_chunk = "chat.completion.chunk" if chat else "text_completion"
        self.obj_whole = "chat.completion" if chat else "text_completion"

    def choice(self, text: Optional[str], reason: Optional[str], native: Optional[str],
               first: bool = False, whole: bool = False,
               logprobs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        c: Dict[str, Any] = {"index": 0}
        if self.chat:
            if whole:
                c["message"] = {"role": "assistant", "content": text or ""}
            else:
                delta: Dict[str, str] = {}
                if first:
                    delta["role"] = "assistant"
                if text is not None:
                    delta["content"] = text
                c["delta"] = delta
        else:
            c["text"] = text or ""
        c["logprobs"] = logprobs
        c["finish_reason"] = reason
        if native is not None:
            c["native_finish_reason"] = native
        return c

    def delta(self, delta: Dict[str, Any], logprobs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """A chat chunk's choice with a delta as given."""
        return {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": None}


class _Shaper:
    """Turns one Stream's chunks into OpenAI chunk dicts (shared by the
    blocking and the asyncio iterators)."""

    def __init__(self, shape: _Shape, rt: "Runtime") -> None:
        self.shape = shape
        self.ident = shape.prefix + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = _model_name(rt)
        self.calls = 0  # tool calls begun

    def out(self, choice: Dict[str, Any], usage: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": self.ident, "object": self.shape.obj_chunk, "created": self.created,
                             "model": self.model, "choices": [choice]}
        if usage is not None:
            d["usage"] = usage
        return d

    def first(self) -> List[Dict[str, Any]]:
        return [self.out(self.shape.choice("", None, None, first=True))] if self.shape.chat else []

    def of(self, c: Chunk) -> List[Dict[str, Any]]:
        got = []
        lp = _logprobs(c, c.logprobs)
        # Tokens whose text is still held back (part of a character, a
        # possible stop string) bring their logprobs with no content.
        has_lp = lp is not None and bool(lp["content"])
        if c.reply is not None and self.shape.chat:
            text, calls, begun = _reply_deltas(c.reply)
            self.calls += begun
            if text or has_lp:
                got.append(self.out(self.shape.delta(text, lp)))
            got.extend(self.out(self.shape.delta(d)) for d in calls)
        elif c.text or has_lp:
            got.append(self.out(self.shape.choice(c.text, None, None, logprobs=lp)))
        if c.finished:
            got.append(self.out(self.shape.choice(None if self.shape.chat else "", _reason(c, self.calls),
                                                  c.reason.ident), _usage(c)))
        return got


class _Whole:
    """Collects a Stream's chunks into one completion dict."""

    def __init__(self, shape: _Shape, rt: "Runtime") -> None:
        self.shape, self.rt = shape, rt
        self.parts: List[str] = []
        self.lps: Optional[List[Any]] = None
        self.replies: List[Reply] = []
        self.final: Optional[Chunk] = None

    def add(self, c: Chunk) -> None:
        self.parts.append(c.text)
        if c.logprobs is not None:
            self.lps = (self.lps or []) + c.logprobs
        if c.reply is not None:
            self.replies.append(c.reply)
        if c.finished:
            self.final = c

    def result(self) -> Dict[str, Any]:
        final = self.final
        assert final is not None, "a stream always ends with a terminal chunk"
        reply = Reply.join(self.replies) if self.replies and self.shape.chat else None
        choice = self.shape.choice("".join(self.parts), _reason(final, len(reply.tool_calls) if reply else 0),
                                   final.reason.ident, whole=True, logprobs=_logprobs(final, self.lps))
        if reply is not None:
            choice["message"] = _message(reply)
        return {"id": self.shape.prefix + uuid.uuid4().hex, "object": self.shape.obj_whole,
                "created": int(time.time()), "model": _model_name(self.rt),
                "choices": [choice], "usage": _usage(final)}


def _stream(shape: _Shape, rt: "Runtime", stream: Stream) -> Iterator[Dict[str, Any]]:
    sh = _Shaper(shape, rt)
    with stream:  # leaving the generator early cancels the request
        yield from sh.first()
        for c in stream:
            yield from sh.of(c)


def _whole(shape: _Shape, rt: "Runtime", stream: Stream) -> Dict[str, Any]:
    w = _Whole(shape, rt)
    with stream:
        for c in stream:
            w.add(c)
    return w.result()


async def _astream(shape: _Shape, rt: "Runtime", stream: Stream) -> AsyncIterator[Dict[str, Any]]:
    sh = _Shaper(shape, rt)
    with stream:  # closing the async generator early cancels the request
        for d in sh.first():
            yield d
        async for c in stream:
            for d in sh.of(c):
                yield d


async def _awhole(shape: _Shape, rt: "Runtime", stream: Stream) -> Dict[str, Any]:
    w = _Whole(shape, rt)
    with stream:
        async for c in stream:
            w.add(c)
    return w.result()


def chat_completion(rt: "Runtime", messages: Sequence["Message"], stream: bool,
                    kw: Dict[str, Any]) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    s = rt.generate(messages=messages, **kw)
    shape = _Shape(chat=True)
    return _stream(shape, rt, s) if stream else _whole(shape, rt, s)


def completion(rt: "Runtime", prompt: str, stream: bool,
               kw: Dict[str, Any]) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    s = rt.generate(prompt, **kw)
    shape = _Shape(chat=False)
    return _stream(shape, rt, s) if stream else _whole(shape, rt, s)


async def achat_completion(rt: "Runtime", messages: Sequence["Message"], stream: bool,
                           kw: Dict[str, Any]) -> Union[Dict[str, Any], AsyncIterator[Dict[str, Any]]]:
    s = rt.generate(messages=messages, **kw)
    shape = _Shape(chat=True)
    return _astream(shape, rt, s) if stream else await _awhole(shape, rt, s)


async def acompletion(rt: "Runtime", prompt: str, stream: bool,
                      kw: Dict[str, Any]) -> Union[Dict[str, Any], AsyncIterator[Dict[str, Any]]]:
    s = rt.generate(prompt, **kw)
    shape = _Shape(chat=False)
    return _astream(shape, rt, s) if stream else await _awhole(shape, rt, s)
