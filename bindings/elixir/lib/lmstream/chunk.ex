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
      `:draft_tokens_accepted`, `:verify_passes`; `nil` before
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
  """
  defstruct token_ids: [],
            text: "",
            finished: false,
            reason: nil,
            usage: nil,
            error: nil,
            batch_index: 0,
            ref: nil,
            logprobs: nil

  @type t :: %__MODULE__{
          token_ids: [integer],
          text: String.t(),
          finished: boolean,
          reason: nil | Lmstream.finish_reason(),
          usage: nil | map,
          error: nil | {atom | integer, String.t()},
          batch_index: non_neg_integer,
          ref: reference | nil,
          logprobs: nil | [map]
        }
end
