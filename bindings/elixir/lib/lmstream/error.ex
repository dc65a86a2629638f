defmodule Lmstream.Error do
  @moduledoc """
  Raised by `Lmstream.stream/3` (when its request is refused or the wait
  times out) and by the bang functions. `code` is the library status as an
  atom (`:bad_json`, `:invalid_request`, `:capacity`, ...; see
  `include/lmstream.h`), `message` says what was wrong.
  """
  defexception [:code, :message]

  @codes [
    ok: 0,
    invalid_argument: -1,
    invalid_handle: -2,
    bad_json: -3,
    invalid_request: -4,
    model: -5,
    prompt_too_long: -6,
    capacity: -7,
    buffer_too_small: -8,
    forked: -9,
    backend: -10,
    internal: -11,
    shutdown: -12,
    closed: -13,
    state: -14
  ]

  @impl true
  def message(%__MODULE__{code: code, message: msg}), do: "#{inspect(code)}: #{msg}"

  @doc "The numeric LMS_ERR_* value of a code atom (integers pass through)."
  def code_value(code) when is_integer(code), do: code
  def code_value(code) when is_atom(code), do: Keyword.get(@codes, code)

  @doc "The code atom of a numeric status."
  def code_name(value) when is_integer(value) do
    Enum.find_value(@codes, value, fn {k, v} -> if v == value, do: k end)
  end
end
