defmodule Lmstream.Nif do
  @moduledoc false
  # The NIF (c_src/lmstream_nif.c). Every function here is a short, normal
  # NIF call except runtime_create/1, runtime_create_progress/3 and
  # runtime_destroy/1, which run on a dirty I/O scheduler (loading a model,
  # waiting for the engine to stop), and tokenize/3, count_tokens/3,
  # detokenize/3 and render_chat/2, on a dirty CPU scheduler (their work
  # grows with their input).

  @on_load :load_nif
  @repo_library Path.expand("../../../../build/liblmstream.so", __DIR__)

  @doc false
  def load_nif do
    priv =
      case :code.priv_dir(:lmstream) do
        {:error, _} -> Path.expand("../../priv", __DIR__)
        dir -> List.to_string(dir)
      end

    :erlang.load_nif(String.to_charlist(Path.join(priv, "lmstream_nif")), library_path(priv))
  end

  @doc """
  Where liblmstream.so is looked for: `$LMSTREAM_LIBRARY`, then the
  project's priv/, then `<repo>/build/liblmstream.so`.
  """
  def library_path(priv \\ nil) do
    env = System.get_env("LMSTREAM_LIBRARY")
    priv_lib = priv && Path.join(priv, "liblmstream.so")

    cond do
      env not in [nil, ""] -> env
      priv_lib && File.exists?(priv_lib) -> priv_lib
      true -> @repo_library
    end
  end

  defp nif_missing, do: :erlang.nif_error(:nif_not_loaded)

  def library_info, do: nif_missing()
  def resource_counts, do: nif_missing()
  def strerror(_code), do: nif_missing()
  def configure_process(_json), do: nif_missing()
  def runtime_create(_json), do: nif_missing()
  def runtime_create_progress(_json, _pid, _tag), do: nif_missing()
  def runtime_destroy(_rt), do: nif_missing()
  def runtime_stats(_rt), do: nif_missing()
  def channel_open(_interval, _skip_special, _queue_limit, _policy), do: nif_missing()
  def submit(_rt, _json, _channels), do: nif_missing()
  def arm(_channel, _ref), do: nif_missing()
  def drain(_channel, _max), do: nif_missing()
  def pull(_channel, _max, _ref), do: nif_missing()
  def cancel(_channel), do: nif_missing()
  def close(_channel), do: nif_missing()
  def state(_channel), do: nif_missing()
  def model_path(_name), do: nif_missing()
  def model_pull(_name, _pid, _ref), do: nif_missing()
  def tokenize(_rt, _text, _flags), do: nif_missing()
  def count_tokens(_rt, _text, _flags), do: nif_missing()
  def detokenize(_rt, _ids, _flags), do: nif_missing()
  def model_info(_rt), do: nif_missing()
  def render_chat(_rt, _json), do: nif_missing()
end
