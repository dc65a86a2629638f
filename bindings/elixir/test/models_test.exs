defmodule Lmstream.ModelsTest do
  # Models by name. The library reads the model cache's location from the
  # environment the BEAM had when it loaded it, so the checks that need a
  # cache of their own run in a child `elixir` with LMSTREAM_MODELS set.
  # Without the network, a pull finds the model already in the cache and
  # re-verifies it: the NIF's progress path and the name resolution are
  # exercised all the same.
  use ExUnit.Case, async: false

  @model Path.expand("../../../models/SmolLM2-135M-Instruct.Q4_1.gguf", __DIR__)
  @skip (if File.exists?(@model), do: false, else: "model file absent: #{@model} (make model)")

  test "unknown names" do
    assert {:error, {:model, msg}} = Lmstream.model_path("no-such-model")
    assert msg =~ "smollm2-135m"
    assert {:error, {:model, msg}} = Lmstream.pull("no-such-model")
    assert msg =~ "unknown model"
  end

  # Runs code in a fresh BEAM with this build of the binding and cache as
  # the model cache; returns what the code printed last, as a term.
  defp in_child(cache, code) do
    ebin = Path.join(Mix.Project.app_path(), "ebin")

    {out, status} =
      System.cmd(System.find_executable("elixir"), ["-pa", ebin, "-e", code],
        env: [{"LMSTREAM_MODELS", cache}],
        stderr_to_stdout: true
      )

    assert status == 0, out
    out |> String.split("\n", trim: true) |> List.last() |> Base.decode64!() |> :erlang.binary_to_term()
  end

  defp reply(term), do: "IO.puts(Base.encode64(:erlang.term_to_binary(#{term})))"

  defp cache_dir do
    dir = Path.join(System.tmp_dir!(), "lmstream-models-test-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    dir
  end

  test "a name that is not pulled says how to pull it" do
    cache = cache_dir()

    got =
      in_child(cache, """
      {:missing, path} = Lmstream.model_path("smollm2-135m")
      {:error, {:model, msg}} = Lmstream.load("smollm2-135m")
      #{reply("{path, msg}")}
      """)

    {path, msg} = got
    assert path == Path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert msg =~ "lmstream pull smollm2-135m"
    refute msg =~ "make"
  end

  @tag skip: @skip
  test "pull re-verifies a cached model with progress, and load takes the name" do
    cache = cache_dir()
    File.ln_s!(@model, Path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf"))

    {path, phases, text} =
      in_child(cache, """
      me = self()
      {:ok, path} = Lmstream.pull("smollm2-135m", progress: &send(me, {:p, &1}))
      phases = Stream.repeatedly(fn -> receive do {:p, p} -> {p.phase, p.done_bytes} after 0 -> nil end end)
               |> Enum.take_while(& &1)
      {:ok, rt} = Lmstream.load("smollm2-135m", max_slots: 1, context_length: 128)
      text = rt |> Lmstream.stream("The capital of France is", max_tokens: 4) |> Enum.map_join(& &1.text)
      #{reply("{path, phases, text}")}
      """)

    assert path == Path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert {:verifying, 0} = hd(phases)
    assert {:done, 98_362_432} = List.last(phases)
    assert length(phases) > 10
    assert String.trim(text) != ""
  end
end
