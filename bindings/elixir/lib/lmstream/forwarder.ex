defmodule Lmstream.Forwarder do
  @moduledoc false
  # One small process per subscribed stream. It owns the channel's
  # enif_select (so the NIF monitors it, not the consumer), monitors the
  # consumer, and turns chunks into messages:
  #
  #   {ref, {:chunk, token_ids, text}}   each chunk with tokens or text
  #   {ref, {:done, reason, usage}}      the terminal, or
  #   {ref, {:error, code, message}}     the terminal of a failed stream
  #
  # Backpressure without the consumer's cooperation: the forwarder pops only
  # while the consumer's mailbox holds fewer than `window` messages. While it
  # waits, the channel's bounded queue coalesces new chunks (or pauses the
  # request with queue_policy: :pause), so a stalled consumer costs bounded
  # memory on both sides. It polls the mailbox length with a backoff (1 ms
  # doubling to 50 ms), so stalled streams cost almost nothing.

  alias Lmstream.Nif

  @max_backoff 50

  def start(handle, pid, window, max_batch) do
    spawn(fn -> init(handle, pid, window, max_batch) end)
  end

  defp init(h, pid, window, max_batch) do
    mref = Process.monitor(pid)

    st = %{
      h: h,
      pid: pid,
      mref: mref,
      window: window,
      max: max_batch,
      sref: make_ref(),
      local: node(pid) == node()
    }

    try do
      loop(st, 1)
    rescue
      e ->
        Nif.close(h)
        send(pid, {h, {:error, :internal, "lmstream forwarder: " <> Exception.message(e)}})
    end
  end

  defp loop(st, backoff) do
    case room(st) do
      :gone ->
        Nif.close(st.h)

      0 ->
        # The consumer is behind: do not pop; let the channel coalesce.
        receive do
          {:DOWN, ref, :process, _, _} when ref == st.mref -> Nif.close(st.h)
        after
          backoff -> loop(st, min(backoff * 2, @max_backoff))
        end

      room ->
        case Nif.pull(st.h, min(room, st.max), st.sref) do
          {:ok, chunks, finished} ->
            Enum.each(chunks, &deliver(st, &1))
            if finished, do: Process.demonitor(st.mref, [:flush]), else: loop(st, 1)

          :armed ->
            sref = st.sref
            mref = st.mref

            receive do
              {:select, _, ^sref, :ready_input} -> loop(st, 1)
              {:DOWN, ^mref, :process, _, _} -> Nif.close(st.h)
            end

          :done ->
            :ok

          {:error, code} ->
            send(
              st.pid,
              {st.h,
               {:error, code, "stream handle: " <> Nif.strerror(Lmstream.Error.code_value(code))}}
            )
        end
    end
  end

  defp room(%{local: false, window: w}), do: w

  defp room(st) do
    case Process.info(st.pid, :message_queue_len) do
      nil -> :gone
      {:message_queue_len, n} -> max(st.window - n, 0)
    end
  end

  defp deliver(st, %{finished: false} = c) do
    send(st.pid, {st.h, {:chunk, c.token_ids, c.text}})
  end

  defp deliver(st, c) do
    if c.token_ids != [] or c.text != "" do
      send(st.pid, {st.h, {:chunk, c.token_ids, c.text}})
    end

    case c do
      %{reason: :error, error: {code, msg}} -> send(st.pid, {st.h, {:error, code, msg}})
      %{reason: reason, usage: usage} -> send(st.pid, {st.h, {:done, reason, usage}})
    end
  end
end
