"""OpenAI-shaped completions over Runtime.generate.

Code written against OpenAI's API (or llama-cpp-python's) expects dicts:
``choices[0].delta.content`` in a stream, ``finish_reason`` of "stop" or
"length". These functions build exactly those from a Stream, and keep
lmstream's own reason beside it (``native_finish_reason``: "end_id",
"stop_words", "length", "cancelled"). A failed request raises its
LmstreamError, as iterating a Stream does.
"""
from __future__ import annotations

import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from .stream import Chunk, FinishReason, Stream

if TYPE_CHECKING:  # pragma: no cover
    from .runtime import Message, Runtime

__all__ = ["finish_reason", "chat_completion", "completion"]

_OPENAI_REASON = {
    FinishReason.END_ID: "stop",
    FinishReason.STOP_WORDS: "stop",
    FinishReason.LENGTH: "length",
    # OpenAI has no word for a request its caller stopped; clients that
    # validate the field accept only its own values, and the caller knows
    # it cancelled. The native reason says so.
    FinishReason.CANCELLED: "stop",
}


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


def _usage(c: Chunk) -> Dict[str, int]:
    u = c.usage
    p = u.prompt_tokens if u is not None else 0
    g = u.generated_tokens if u is not None else 0
    return {"prompt_tokens": p, "completion_tokens": g, "total_tokens": p + g}


class _Shape:
    """What differs between chat and text completions."""

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.prefix = "chatcmpl-" if chat else "cmpl-"
        self.obj_chunk = "chat.completion.chunk" if chat else "text_completion"
        self.obj_whole = "chat.completion" if chat else "text_completion"

    def choice(self, text: Optional[str], reason: Optional[str], native: Optional[str],
               first: bool = False, whole: bool = False) -> Dict[str, Any]:
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
        c["logprobs"] = None
        c["finish_reason"] = reason
        if native is not None:
            c["native_finish_reason"] = native
        return c


def _stream(shape: _Shape, rt: "Runtime", stream: Stream) -> Iterator[Dict[str, Any]]:
    ident = shape.prefix + uuid.uuid4().hex
    created = int(time.time())
    model = _model_name(rt)

    def out(choice: Dict[str, Any], usage: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": ident, "object": shape.obj_chunk, "created": created,
                             "model": model, "choices": [choice]}
        if usage is not None:
            d["usage"] = usage
        return d

    with stream:  # leaving the generator early cancels the request
        if shape.chat:
            yield out(shape.choice("", None, None, first=True))
        for c in stream:
            if c.text:
                yield out(shape.choice(c.text, None, None))
            if c.finished:
                yield out(shape.choice(None if shape.chat else "", finish_reason(c.reason), c.reason.ident),
                          _usage(c))


def _whole(shape: _Shape, rt: "Runtime", stream: Stream) -> Dict[str, Any]:
    parts: List[str] = []
    final: Optional[Chunk] = None
    with stream:
        for c in stream:
            parts.append(c.text)
            if c.finished:
                final = c
    assert final is not None, "a stream always ends with a terminal chunk"
    return {"id": shape.prefix + uuid.uuid4().hex, "object": shape.obj_whole,
            "created": int(time.time()), "model": _model_name(rt),
            "choices": [shape.choice("".join(parts), finish_reason(final.reason), final.reason.ident,
                                     whole=True)],
            "usage": _usage(final)}


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
