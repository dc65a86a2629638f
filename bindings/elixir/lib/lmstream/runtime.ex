defmodule Lmstream.Runtime do
  @moduledoc """
  A runtime: a loaded model and its engine loop, made by `Lmstream.load/2`,
  `Lmstream.replay/1` or `Lmstream.open/1`.

  It lives as long as some process holds it (a stream from `Lmstream.stream/3`
  holds it while it is consumed). When it is garbage-collected, or closed
  with `Lmstream.close/1`, the engine stops and every stream still running
  ends with an `:error` terminal chunk, code `:shutdown` (message API:
  `{ref, {:error, :shutdown, message}}`).
  """
  @enforce_keys [:resource]
  defstruct [:resource]
  @type t :: %__MODULE__{resource: reference}

  defimpl Inspect do
    def inspect(%{resource: r}, _opts), do: "#Lmstream.Runtime<" <> Kernel.inspect(r) <> ">"
  end
end
