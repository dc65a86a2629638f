defmodule Lmstream.Chunk do
  @moduledoc """
  One chunk of a stream: the tokens one engine iteration (or several, when
  the stream interval or coalescing merged them) accepted, and the text they
  completed. `text` is always well-formed UTF-8.

    * `token_ids` — generated token ids, special tokens included
    * `text` — the new text (may be `""`)
    * `finished` — `true` on the terminal chunk, the last of every stream
    * `reason` — on the terminal chunk: `:end_id`, `:length`, `:stop_words`,
      `:cancelled` or `:error`; `nil` before
    * `usage` — on the terminal chunk: a map with `:prompt_tokens`,
      `:generated_tokens`, `:ttft_ms`, `:tpot_ms`, `:draft_tokens_proposed`,
      `:draft_tokens_accepted`, `:verify_passes`, `:cached_tokens` (prompt
      tokens found in the prefix cache, not prefilled again); `nil` before
    * `error` — `{code, message}` when `reason` is `:error`, else `nil`
    * `batch_index` — which prompt of a batch request this stream is
    * `ref` — the stream's handle, for `Lmstream.cancel/1`
    * `logprobs` — when the request set `logprobs: true`, one map per token
      id: `%{token_id: id, logprob: float, bytes: binary, top_logprobs:
      [%{token_id: id, logprob: float, bytes: binary}, ...]}` (the `bytes`
      are the token's piece, maybe part of a character; `top_logprobs` the
      `:top_logprobs` most likely tokens, most likely first); `nil` for a
      request without them or a chunk with no tokens. A logprob is the
      log-softmax of the model's logits after penalties, at temperature 1
      (see `lms_token_logprob` in lmstream.h).
    * `reply` — for a request that parses its answer (a chat with `tools:`,
      or a model whose template thinks), this chunk's share of it, on every
      chunk of the stream: `%{content: binary, reasoning: binary,
      tool_calls: [%{index: i, id: binary, name: binary, arguments:
      binary}]}`. `content` is the answer, `reasoning` the model's thinking
      (OpenAI's `reasoning_content`), and each tool call arrives as a delta:
      its first has its `index`, `id` (`"call_..."`), `name` and the
      arguments' JSON text so far; later ones with the same `index` and an
      `id` of `""` add arguments. Markers such as `<tool_call>` belong to
      none of them (`text` keeps the raw output). `nil` for other requests
      (see `lms_chunk.has_reply` in lmstream.h).
  """
  defstruct token_ids: [],
            text: "",
            finished: false,
            reason: nil,
            usage: nil,
            error: nil,
            batch_index: 0,
            ref: nil,
            logprobs: nil,
            reply: nil

  @type t :: %__MODULE__{
          token_ids: [integer],
          text: String.t(),
          finished: boolean,
          reason: nil | Lmstream.finish_reason(),
          usage: nil | map,
          error: nil | {atom | integer, String.t()},
          batch_index: non_neg_integer,
          ref: reference | nil,
          logprobs: nil | [map],
          reply: nil | reply
        }

  @type tool_call_delta :: %{
          index: non_neg_integer,
          id: String.t(),
          name: String.t(),
          arguments: String.t()
        }
  @type reply :: %{content: String.t(), reasoning: String.t(), tool_calls: [tool_call_delta]}

  @doc """
  The whole reply of a stream's chunks: their contents and reasonings
  joined, and each tool call's deltas assembled into one map with its whole
  `arguments` (a delta with an `id`, or an `index` not seen yet, begins a
  call; one without adds to the call of its index). `nil` when no chunk
  has a reply.
  """
  @spec join_replies(Enumerable.t()) :: nil | reply
  def join_replies(chunks) do
    replies = for %__MODULE__{reply: r} <- chunks, r != nil, do: r

    if replies == [] do
      nil
    else
      # calls: index -> position, newest first in acc
      {calls, _} =
        replies
        |> Enum.flat_map(& &1.tool_calls)
        |> Enum.reduce({[], %{}}, fn d, {acc, at} ->
          if d.id != "" or not Map.has_key?(at, d.index) do
            {[%{d | arguments: [d.arguments]} | acc], Map.put(at, d.index, length(acc))}
          else
            pos = length(acc) - 1 - Map.fetch!(at, d.index)
            {List.update_at(acc, pos, &%{&1 | arguments: [&1.arguments, d.arguments]}), at}
          end
        end)

      %{
        content: replies |> Enum.map(& &1.content) |> IO.iodata_to_binary(),
        reasoning: replies |> Enum.map(& &1.reasoning) |> IO.iodata_to_binary(),
        tool_calls:
          calls
          |> Enum.reverse()
          |> Enum.map(&%{&1 | arguments: IO.iodata_to_binary(&1.arguments)})
      }
    end
  end
end
