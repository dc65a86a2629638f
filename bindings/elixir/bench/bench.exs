# Benchmarks of the Elixir binding on the replay backend:
#   cd bindings/elixir && mix run bench/bench.exs
#
# Two measures, for one stream and for 1,000 concurrent streams (each read by
# its own process), through stream/3 (the reading process waits with
# enif_select and pulls) and subscribe/4 (a forwarder process sends messages):
#
# 1. Throughput at saturation: scripts of single-token bursts with no pacing;
#    the engine runs as fast as it can, and we count the messages (chunks)
#    and tokens that reach the reading processes per second of wall time.
#    Under the default coalescing policy a reader that falls behind gets
#    merged chunks, so messages/s <= tokens/s; both are printed.
#
# 2. Latency from push to the receiving process, with paced scripts
#    (delay_ms: one burst per slot every d ms, so the engine is not
#    saturated). The library reports, on the terminal chunk, ttft_ms (from
#    submission to the first token) and tpot_ms (mean time per later token),
#    measured by the engine when it produces the token, i.e. when it pushes
#    the chunk. For each stream we take t_submit (just before the submit
#    call, so the error is on the pessimistic side) and the receive time of
#    each chunk in the reading process:
#      first-chunk latency = t_recv(first) - t_submit - ttft_ms       (exact
#        up to the two clocks' reads)
#      chunk latency       = t_recv(k) - (t_submit + ttft_ms + k * tpot_ms)
#        for the chunk that ends with token k: an estimate, since it uses the
#        engine's mean inter-token time; engine jitter shows up here as
#        spread in both directions (a negative value is that estimate's
#        error, not a message from the future).
#
# The table is printed at the end.

defmodule Bench do
  @vocab ["3c2f733e", "48"]

  def runtime(slots) do
    {:ok, rt} = Lmstream.replay(vocab: @vocab, eos_id: 0, max_slots: slots)
    rt
  end

  def now_us, do: System.monotonic_time(:microsecond)

  # --- one stream read by the calling process ---------------------------

  def read_stream(rt, script, opts) do
    t0 = now_us()

    {recvs, last, tokens} =
      rt
      |> Lmstream.stream("x", [script: script] ++ opts)
      |> Enum.reduce({[], nil, 0}, fn c, {acc, _, n} ->
        n = n + length(c.token_ids)
        {[{now_us(), n} | acc], c, n}
      end)

    %{t0: t0, recvs: Enum.reverse(recvs), usage: last.usage, tokens: tokens, t_end: now_us()}
  end

  def read_subscribe(rt, script, opts) do
    t0 = now_us()
    {:ok, ref} = Lmstream.subscribe(rt, "x", [script: script] ++ opts)
    {recvs, usage, tokens} = sub_loop(ref, [], 0)
    %{t0: t0, recvs: Enum.reverse(recvs), usage: usage, tokens: tokens, t_end: now_us()}
  end

  defp sub_loop(ref, acc, n) do
    receive do
      {^ref, {:chunk, ids, _}} ->
        n = n + length(ids)
        sub_loop(ref, [{now_us(), n} | acc], n)

      {^ref, {:done, _, usage}} ->
        {acc, usage, n}
    end
  end

  # --- many streams, each in its own process ---------------------------

  def run(streams, mode, script, opts, slots) do
    rt = runtime(slots)
    parent = self()
    t0 = now_us()

    for _ <- 1..streams do
      spawn(fn ->
        r =
          case mode do
            :stream -> read_stream(rt, script, opts)
            :subscribe -> read_subscribe(rt, script, opts)
          end

        send(parent, {:bench, r})
      end)
    end

    results = for _ <- 1..streams, do: receive(do: ({:bench, r} -> r))
    elapsed = (now_us() - t0) / 1.0e6
    msgs = results |> Enum.map(&length(&1.recvs)) |> Enum.sum()
    tokens = results |> Enum.map(& &1.tokens) |> Enum.sum()
    _ = Lmstream.stats(rt)
    %{elapsed: elapsed, msgs: msgs, tokens: tokens, results: results}
  end

  def latencies(results) do
    first =
      for r <- results, r.recvs != [] do
        {t, _} = hd(r.recvs)
        (t - r.t0) / 1000 - r.usage.ttft_ms
      end

    all =
      for r <- results, {t, n} <- r.recvs do
        push = r.t0 / 1000 + r.usage.ttft_ms + max(n - 1, 0) * r.usage.tpot_ms
        t / 1000 - push
      end

    {Enum.sort(first), Enum.sort(all)}
  end

  def pct([], _), do: 0.0

  def pct(sorted, p) do
    n = length(sorted)
    Enum.at(sorted, min(n - 1, max(trunc(Float.ceil(p * n)) - 1, 0)))
  end

  def fmt(x) when is_float(x), do: :erlang.float_to_binary(x, decimals: 2)
  def fmt(x), do: to_string(x)
