defmodule Lmstream.Pool do
  @moduledoc """
  Runtimes on several nodes as one pool, with distributed Erlang and OTP's
  process groups (`:pg`); nothing else to run.

  Each node that serves starts a `Lmstream.Pool` process holding its own
  runtime; it joins the group `name` (default `:default`) in the `:pg`
  scope `Lmstream.Pool`, so any connected node sees it:

      # on each serving node
      {:ok, _} = Lmstream.Pool.start_link(runtime: [model_path: "models/SmolLM2-135M-Instruct.Q4_1.gguf"])

      # on any node of the cluster
      {:ok, ref} = Lmstream.Pool.subscribe("What is the capital of Japan?", max_tokens: 64)
      # {ref, {:chunk, ids, text}} ... then {ref, {:done, reason, usage}}

  `subscribe/4` asks every member for its load (active slots plus queued
  requests of its runtime), submits on the least-loaded one, and that
  node's forwarder sends the chunks as messages straight to `pid` (default:
  the caller), wherever it runs, in `Lmstream.subscribe/4`'s shape. The
  forwarder monitors `pid`: when it exits, or its node goes away, the
  request is cancelled on the serving node and its slot is freed.
  `cancel/1` cancels one from anywhere.
  """
  use GenServer

  alias Lmstream.Runtime

  @scope __MODULE__
  @load_timeout 5_000

  # ---- serving side ---------------------------------------------------

  @doc """
  Starts a pool member on this node. Options:

    * `:runtime` — the runtime: a config for `Lmstream.open/1` (keyword or
      map), or an opened `%Lmstream.Runtime{}`
    * `:group` — the pool's name (default `:default`)
    * `:name` — a local name to register the process under (optional)
  """
  def start_link(opts) do
    {gen_opts, opts} = Keyword.split(opts, [:name])
    GenServer.start_link(__MODULE__, opts, gen_opts)
  end

  @doc "The `:pg` scope the pools live in, started on this node if it is not yet."
  def ensure_scope do
    case :pg.start(@scope) do
      {:ok, _} -> :ok
      {:error, {:already_started, _}} -> :ok
    end
  end

  @doc "The members of pool `group`, on every connected node."
  def members(group \\ :default), do: :pg.get_members(@scope, group)

  @doc "The runtime a member serves with (for its own node's use: stats, tokenize)."
  def runtime(member), do: GenServer.call(member, :runtime)

  @doc "A member's load: its runtime's active slots plus queued requests."
  def load(member), do: GenServer.call(member, :load, @load_timeout)

  @impl true
  def init(opts) do
    :ok = ensure_scope()

    rt =
      case Keyword.fetch(opts, :runtime) do
        {:ok, %Runtime{} = rt} ->
          {:ok, rt}

        {:ok, config} when is_list(config) or is_map(config) ->
          Lmstream.open(config)

        other ->
          {:error,
           {:invalid_argument,
            "option :runtime must be a config or a runtime, got #{inspect(other)}"}}
      end

    case rt do
      {:ok, rt} ->
        :ok = :pg.join(@scope, Keyword.get(opts, :group, :default), self())
        {:ok, %{rt: rt, streams: %{}}}

      {:error, reason} ->
        {:stop, reason}
    end
  end

  @impl true
  def handle_call(:load, _from, st), do: {:reply, runtime_load(st.rt), st}
  def handle_call(:runtime, _from, st), do: {:reply, st.rt, st}

  def handle_call({:subscribe, prompt, opts, pid}, _from, st) do
    # The handles are NIF resources: they mean something only on this
    # node, so the caller gets their refs (which tag the messages) and
    # cancels through this process, which keeps the handles.
    case Lmstream.subscribe(st.rt, prompt, opts, pid) do
      {:ok, handles} ->
        hs = List.wrap(handles)
        streams = Enum.reduce(hs, st.streams, &Map.put(&2, &1, true))
        {:reply, {:ok, handles}, prune(%{st | streams: streams})}

      error ->
        {:reply, error, st}
    end
  rescue
    e in ArgumentError -> {:reply, {:error, {:invalid_argument, Exception.message(e)}}, st}
    e in Lmstream.Error -> {:reply, {:error, {e.code, e.message}}, st}
  end

  @impl true
  def handle_cast({:cancel, ref}, st) do
    Enum.each(Map.keys(st.streams), fn h -> if h == ref, do: Lmstream.cancel(h) end)
    {:noreply, prune(st)}
  end

  # Handles of streams that are over are dropped, so the map holds only
  # live ones; each pruning is as long as the live ones.
  defp prune(st) do
    live =
      for {h, _} <- st.streams,
          match?({:ok, %{finished: false}}, Lmstream.info(h)),
          into: %{},
          do: {h, true}

    %{st | streams: live}
  end

  defp runtime_load(rt) do
    case Lmstream.stats(rt) do
      %{active_slots: a, queued: q} -> a + q
      _ -> :infinity
    end
  end

  # ---- calling side ---------------------------------------------------

  @doc """
  Streams `prompt` from the least-loaded member of pool `group` to `pid`
  as messages (see `Lmstream.subscribe/4`). Options are
  `Lmstream.subscribe/4`'s, plus `:group`. Returns `{:ok, ref}` (a list for
  a batch), or `{:error, {:no_members, _}}` when no member answers.
  """
  def subscribe(prompt, opts \\ [], pid \\ self()) when is_pid(pid) do
    {group, opts} = Keyword.pop(opts, :group, :default)

    case least_loaded(group) do
      nil ->
        {:error, {:no_members, "pool #{inspect(group)} has no member that answers"}}

      member ->
        GenServer.call(member, {:subscribe, prompt, opts, pid}, @load_timeout)
    end
  end

  @doc """
  Cancels a stream of `subscribe/3` (from any node). Fire-and-forget; the
  stream still ends with its terminal message.
  """
  def cancel(ref) when is_reference(ref) do
    # The serving node is the one that made the handle, so the ref names it.
    for g <- :pg.which_groups(@scope), m <- :pg.get_members(@scope, g), node(m) == node(ref) do
      GenServer.cast(m, {:cancel, ref})
    end

    :ok
  end

  @doc "Each member of `group` with its load (active slots plus queued), least loaded first."
  def loads(group \\ :default) do
    :ok = ensure_scope()

    :pg.get_members(@scope, group)
    |> Enum.map(fn m -> {m, :erpc.send_request(node(m), __MODULE__, :load, [m])} end)
    |> Enum.flat_map(fn {m, req} ->
      try do
        [{m, :erpc.receive_response(req, @load_timeout + 1_000)}]
      catch
        _, _ -> []
      end
    end)
    |> Enum.sort_by(fn {_, load} -> load end)
  end

  defp least_loaded(group) do
    case loads(group) do
      [{m, _} | _] -> m
      [] -> nil
    end
  end
end
