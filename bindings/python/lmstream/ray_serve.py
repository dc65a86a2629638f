"""lmstream.Runtime replicas as a Ray Serve deployment.

Each replica holds one Runtime; Ray Serve routes requests over the replicas
(preferring the one with fewer requests in flight) and scales them. Two
ways in, both streaming:

* HTTP, through Ray Serve's proxy: ``POST {route}/v1/chat/completions`` and
  ``{route}/v1/completions`` in OpenAI's shape (server-sent events with
  ``"stream": true``, then ``data: [DONE]``), ``GET {route}/v1/models``. A
  client that disconnects has its request cancelled on the replica at once
  (the proxy cancels the replica's task, which closes the Stream).
* A deployment handle: ``handle.options(stream=True).chat.remote(body)``
  yields OpenAI chunk dicts; ``.cancel()`` on the response cancels the
  request the same way.

Needs ``pip install "ray[serve]"``; ``import lmstream`` itself does not.
``app(runtime_config, num_replicas=...)`` builds the application to give
``serve.run``; examples/ray_serve.py runs one.
"""
from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, Optional, Tuple

from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .completions import achat_completion, acompletion
from .errors import InvalidRequest, InvalidType, LmstreamError, PromptTooLong
from .runtime import Runtime

__all__ = ["LmstreamDeployment", "app"]

# Request fields of OpenAI's that the deployment handles itself; the rest
# go to Runtime.generate, which checks its own and passes the others to the
# library, which refuses what it does not know (never ignored).
_OWN = ("model", "messages", "prompt", "stream", "stream_options", "n", "max_completion_tokens")


def _error(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status)


def _sse(d: Dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def _kwargs(body: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
    """The Runtime.generate arguments of an OpenAI request body, and
    whether the client asked for the usage chunk."""
    kw = {k: v for k, v in body.items() if k not in _OWN}
    if "max_completion_tokens" in body:
        if "max_tokens" in body:
            raise InvalidRequest("give max_tokens or max_completion_tokens, not both")
        kw["max_tokens"] = body["max_completion_tokens"]
    n = body.get("n", 1)
    if n != 1 or isinstance(n, bool):
        raise InvalidRequest(f"n must be 1 in this deployment (got {n!r}); lmstream-serve answers n > 1")
    opts = body.get("stream_options")
    usage = False
    if opts is not None:
        if not isinstance(opts, dict) or set(opts) - {"include_usage"}:
            raise InvalidRequest('stream_options takes only {"include_usage": bool}')
        usage = opts.get("include_usage", False)
        if not isinstance(usage, bool):
            raise InvalidType("stream_options.include_usage must be a bool")
        if not body.get("stream"):
            raise InvalidRequest("stream_options needs stream: true")
    if not isinstance(body.get("stream", False), bool):
        raise InvalidType("stream must be a bool")
    return kw, usage


class LmstreamDeployment:
    """One replica: a Runtime made from ``runtime`` (Runtime's keyword
    arguments: ``model_path``, ``threads``, ... or a replay config)."""

    def __init__(self, runtime: Dict[str, Any]) -> None:
        self.rt = Runtime(**runtime)
        try:
            self.replica = serve.get_replica_context().replica_id.unique_id
        except Exception:  # outside a replica (a plain instance in a test)
            self.replica = "local"

    async def _open(self, body: Any, chat: bool) -> Tuple[Any, bool]:
        """Submits the request (refusals raise before any byte is sent) and
        returns its chunk iterator (or whole answer) and the usage flag."""
        if not isinstance(body, dict):
            raise InvalidType(f"the request body must be a JSON object, got {type(body).__name__}")
        kw, usage = _kwargs(body)
        stream = body.get("stream", False)
        if chat:
            if "prompt" in body or "messages" not in body:
                raise InvalidRequest("/v1/chat/completions takes messages")
            return await achat_completion(self.rt, body["messages"], stream, kw), usage
        if "messages" in body or "prompt" not in body:
            raise InvalidRequest("/v1/completions takes prompt")
        return await acompletion(self.rt, body["prompt"], stream, kw), usage

    async def chat(self, body: Dict[str, Any]) -> AsyncIterator[Dict[str, Any]]:
        """For handles (``options(stream=True)``): the chunks of a chat
        completion (``body`` as OpenAI's, ``stream`` implied)."""
        chunks, _ = await self._open(dict(body, stream=True), chat=True)
        async for d in chunks:
            yield d

    def stats(self) -> Dict[str, Any]:
        """The runtime's counters, and which replica answered."""
        return dict(self.rt.stats(), replica=self.replica)

    async def __call__(self, request: Request) -> Response:
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path.endswith("/v1/models"):
            return JSONResponse({"object": "list", "data": [
                {"id": self._model(), "object": "model", "created": 0, "owned_by": "lmstream"}]})
        chat = path.endswith("/v1/chat/completions")
        if request.method != "POST" or not (chat or path.endswith("/v1/completions")):
            return _error(404, f"no route {request.method} {request.url.path}")
        try:
            body = json.loads(await request.body())
        except ValueError as e:
            return _error(400, f"the request body is not JSON: {e}")
        try:
            answer, usage = await self._open(body, chat)
        except (InvalidRequest, InvalidType, PromptTooLong) as e:
            return _error(400, str(e))
        except LmstreamError as e:
            return _error(503, str(e))
        headers = {"x-lmstream-replica": self.replica}
        if not body.get("stream"):
            return JSONResponse(answer, headers=headers)
        # Ray Serve's proxy passes each event on as it is yielded.
        headers.update({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return StreamingResponse(self._events(answer, usage), media_type="text/event-stream", headers=headers)

    async def _events(self, chunks: Any, include_usage: bool) -> AsyncIterator[bytes]:
        # A disconnect cancels this task: CancelledError leaves the loop,
        # and closing the chunk iterator cancels the request.
        final = None
        try:
            async for d in chunks:
                u = d.pop("usage", None)
                if u is not None:
                    final = (d, u)
                if include_usage:
                    d["usage"] = None  # OpenAI's shape: a value only on the last chunk
                yield _sse(d)
        except LmstreamError as e:
            yield _sse({"error": {"message": str(e), "type": "server_error", "param": None, "code": type(e).__name__}})
            return
        finally:
            await chunks.aclose()
        if include_usage and final is not None:
            d, u = final
            yield _sse({"id": d["id"], "object": d["object"], "created": d["created"], "model": d["model"],
                        "choices": [], "usage": u})
        yield b"data: [DONE]\n\n"

    def _model(self) -> str:
        path = self.rt.config.get("model_path")
        return str(path).rsplit("/", 1)[-1] if path else str(self.rt.config.get("backend", "cpu"))


def app(runtime: Dict[str, Any], num_replicas: int = 1, **options: Any) -> Any:
    """The Ray Serve application of ``num_replicas`` replicas, each with a
    Runtime made from ``runtime``; ``options`` go to ``serve.deployment``
    (``ray_actor_options``, ``max_ongoing_requests``, ...)."""
    # Any: Ray's stubs type deployment() with a class argument differently
    # from one version to the next (some say it returns a decorator).
    dep: Any = serve.deployment(LmstreamDeployment, num_replicas=num_replicas, **options)
    return dep.bind(runtime)
