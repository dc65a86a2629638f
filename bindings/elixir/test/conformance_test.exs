defmodule Lmstream.ConformanceTest do
  @moduledoc """
  The shared stream-contract vectors (tests/conformance/*.json), every one,
  through the Elixir API, mirroring tests/conformance/conformance_test.go:
  a replay runtime from "runtime", the request with one stream per batch
  item set up as "channel" says, consumed as "consumer" says, compared with
  "expect" (or "expect_submit_error", by code).

  Each vector runs through `Lmstream.stream/3` (or `submit/3` + `chunks/2`
  when the consumer must wait for the end before popping), and every vector
  whose consumer pops as chunks come also through `Lmstream.subscribe/4`.
  """
  use ExUnit.Case, async: true

  alias Lmstream.{Chunk, JSON}

  @dir Path.expand("../../../tests/conformance", __DIR__)
  @vectors @dir |> Path.join("*.json") |> Path.wildcard() |> Enum.sort()

  test "the vectors are there" do
    assert length(@vectors) >= 40, "no conformance vectors under #{@dir}"
  end

  for path <- @vectors do
    name = Path.basename(path)
    @path path

    @tag vector: name
    test "stream/3: #{name}" do
      run_stream(load(@path))
    end

    @tag vector: name
    test "subscribe/4: #{name}" do
      v = load(@path)

      if v["consumer"]["drain_after_finish"] do
        # The consumer must not pop before the end; a forwarder pops as
        # chunks come, so this one runs through stream/3 only.
        :ok
      else
        run_subscribe(v)
      end
    end
  end

  defp load(path), do: path |> File.read!() |> JSON.decode!()

  # ---- building the call ------------------------------------------------

  defp channel_opts(v) do
    ch = v["channel"] || %{}

    [
      stream_interval: ch["interval"],
      skip_special_tokens: ch["skip_special"],
      queue_limit: if((ch["queue_limit"] || 0) > 0, do: ch["queue_limit"]),
      queue_policy: ch["policy"] && String.to_atom(ch["policy"])
    ]
    |> Enum.reject(fn {_, val} -> is_nil(val) end)
  end

  # {prompt_or_raw, opts}: the API's own JSON building when the request has
  # exactly one of prompt/prompts/messages, the raw JSON otherwise (a
  # malformed request, no prompt at all).
  defp request(v) do
    case v["request"] do
      raw when is_binary(raw) ->
        {{:raw_json, raw}, channel_opts(v)}

      req ->
        case Map.take(req, ["prompt", "prompts", "messages"]) |> Map.to_list() do
          [{_, prompt}] ->
            rest = Map.drop(req, ["prompt", "prompts", "messages"])
            opts = Enum.map(rest, fn {k, val} -> {String.to_atom(k), val} end)
            {prompt, opts ++ channel_opts(v)}

          _ ->
            {{:raw_json, JSON.encode!(req)}, channel_opts(v)}
        end
    end
  end

  defp runtime(v) do
    {:ok, rt} = Lmstream.open(v["runtime"])
    rt
  end

  # ---- stream/3 -----------------------------------------------------------

  defp run_stream(v) do
    rt = runtime(v)
    {prompt, opts} = request(v)
    opts = opts ++ [timeout: 10_000]

    case v["expect_submit_error"] do
      nil ->
        got =
          if v["consumer"]["drain_after_finish"] do
            {:ok, handles} = Lmstream.submit(rt, prompt, opts)
            wait_finished(handles, System.monotonic_time(:millisecond) + 10_000)
            handles |> Lmstream.chunks(timeout: 10_000) |> Enum.to_list()
          else
            consume_stream(
              Lmstream.stream(rt, prompt, opts),
              v["consumer"]["cancel_after_chunks"]
            )
          end

        by_item = Enum.group_by(got, & &1.batch_index)
        assert map_size(by_item) == length(v["expect"])

        for {exp, i} <- Enum.with_index(v["expect"]) do
          check_chunks(exp, Map.fetch!(by_item, i))
        end

      code ->
        err =
          assert_raise Lmstream.Error, fn ->
            rt |> Lmstream.stream(prompt, opts) |> Enum.to_list()
          end

        assert Atom.to_string(err.code) == code, Exception.message(err)
        assert is_binary(err.message) and err.message != ""
    end

    assert_no_select_left()
    # slots freed (this also keeps rt referenced, so it is not collected
    # while handles from submit/3 are read: handles do not hold it)
    assert_slots_freed(rt)
  end

  defp assert_slots_freed(rt, tries \\ 500) do
    cond do
      Lmstream.stats(rt).active_slots == 0 -> :ok
      tries == 0 -> flunk("active_slots stays #{Lmstream.stats(rt).active_slots}")
      true -> Process.sleep(2) && assert_slots_freed(rt, tries - 1)
    end
  end

  defp consume_stream(stream, nil), do: Enum.to_list(stream)

  defp consume_stream(stream, n) do
    stream
    |> Enum.reduce({[], 0}, fn c, {acc, k} ->
      k = if c.finished, do: k, else: k + 1
      if not c.finished and k == n, do: assert(Lmstream.cancel(c.ref) == :ok)
      {[c | acc], k}
    end)
    |> elem(0)
    |> Enum.reverse()
  end

  defp wait_finished(handles, deadline) do
    done =
      Enum.all?(handles, fn h ->
        {:ok, %{finished: fin}} = Lmstream.info(h)
        fin
      end)

    cond do
      done -> :ok
      System.monotonic_time(:millisecond) > deadline -> flunk("stream did not finish")
      true -> Process.sleep(1) && wait_finished(handles, deadline)
    end
  end

  defp assert_no_select_left do
    refute_received {:select, _, _, _}
  end

  # The Go runner's CheckChunks.
  defp check_chunks(exp, got) do
    assert got != []

    got
    |> Enum.with_index()
    |> Enum.each(fn {c, i} ->
      assert String.valid?(c.text), "I1: chunk #{i} is not UTF-8: #{inspect(c.text)}"
      assert c.finished == (i == length(got) - 1), "I3: exactly the last chunk is terminal"
    end)

    last = List.last(got)
    assert Atom.to_string(last.reason) == exp["reason"]
    assert error_code(last) == (exp["error_code"] || 0), inspect(last.error)
    assert Enum.map_join(got, & &1.text) == exp["text"], "I2: concatenated text"
    assert Enum.flat_map(got, & &1.token_ids) == exp["token_ids"], "I4: concatenated token ids"

    if (exp["max_chunks"] || 0) > 0 do
      assert length(got) <= exp["max_chunks"], "queue limit bounds the chunks"
    end

    if exp["chunks"] do
      want =
        Enum.map(exp["chunks"], fn c ->
          {c["token_ids"] || [], c["text"], c["finished"] || false, c["reason"],
           c["error_code"] || 0}
        end)

      have =
        Enum.map(got, fn %Chunk{} = c ->
          {c.token_ids, c.text, c.finished, (c.finished && Atom.to_string(c.reason)) || nil,
           error_code(c)}
        end)

      assert have == want, "chunk sequence"
    end
  end

  defp error_code(%Chunk{error: nil}), do: 0
  defp error_code(%Chunk{error: {code, _}}), do: Lmstream.Error.code_value(code)

  # ---- subscribe/4 ------------------------------------------------------

  defp run_subscribe(v) do
    rt = runtime(v)
    {prompt, opts} = request(v)

    case v["expect_submit_error"] do
      nil ->
        {:ok, refs} = Lmstream.subscribe(rt, prompt, opts)
        refs = List.wrap(refs)
        assert length(refs) == length(v["expect"])
        n = v["consumer"]["cancel_after_chunks"]

        for {ref, exp} <- Enum.zip(refs, v["expect"]) do
          check_messages(exp, receive_all(ref, n, []))
        end

        # Exactly one terminal: nothing follows it.
        for ref <- refs, do: refute_receive({^ref, _}, 50)
        assert_slots_freed(rt)

      code ->
        assert {:error, {got, msg}} = Lmstream.subscribe(rt, prompt, opts)
        assert Atom.to_string(got) == code, msg
    end
  end

  defp receive_all(ref, cancel_after, acc) do
    receive do
      {^ref, {:chunk, ids, text}} ->
        acc = [{:chunk, ids, text} | acc]
        if cancel_after && length(acc) == cancel_after, do: assert(Lmstream.cancel(ref) == :ok)
        receive_all(ref, cancel_after, acc)

      {^ref, {:done, reason, usage}} ->
        assert is_map(usage) and is_integer(usage.generated_tokens)
        Enum.reverse([{:done, reason, 0} | acc])

      {^ref, {:error, code, msg}} ->
        assert is_binary(msg)
        Enum.reverse([{:done, :error, Lmstream.Error.code_value(code)} | acc])
    after
      10_000 -> flunk("no terminal message after #{length(acc)} chunks")
    end
  end

  defp check_messages(exp, msgs) do
    {chunks, [{:done, reason, code}]} = Enum.split(msgs, -1)
    assert Atom.to_string(reason) == exp["reason"]
    assert code == (exp["error_code"] || 0)

    assert Enum.map_join(chunks, fn {:chunk, _, t} -> t end) == exp["text"],
           "I2: concatenated text"

    assert Enum.flat_map(chunks, fn {:chunk, ids, _} -> ids end) == exp["token_ids"],
           "I4: token ids"

    for {:chunk, ids, text} <- chunks do
      assert String.valid?(text)
      assert ids != [] or text != "", "a chunk message carries something"
    end

    if exp["chunks"] do
      # The terminal chunk's content, if any, arrives as a last chunk message.
      want =
        Enum.flat_map(exp["chunks"], fn c ->
          ids = c["token_ids"] || []

          if c["finished"] && ids == [] && c["text"] == "",
            do: [],
            else: [{:chunk, ids, c["text"]}]
        end)

      assert chunks == want, "chunk sequence"
    end
  end
