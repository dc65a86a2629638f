defmodule Lmstream.PoolTest do
  # Two local nodes: this one (made distributed here) and a peer started
  # with :peer, each with a pool member on its own replay runtime. Requests
  # go to the least-loaded node, chunks arrive as messages across nodes, and
  # a caller's death cancels its request on the other node.
  use ExUnit.Case, async: false

  @moduletag timeout: 120_000

  setup_all do
    case start_distribution() do
      :ok ->
        {:ok, peer, node} =
          :peer.start_link(%{
            name: :"lmstream_peer_#{System.unique_integer([:positive])}",
            host: ~c"127.0.0.1",
            longnames: true,
            args: Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
          })

        {:ok, _} = :erpc.call(node, :application, :ensure_all_started, [:elixir])
        config = [backend: "replay", vocab: vocab(), eos_id: 0, special_ids: [0], max_slots: 8]
        # The peer's member must outlive this :erpc call: it is unlinked.
        {:ok, remote} = :erpc.call(node, GenServer, :start, [Lmstream.Pool, [runtime: config]])
        {:ok, local} = Lmstream.Pool.start_link(runtime: config)
        eventually(fn -> length(Lmstream.Pool.members()) == 2 end, "both members in :pg")

        # The peer is linked to the setup_all process and ends with it;
        # stopping it here covers a run where that is not so.
        on_exit(fn -> catch_exit(:peer.stop(peer)) end)
        {:ok, peer: peer, node: node, local: local, remote: remote}

      {:error, why} ->
        # Only an environment without loopback networking or epmd lands
        # here; the message says which.
        raise "cannot make this node distributed (#{inspect(why)}): distributed Erlang needs epmd and 127.0.0.1"
    end
  end

  defp start_distribution do
    if Node.alive?() do
      :ok
    else
      # epmd maps node names to ports; erl starts it with -name, a node
      # made distributed at run time does not.
      {_, 0} = System.cmd("epmd", ["-daemon"])

      case Node.start(
             :"lmstream_test_#{System.unique_integer([:positive])}@127.0.0.1",
             :longnames
           ) do
        {:ok, _} -> :ok
        {:error, _} = e -> e
      end
    end
  end

  defp load(member), do: Lmstream.Pool.load(member)

  # 0 is the end token, 1..4 are "H" "e" "l" "o".
  defp vocab, do: ["3c2f733e", "48", "65", "6c", "6f"]

  defp eventually(fun, what, deadline \\ nil) do
    deadline = deadline || System.monotonic_time(:millisecond) + 5_000

    cond do
      fun.() -> :ok
      System.monotonic_time(:millisecond) > deadline -> flunk("timed out waiting for: #{what}")
      true -> Process.sleep(5) && eventually(fun, what, deadline)
    end
  end

  # The caller on the peer: this file's modules exist only on this node,
  # so it is compiled there.
  @caller """
  defmodule Lmstream.PoolTest.Caller do
    def run(report, opts) do
      {:ok, ref} = Lmstream.Pool.subscribe("x", opts)
      send(report, {:serving, node(ref)})

      receive do
        {^ref, {:chunk, _, text}} -> send(report, {:first, text})
      end

      Process.sleep(:infinity)
    end
  end
  """

  defp collect(ref, acc \\ []) do
    receive do
      {^ref, {:chunk, _ids, text}} ->
        collect(ref, [text | acc])

      {^ref, {:done, reason, usage}} ->
        {:done, reason, usage, acc |> Enum.reverse() |> Enum.join()}

      {^ref, {:error, code, msg}} ->
        {:error, code, msg}
    after
      10_000 -> flunk("no terminal message for #{inspect(ref)}")
    end
  end

  test "a request goes to the least-loaded node and streams to the caller there", ctx do
    # Two long requests load this node; the next must go to the peer.
    busy =
      for _ <- 1..2 do
        {:ok, s} =
          Lmstream.Pool.runtime(ctx.local)
          |> Lmstream.submit("x", script: List.duplicate([1], 1000), delay_ms: 50)

        s
      end

    assert load(ctx.local) == 2
    {:ok, ref} = Lmstream.Pool.subscribe("hi", script: [[1], [2], [3], [3], [4]])
    assert node(ref) == ctx.node, "the request went to #{node(ref)}, not the idle peer"
    assert {:done, :end_id, %{generated_tokens: 6}, "Hello"} = collect(ref)

    # A long request goes to the peer too, then this node is freed: the
    # next goes here, the less loaded now.
    {:ok, long} = Lmstream.Pool.subscribe("x", script: List.duplicate([1], 1000), delay_ms: 50)
    assert node(long) == ctx.node
    Lmstream.cancel(busy)
    eventually(fn -> load(ctx.local) == 0 end, "the local streams cancelled")
    {:ok, ref} = Lmstream.Pool.subscribe("hi", script: [[1], [4]])
    assert node(ref) == node()
    assert {:done, :end_id, _, "Ho"} = collect(ref)

    # cancel/1 from this node reaches the peer's stream.
    :ok = Lmstream.Pool.cancel(long)
    assert {:done, :cancelled, _, _} = collect(long)
    eventually(fn -> load(ctx.remote) == 0 end, "the peer's slot freed")
  end

  test "chunks reach a caller on the other node, and its death cancels the request", ctx do
    # The caller lives on the peer; the request is served here (the peer
    # is made the busier one first), so every chunk crosses nodes.
    me = self()

    {:ok, hold} =
      :erpc.call(ctx.node, Lmstream.Pool, :subscribe, [
        "x",
        [script: List.duplicate([1], 1000), delay_ms: 50, group: :default],
        me
      ])

    assert node(hold) in [node(), ctx.node]

    _ = :erpc.call(ctx.node, Code, :compile_string, [@caller])

    caller =
      Node.spawn(ctx.node, Lmstream.PoolTest.Caller, :run, [
        me,
        [script: List.duplicate([1], 1000), delay_ms: 20]
      ])

    assert_receive {:serving, served_by}, 5_000
    assert served_by != node(hold), "both requests went to one node"
    assert_receive {:first, "H"}, 5_000
    served_member = if served_by == node(), do: ctx.local, else: ctx.remote
    assert load(served_member) == 1

    Process.exit(caller, :kill)

    eventually(
      fn -> load(served_member) == 0 end,
      "the dead caller's request cancelled on #{served_by}"
    )

    :ok = Lmstream.Pool.cancel(hold)
    assert {:done, :cancelled, _, _} = collect(hold)
  end

  test "no members is an error, not a hang" do
    assert {:error, {:no_members, _}} = Lmstream.Pool.subscribe("hi", group: :nobody)
  end
end
