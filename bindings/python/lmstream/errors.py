"""The exception hierarchy: one class per LMS_ERR_* status code."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Tuple, Type

if TYPE_CHECKING:  # pragma: no cover
    from .stream import Chunk


class LmstreamError(Exception):
    """Base of every error the library reports.

    ``code`` is the LMS_ERR_* status code (a negative int), ``ident`` its
    snake-case name ("invalid_request"), ``message`` the library's message.
    ``chunk`` is set when the error ended a stream: the terminal chunk, with
    the text and token ids it still carried and its usage.
    """

    code: int = -11
    ident: str = "internal"

    def __init__(self, message: str = "", code: Optional[int] = None,
                 chunk: "Optional[Chunk]" = None) -> None:
        if code is not None:
            self.code = code
        self.message = message or _default_message(self.code)
        self.chunk = chunk
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"

    def __reduce__(self) -> "Tuple[Type[LmstreamError], Tuple[str, int]]":  # picklable across processes
        return (type(self), (self.message, self.code))


class InvalidArgument(LmstreamError, ValueError):
    """A NULL pointer or a value out of range reached the C interface."""
    code, ident = -1, "invalid_argument"


class InvalidHandle(LmstreamError):
    """A zero, stale, released or forged handle."""
    code, ident = -2, "invalid_handle"


class InvalidRequest(LmstreamError, ValueError):
    """A well-formed request (or config) with a bad or unknown field."""
    code, ident = -4, "invalid_request"


class InvalidType(InvalidRequest, TypeError):
    """A parameter of the wrong type, found by the binding before anything
    reached the library. Both an InvalidRequest and a TypeError."""
    code, ident = -4, "invalid_request"


class BadJSON(InvalidRequest):
    """The request JSON does not parse."""
    code, ident = -3, "bad_json"


class ModelError(LmstreamError):
    """The model cannot be loaded or used."""
    code, ident = -5, "model"


class PromptTooLong(InvalidRequest):
    """The prompt does not fit the model's context."""
    code, ident = -6, "prompt_too_long"


class CapacityError(LmstreamError):
    """The request queue is full, or the request can never fit."""
    code, ident = -7, "capacity"


class BufferTooSmall(LmstreamError):
    """A buffer cannot hold one whole chunk (handled inside the binding)."""
    code, ident = -8, "buffer_too_small"


class ForkedProcess(LmstreamError):
    """lmstream was used in a child process after fork(); use it in the
    parent, or start the child with exec (multiprocessing's "spawn")."""
    code, ident = -9, "forked"


class BackendError(LmstreamError):
    """The backend failed during generation."""
    code, ident = -10, "backend"


class InternalError(LmstreamError):
    """An internal error of the library (a recovered panic)."""
    code, ident = -11, "internal"


class ShutdownError(LmstreamError):
    """The runtime was closed."""
    code, ident = -12, "shutdown"


class ChannelClosed(LmstreamError):
    """The stream was closed while a call waited on it."""
    code, ident = -13, "closed"


class StateError(LmstreamError):
    """The call is not allowed in the object's current state."""
    code, ident = -14, "state"


ERRORS_BY_CODE: Dict[int, Type[LmstreamError]] = {
    cls.code: cls for cls in (
        InvalidArgument, InvalidHandle, BadJSON, InvalidRequest, ModelError, PromptTooLong,
        CapacityError, BufferTooSmall, ForkedProcess, BackendError, InternalError,
        ShutdownError, ChannelClosed, StateError)
}
ERRORS_BY_IDENT: Dict[str, Type[LmstreamError]] = {c.ident: c for c in ERRORS_BY_CODE.values()}


def _default_message(code: int) -> str:
    try:
        from ._lib import strerror
        return strerror(code)
    except Exception:  # pragma: no cover - library not loadable
        return f"status {code}"


def error_for(code: int, message: str = "", chunk: "Optional[Chunk]" = None) -> LmstreamError:
    """The exception for a status code, of the class that code maps to."""
    cls = ERRORS_BY_CODE.get(code, LmstreamError)
    return cls(message, code, chunk)
