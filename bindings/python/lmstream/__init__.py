"""lmstream: a streaming LLM runtime (Python binding of liblmstream).

    import lmstream

    with lmstream.Runtime(model_path="models/SmolLM2-135M-Instruct.Q4_1.gguf") as rt:
        for chunk in rt.generate("Tell me a joke", max_tokens=64):
            print(chunk.text, end="", flush=True)

``async for chunk in rt.generate(...)`` works the same way without blocking
the event loop. ``lmstream.pull("smollm2-135m")`` fetches a known model into
the user's cache, after which ``model_path="smollm2-135m"`` finds it. See Runtime, Stream and Chunk.
"""
from ._lib import ABI_VERSION, LibraryNotFound, path as library_path
from .errors import (
    BackendError,
    BadJSON,
    BufferTooSmall,
    CapacityError,
    ChannelClosed,
    ForkedProcess,
    InternalError,
    InvalidArgument,
    InvalidHandle,
    InvalidRequest,
    InvalidType,
    LmstreamError,
    ModelError,
    PromptTooLong,
    ShutdownError,
    StateError,
)
from .models import KNOWN_MODELS, PullProgress, model_path, pull
from .runtime import Runtime, configure_process
from .stream import (
    Chunk,
    FinishReason,
    Logprob,
    QueuePolicy,
    Reply,
    Stream,
    StreamState,
    TokenLogprob,
    ToolCallDelta,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "ABI_VERSION", "LibraryNotFound", "library_path", "__version__",
    "Runtime", "Stream", "Chunk", "Usage", "FinishReason", "QueuePolicy", "StreamState",
    "configure_process", "Logprob", "TokenLogprob", "Reply", "ToolCallDelta",
    "pull", "model_path", "PullProgress", "KNOWN_MODELS",
    "LmstreamError", "InvalidArgument", "InvalidHandle", "BadJSON", "InvalidRequest", "InvalidType",
    "ModelError", "PromptTooLong", "CapacityError", "BufferTooSmall", "ForkedProcess",
    "BackendError", "InternalError", "ShutdownError", "ChannelClosed", "StateError",
]
