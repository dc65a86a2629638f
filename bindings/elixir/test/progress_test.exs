defmodule LmstreamProgressTest do
  # Load progress (lms_runtime_create_with_progress) as an Elixir caller
  # sees it: a callback run in the caller's process, stages in order.
  # Not async: loading a model takes the CPU from timing-sensitive tests.
  use ExUnit.Case, async: false

  @model Path.expand("../../../models/SmolLM2-135M-Instruct.Q4_1.gguf", __DIR__)
  @skip if File.exists?(@model), do: false, else: "model file absent: #{@model} (make model)"

  defp recorder do
    me = self()
    fn stage, fraction -> send(me, {:seen, stage, fraction, self()}) end
  end

  defp seen(acc \\ []) do
    receive do
      {:seen, stage, fraction, pid} -> seen([{stage, fraction, pid} | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  test "a replay runtime reports only :ready, from the caller's process" do
    vocab = Enum.map(["</s>", "H", "i"], &Base.encode16(&1, case: :lower))

    {:ok, rt} = Lmstream.replay(vocab: vocab, eos_id: 0, progress: recorder())

    assert [{:ready, 1.0, pid}] = seen()
    assert pid == self()
    text = rt |> Lmstream.stream("x", script: [[1, 2], [0]]) |> Enum.map_join(& &1.text)
    assert text == "Hi"
    Lmstream.close(rt)
  end

  @tag skip: @skip
  test "a model reports its stages in order, fractions never decreasing" do
    {:ok, rt} = Lmstream.load(@model, progress: recorder())
    calls = seen()
    stages = calls |> Enum.map(&elem(&1, 0)) |> Enum.dedup()
    fractions = Enum.map(calls, &elem(&1, 1))

    assert stages in [
             [:open, :weights, :speculation, :calibration, :ready],
             [:open, :weights, :speculation, :ready]
           ]

    assert hd(fractions) == 0.0 and List.last(fractions) == 1.0
    # Hundreds of reports (packing reports each tensor), each a float: a
    # reused message env once turned some into stale terms.
    assert Enum.all?(fractions, &is_float/1)
    assert Enum.count(calls, &(elem(&1, 0) == :weights)) > 10
    assert fractions == Enum.sort(fractions)
    assert Enum.all?(calls, fn {_, _, pid} -> pid == self() end)
    Lmstream.close(rt)
  end

  test "a failed load reports no :ready and returns the error" do
    assert {:error, {_code, msg}} =
             Lmstream.load("/nonexistent/no-such.gguf", progress: recorder())

    assert msg =~ "no-such.gguf"
    refute Enum.any?(seen(), fn {stage, _, _} -> stage == :ready end)
  end

  test "progress must be a function of two arguments" do
    assert_raise ArgumentError, ~r/progress must be a function/, fn ->
      Lmstream.load("x.gguf", progress: :yes)
    end
  end
end