end

defmodule Lmstream.RandomStreamsTest do
  @moduledoc """
  Random vocabularies, bursts, stop sets and intervals from generate.py's
  oracle (as the Go suite's TestRandomStreams), through stream/3.
  LMSTREAM_RANDOM_SEED and LMSTREAM_RANDOM_COUNT choose them.
  """
  use ExUnit.Case, async: true

  @generate Path.expand("../../../tests/conformance/generate.py", __DIR__)

  test "random streams agree with the oracle" do
    python = System.find_executable("python3")

    if python == nil or not File.exists?(@generate) do
      IO.puts("skipped: python3 or generate.py missing")
    else
      seed = System.get_env("LMSTREAM_RANDOM_SEED", "20261122")
      count = System.get_env("LMSTREAM_RANDOM_COUNT", "150")
      {out, 0} = System.cmd(python, [@generate, "--random", count, seed])
      vectors = Lmstream.JSON.decode!(out)
      assert length(vectors) == String.to_integer(count)

      vectors
      |> Task.async_stream(&run/1, max_concurrency: 16, timeout: 30_000)
      |> Enum.each(fn {:ok, :ok} -> :ok end)
    end
  end

  defp run(v) do
    {:ok, rt} = Lmstream.open(v["runtime"])
    {prompt, req} = Map.pop(v["request"], "prompt")
    ch = v["channel"]

    opts =
      Enum.map(req, fn {k, val} -> {String.to_atom(k), val} end) ++
        [
          stream_interval: ch["interval"],
          skip_special_tokens: ch["skip_special"],
          queue_limit: ch["queue_limit"],
          timeout: 10_000
        ]

    got = rt |> Lmstream.stream(prompt, opts) |> Enum.to_list()
    [exp] = v["expect"]
    want = Enum.map(exp["chunks"], &{&1["token_ids"], &1["text"], &1["finished"] || false})
    have = Enum.map(got, &{&1.token_ids, &1.text, &1.finished})
    assert have == want, v["name"]
    assert Atom.to_string(List.last(got).reason) == exp["reason"], v["name"]
    :ok
  end
end