end

IO.puts("lmstream Elixir binding benchmark (replay backend)")
IO.puts("schedulers: #{System.schedulers_online()}, #{inspect(Lmstream.library_info())}")

rows = []

# Warm-up.
Bench.run(10, :stream, List.duplicate([1], 200), [], 16)

sat_1 = List.duplicate([1], 200_000)
sat_k = List.duplicate([1], 1_000)

rows =
  for {label, n, mode, script, slots} <- [
        {"saturation", 1, :stream, sat_1, 8},
        {"saturation", 1, :subscribe, sat_1, 8},
        {"saturation", 1_000, :stream, sat_k, 1024},
        {"saturation", 1_000, :subscribe, sat_k, 1024}
      ],
      reduce: rows do
    rows ->
      r = Bench.run(n, mode, script, [], slots)
      rows ++ [{label, n, mode, r.msgs / r.elapsed, r.tokens / r.elapsed, nil, nil, r.elapsed}]
  end

paced_1 = List.duplicate([1], 500)
paced_k = List.duplicate([1], 100)

rows =
  for {label, n, mode, script, delay, slots} <- [
        {"paced 2 ms", 1, :stream, paced_1, 2, 8},
        {"paced 2 ms", 1, :subscribe, paced_1, 2, 8},
        {"paced 20 ms", 1_000, :stream, paced_k, 20, 1024},
        {"paced 20 ms", 1_000, :subscribe, paced_k, 20, 1024}
      ],
      reduce: rows do
    rows ->
      r = Bench.run(n, mode, script, [delay_ms: delay], slots)
      {first, all} = Bench.latencies(r.results)

      rows ++
        [
          {label, n, mode, r.msgs / r.elapsed, r.tokens / r.elapsed,
           {Bench.pct(first, 0.5), Bench.pct(first, 0.99)},
           {Bench.pct(all, 0.5), Bench.pct(all, 0.99)}, r.elapsed}
        ]
  end

header = [
  "scenario",
  "streams",
  "API",
  "msgs/s",
  "tokens/s",
  "first p50 ms",
  "first p99 ms",
  "chunk p50 ms",
  "chunk p99 ms",
  "wall s"
]

table =
  for {label, n, mode, mps, tps, first, all, el} <- rows do
    {f50, f99} = first || {"-", "-"}
    {a50, a99} = all || {"-", "-"}

    [label, n, mode, round(mps), round(tps), f50, f99, a50, a99, el]
    |> Enum.map(&Bench.fmt/1)
  end

widths =
  Enum.reduce([header | table], List.duplicate(0, length(header)), fn row, w ->
    Enum.zip_with(row, w, fn c, x -> max(String.length(c), x) end)
  end)

line = fn row ->
  row |> Enum.zip(widths) |> Enum.map_join("  ", fn {c, w} -> String.pad_leading(c, w) end)
end

IO.puts("")
IO.puts(line.(header))
IO.puts(widths |> Enum.map(&String.duplicate("-", &1)) |> Enum.join("  "))
Enum.each(table, &IO.puts(line.(&1)))
