defmodule Lmstream do
  @moduledoc """
  Streaming LLM generation on the BEAM, over liblmstream's C ABI.

      {:ok, rt} = Lmstream.load("models/SmolLM2-135M-Instruct.Q4_1.gguf")

      # A lazy stream of %Lmstream.Chunk{}; halting early cancels the request.
      rt |> Lmstream.stream("Tell me a joke", max_tokens: 64) |> Enum.each(&IO.write(&1.text))

      # Messages to a process.
      {:ok, ref} = Lmstream.subscribe(rt, [%{role: "user", content: "Hi"}], max_tokens: 32)
      # {ref, {:chunk, token_ids, text}} ... then exactly one of
      # {ref, {:done, reason, usage}} | {ref, {:error, code, message}}

      {:ok, text, usage} = Lmstream.generate(rt, "2 + 2 =", max_tokens: 8)

  ## How waiting works

  No dirty scheduler and no thread per stream: each stream's channel has a
  file descriptor that the NIF hands to `enif_select`; when it becomes
  readable the waiting process gets a message and drains every pending chunk
  with one short NIF call (a batch pop). 1,000 concurrent streams cost 1,000
  registered descriptors, not 1,000 threads.

  ## Prompts

    * a string — one prompt (`"prompt"`): raw text, tokenized as is, with
      no chat template
    * a list of messages (maps or keyword lists with `:role` and `:content`)
      — a chat (`"messages"`, rendered with the model's chat template first;
      `render_chat/3` shows the text)
    * a list of strings — a batch (`"prompts"`): one stream per prompt
    * `{:raw_json, json}` — a request JSON sent verbatim (tests, exotic
      fields); only channel options are allowed beside it

  ## Options

  Request fields (sent in the request JSON; the library checks them and
  refuses bad values with `{:invalid_request, message}`): `:max_tokens`,
  `:temperature`, `:top_p`, `:top_k`, `:min_p`, `:seed`, `:stop` (string or
  list), `:stop_token_ids`, `:include_stop`, `:tpot_slo_ms`, `:ttft_slo_ms`,
  `:logprobs` (`true`: chunks carry each token's logprob, `Lmstream.Chunk`)
  and `:top_logprobs` (0..20 alternatives per token), and structured
  output: `:response_format` (a map or keyword list as OpenAI defines it:
  `%{type: "json_object"}` or `%{type: "json_schema", json_schema: %{name:
  ..., schema: %{...}}}`, nested values encoded as JSON) or `:grammar`
  (GBNF text). A chat takes tools as OpenAI's API has them: `:tools` (a
  list of `%{type: "function", function: %{name: ..., description: ...,
  parameters: %{...}}}`), `:tool_choice` (`"auto"`, `"none"`, `"required"`
  or `%{type: "function", function: %{name: ...}}`: the last two constrain
  the output to calls whose arguments follow the schema),
  `:parallel_tool_calls`, `:reasoning_format` (`"auto"` or `"none"`) and
  `:chat_template_kwargs` (a map of template variables); the answer then
  arrives parsed in each chunk's `reply` (`Lmstream.Chunk`). Messages may
  carry `tool_calls` (arguments as JSON text or a map), `tool_call_id`,
  `name` and `reasoning_content`.
  Any other key is a backend-specific field and is sent as is (the replay
  backend's `:script`, `:scripts`, `:delay_ms`, `:hold_after`, `:error_at`, `:panic_at`);
  `:extra` (a map) is merged into the request too. Unknown fields are
  refused by the library, never ignored.

  Channel settings (checked here; bad values raise `ArgumentError`):

    * `:stream_interval` — a non-terminal chunk carries at least n tokens (1)
    * `:skip_special_tokens` — drop special tokens' text (`true`)
    * `:queue_limit` — chunks the stream's queue holds before the policy
      applies (256)
    * `:queue_policy` — `:coalesce` (merge queued deltas; default) or
      `:pause` (the request stops decoding until the consumer drains)

  Binding options: `:timeout` (ms, `stream/3` and `generate/3`: longest wait
  for the next chunk, default `:infinity`), `:max_batch` (chunks popped per
  NIF call, default 64), `:window` (`subscribe/4`: the forwarder pauses while
  the consumer's mailbox holds this many messages, default 64).
  """

  import Bitwise, only: [<<<: 2]
  alias Lmstream.{Chunk, Error, Nif, Runtime}

  @type finish_reason :: :end_id | :length | :stop_words | :cancelled | :error
  @type prompt ::
          String.t() | [String.t()] | [map | keyword] | {:raw_json, iodata}
  @type reason :: {atom | integer, String.t()}

  @request_keys [
    :max_tokens,
    :temperature,
    :top_p,
    :top_k,
    :min_p,
    :seed,
    :stop,
    :stop_token_ids,
    :include_stop,
    :tpot_slo_ms,
    :ttft_slo_ms,
    :response_format,
    :grammar,
    :logprobs,
    :top_logprobs,
    :tools,
    :tool_choice,
    :parallel_tool_calls,
    :reasoning_format,
    :chat_template_kwargs
  ]
  @channel_keys [:stream_interval, :skip_special_tokens, :queue_limit, :queue_policy]
  @binding_keys [:timeout, :max_batch, :window, :extra]

  @doc false
  def request_keys, do: @request_keys

  # ---- runtimes -------------------------------------------------------

  @doc """
  Creates a runtime from a config (map or keyword list), sent as JSON to
  `lms_runtime_create`: `backend`, `model_path`, `max_slots`, `max_queue`,
  and backend fields. Model loading runs on a dirty I/O scheduler.

  `progress: fn stage, fraction -> ... end` is called in the caller's
  process as the model loads (`lms_runtime_create_with_progress`): `stage`
  is `:open`, `:weights`, `:speculation`, `:calibration` or `:ready` (last,
  on success; later versions may add stages), `fraction` the share done,
  from 0.0 to 1.0, never decreasing.
  """
  @spec open(map | keyword) :: {:ok, Runtime.t()} | {:error, reason}
  def open(config) when is_map(config) or is_list(config) do
    config = to_map!(config, "config")
    {progress, config} = Map.pop(config, "progress")

    with {:ok, json} <- encode(config, "config") do
      case create(json, progress) do
        {:ok, res} -> {:ok, %Runtime{resource: res}}
        {:error, code, msg} -> {:error, {code, msg}}
      end
    end
  end

  def open(other),
    do: raise(ArgumentError, "Lmstream.open/1 takes a map or keyword list, got #{inspect(other)}")

  # With a :progress callback a task runs the (dirty) NIF, and the
  # library's reports come to this process as messages, so the callback
  # runs here, in the caller, while the model loads. The task's reply comes
  # from the same process as the reports, so it arrives after all of them.
  defp create(json, nil), do: Nif.runtime_create(json)

  defp create(json, progress) when is_function(progress, 2) do
    tag = make_ref()
    caller = self()
    task = Task.async(fn -> Nif.runtime_create_progress(json, caller, tag) end)
    relay_progress(task, tag, progress)
  end

  defp create(_json, other),
    do:
      raise(
        ArgumentError,
        "option :progress must be a function of 2 arguments, got #{inspect(other)}"
      )

  defp relay_progress(%Task{ref: ref} = task, tag, progress) do
    receive do
      {:lmstream_load_progress, ^tag, stage, fraction} ->
        progress.(stage, fraction)
        relay_progress(task, tag, progress)

      {^ref, result} ->
        Process.demonitor(ref, [:flush])
        result

      {:DOWN, ^ref, _, _, reason} ->
        exit(reason)
    end
  end

  @doc """
  Loads a GGUF model with the CPU backend. `model_path` is a file or a known
  model's name (`"smollm2-135m"`: its file in the model cache, see
  `pull/2`). `opts` are more config fields (`max_slots: 16`, ...) and
  `progress:` (see `open/1`).
  """
  @spec load(Path.t(), keyword | map) :: {:ok, Runtime.t()} | {:error, reason}
  def load(model_path, opts \\ []) when is_binary(model_path) do
    open(Map.merge(to_map!(opts, "options"), %{"model_path" => model_path}))
  end

  @doc "Fetches a known model into the model cache: see `Lmstream.Models.pull/2`."
  defdelegate pull(name, opts \\ []), to: Lmstream.Models

  @doc "Where a known model lives in the cache: see `Lmstream.Models.model_path/1`."
  defdelegate model_path(name), to: Lmstream.Models

  @doc """
  A runtime with the deterministic replay backend (tests, benchmarks):
  `vocab` (pieces in hex), `special_ids`, `eos_id`, `max_slots`, ...
  """
  @spec replay(keyword | map) :: {:ok, Runtime.t()} | {:error, reason}
  def replay(opts) do
    open(Map.merge(%{"backend" => "replay"}, to_map!(opts, "options")))
  end

  @doc """
  Stops the runtime now (waits for its engine loop on a dirty scheduler).
  Its running streams end with `{:error, :shutdown, _}`. Later calls with
  the runtime return `{:error, {:invalid_handle, _}}`.
  """
  @spec close(Runtime.t()) :: :ok | {:error, reason}
  def close(%Runtime{resource: r}), do: r |> Nif.runtime_destroy() |> norm()

  @doc "The runtime's counters: `max_slots`, `active_slots`, `queued`, `submitted`, `finished`, `tokens_generated`, `iterations`, `kv_bytes_in_use`, `kv_bytes_limit` (the memory the KV caches hold now and may take)."
  @spec stats(Runtime.t()) :: map | {:error, reason}
  def stats(%Runtime{resource: r}) do
    case Nif.runtime_stats(r) do
      {:ok, json} ->
        json |> Lmstream.JSON.decode!() |> Map.new(fn {k, v} -> {String.to_atom(k), v} end)

      other ->
        norm(other)
    end
  end

  @doc """
  Process-wide Go settings: `threads`, `gc_percent`, `memory_limit_bytes`.
  """
  @spec configure_process(keyword | map) :: :ok | {:error, reason}
  def configure_process(settings) do
    with {:ok, json} <- encode(to_map!(settings, "settings"), "settings") do
      norm(Nif.configure_process(json))
    end
  end

  @doc "Where the library was loaded from, its ABI version, the loader thread's CPU count."
  def library_info, do: Nif.library_info()

  # ---- introspection --------------------------------------------------

  # LMS_TOKENIZE_* and LMS_DETOKENIZE_* (include/lmstream.h).
  @tokenize_add_special 1
  @tokenize_parse_special 2
  @detokenize_skip_special 1

  @doc """
  The token ids of `text`. Options `:add_special` (the model's BOS when it
  adds one) and `:parse_special` (control-token texts such as
  `"<|im_start|>"` become their ids) both default to `true`: that is how a
  string prompt is tokenized, so `length(ids)` is its `prompt_tokens`.
  Needs a backend with a tokenizer (`{:error, {:state, _}}` on replay).
  """
  @spec tokenize(Runtime.t(), iodata, keyword) :: {:ok, [non_neg_integer]} | {:error, reason}
  def tokenize(%Runtime{resource: r}, text, opts \\ []) do
    r |> Nif.tokenize(text, tokenize_flags!(opts)) |> ok_or_norm()
  end

  @doc "The number of tokens `tokenize/3` gives, with the same options."
  @spec count_tokens(Runtime.t(), iodata, keyword) :: {:ok, non_neg_integer} | {:error, reason}
  def count_tokens(%Runtime{resource: r}, text, opts \\ []) do
    r |> Nif.count_tokens(text, tokenize_flags!(opts)) |> ok_or_norm()
  end

  @doc """
  The bytes of the pieces of `ids` (`skip_special: true` leaves out
  special tokens). They are the raw pieces: ids that split a character give
  a binary that is not valid UTF-8 on its own.
  """
  @spec detokenize(Runtime.t(), [integer], keyword) :: {:ok, binary} | {:error, reason}
  def detokenize(%Runtime{resource: r}, ids, opts \\ []) when is_list(ids) do
    unless Enum.all?(ids, &(is_integer(&1) and &1 >= 0 and &1 < 1 <<< 31)) do
      raise ArgumentError,
            "ids must be a list of token ids (integers in [0, 2^31)), got #{inspect(ids, limit: 5)}"
    end

    flags = if bool_opt!(opts, :skip_special, false), do: @detokenize_skip_special, else: 0
    r |> Nif.detokenize(ids, flags) |> ok_or_norm()
  end

  @doc """
  The model's metadata: `:architecture`, `:name`, `:context_length`
  (trained), `:runtime_context_length`, `:vocab_size`, `:bos` and `:eos`
  (`%{id:, text:, end_of_generation:}` or `nil`), `:special_tokens` (a
  list of those), `:chat_template` (the text that renders messages: the
  config's `chat_template`, else the model's) and `:chat_renderer`
  (`"jinja"`, a fallback family, or `""`).
  """
  @spec model_info(Runtime.t()) :: {:ok, map} | {:error, reason}
  def model_info(%Runtime{resource: r}) do
    case Nif.model_info(r) do
      {:ok, json} -> {:ok, json |> Lmstream.JSON.decode!() |> atomize_info()}
      other -> norm(other)
    end
  end

  @info_keys ~w(architecture name context_length runtime_context_length vocab_size bos eos
                special_tokens chat_template chat_renderer id text end_of_generation)

  defp atomize_info(m) when is_map(m) do
    Map.new(m, fn {k, v} ->
      {if(k in @info_keys, do: String.to_atom(k), else: k), atomize_info(v)}
    end)
  end

  defp atomize_info(l) when is_list(l), do: Enum.map(l, &atomize_info/1)
  defp atomize_info(v), do: v

  # The request fields that shape a chat's prompt (lms_render_chat).
  @render_chat_fields [:tools, :tool_choice, :chat_template_kwargs]

  @doc """
  The prompt text a list of messages becomes: what `stream/3` with those
  messages feeds the model, rendered by the model's chat template (or the
  runtime config's `chat_template`). `add_generation_prompt: false` leaves
  out the assistant header at the end. `:tools`, `:tool_choice` and
  `:chat_template_kwargs`, as `stream/3` takes them, make it the exact
  prompt of such a request, refused as the request would be (a template
  that ignores tools is `{:error, {:invalid_request, _}}`).
  """
  @spec render_chat(Runtime.t(), [map | keyword], keyword) :: {:ok, String.t()} | {:error, reason}
  def render_chat(%Runtime{resource: r}, messages, opts \\ []) do
    unless is_list(messages) and messages != [] and Enum.all?(messages, &message?/1) do
      raise ArgumentError,
            "messages must be a non-empty list of %{role: ..., content: ...}, got #{inspect(messages, limit: 5)}"
    end

    case Keyword.keys(opts) -- [:add_generation_prompt | @render_chat_fields] do
      [] -> :ok
      unknown -> raise ArgumentError, "render_chat/3: unknown options #{inspect(unknown)}"
    end

    gen = bool_opt!(opts, :add_generation_prompt, true)

    req =
      opts
      |> Keyword.take(@render_chat_fields)
      |> Map.new(fn {k, v} -> {Atom.to_string(k), v} end)
      |> Map.merge(%{"messages" => Enum.map(messages, &Map.new/1), "add_generation_prompt" => gen})

    with {:ok, json} <- encode(req, "messages") do
      r |> Nif.render_chat(json) |> ok_or_norm()
    end
  end

  defp tokenize_flags!(opts) do
    add = if bool_opt!(opts, :add_special, true), do: @tokenize_add_special, else: 0
    parse = if bool_opt!(opts, :parse_special, true), do: @tokenize_parse_special, else: 0
    add + parse
  end

  defp bool_opt!(opts, key, default) do
    case Keyword.get(opts, key, default) do
      b when is_boolean(b) ->
        b

      other ->
        raise ArgumentError, "option #{inspect(key)} must be a boolean, got #{inspect(other)}"
    end
  end

  defp ok_or_norm({:ok, _} = ok), do: ok
  defp ok_or_norm(other), do: norm(other)

  # ---- streams --------------------------------------------------------

  @doc """
  A lazy `Stream` of `%Lmstream.Chunk{}`. The request is submitted when the
  stream is first enumerated; a refused request raises `Lmstream.Error`
  (`code` `:invalid_request`, `:bad_json`, `:capacity`, ...). The last chunk
  has `finished: true`. Halting early (`Enum.take/2`, an exception, `throw`)
  cancels the request and frees its slot. The enumerating process is
  monitored: if it exits mid-stream the request is cancelled too.

  For a batch (a list of prompts) the chunks of all items arrive in one
  stream, in arrival order, told apart by `batch_index`; the stream ends
  after every item's terminal chunk.
  """
  @spec stream(Runtime.t(), prompt, keyword | map) :: Enumerable.t()
  def stream(%Runtime{} = rt, prompt, opts \\ []) do
    opts = opts!(opts)
    prepared = prepare!(prompt, opts)
    _ = channel_settings!(opts)
    _ = max_batch(opts)

    Stream.resource(
      fn ->
        case submit_prepared(rt, prepared, opts) do
          {:ok, handles} -> start_state(handles, opts, rt)
          {:error, {code, msg}} -> raise Error, code: code, message: msg
        end
      end,
      &next_chunks/1,
      &close_state/1
    )
  end

  @doc """
  Submits a request now and returns its stream handles (one per prompt),
  to be read with `chunks/2`. Handles that are never read are released when
  garbage-collected (which cancels their requests). Handles do not keep the
  runtime alive: keep it referenced while you read them (a stream from
  `stream/3` does that itself).
  """
  @spec submit(Runtime.t(), prompt, keyword | map) :: {:ok, [reference]} | {:error, reason}
  def submit(%Runtime{} = rt, prompt, opts \\ []) do
    opts = opts!(opts)
    submit_prepared(rt, prepare!(prompt, opts), opts)
  end

  @doc """
  A lazy stream of the chunks of handles from `submit/3` (one handle or a
  list). Halting it early cancels the requests. Options: `:timeout`,
  `:max_batch`.
  """
  @spec chunks(reference | [reference], keyword) :: Enumerable.t()
  def chunks(handles, opts \\ []) do
    opts = opts!(opts)
    handles = List.wrap(handles)
    Stream.resource(fn -> start_state(handles, opts, nil) end, &next_chunks/1, &close_state/1)
  end

  @doc """
  Streams to `pid` (default: the caller) as messages:
  `{ref, {:chunk, token_ids, text}}` for each chunk, then exactly one
  `{ref, {:done, reason, usage}}` or `{ref, {:error, code, message}}`.
  Returns `{:ok, ref}` (`{:ok, [ref]}` for a batch) or `{:error, reason}`
  when the request is refused.

  A small forwarder process per stream waits on the channel (enif_select)
  and sends the messages; `pid` need not cooperate. The forwarder monitors
  `pid`: if it exits the request is cancelled. It pops only while `pid`'s
  mailbox holds fewer than `:window` messages, so a slow consumer's memory
  stays bounded (queued chunks coalesce in the channel meanwhile).
  """
  @spec subscribe(Runtime.t(), prompt, keyword | map, pid) ::
          {:ok, reference | [reference]} | {:error, reason}
  def subscribe(%Runtime{} = rt, prompt, opts \\ [], pid \\ self()) when is_pid(pid) do
    opts = opts!(opts)
    prepared = prepare!(prompt, opts)
    window = Keyword.get(opts, :window, 64)

    unless is_integer(window) and window >= 1 do
      raise ArgumentError, "option :window must be a positive integer, got #{inspect(window)}"
    end

    mb = max_batch(opts)

    case submit_prepared(rt, prepared, opts) do
      {:ok, handles} ->
        Enum.each(handles, &Lmstream.Forwarder.start(&1, pid, window, mb))

        case {prepared, handles} do
          {{_json, 1, false}, [h]} -> {:ok, h}
          _ -> {:ok, handles}
        end

      error ->
        error
    end
  end

  @doc """
  Cancels a stream (a `subscribe/4` ref, `chunk.ref`, a `submit/3` handle).
  Fire-and-forget and idempotent: the stream still ends with its terminal
  (`:cancelled` unless it had already finished otherwise). After the stream
  is over and released: `{:error, {:invalid_handle, _}}`.
  """
  @spec cancel(reference | [reference]) :: :ok | {:error, reason}
  def cancel(refs) when is_list(refs) do
    Enum.reduce(refs, :ok, fn r, acc ->
      case cancel(r) do
        :ok -> acc
        err -> err
      end
    end)
  end

  def cancel(ref) when is_reference(ref) do
    ref |> Nif.cancel() |> norm()
  rescue
    ArgumentError -> {:error, {:invalid_argument, "not a stream handle: #{inspect(ref)}"}}
  end

  def cancel(other), do: {:error, {:invalid_argument, "not a stream handle: #{inspect(other)}"}}

  @doc "A stream handle's state: `{:ok, %{finished: bool, reason: atom, pending: n}}`."
  def info(ref) when is_reference(ref) do
    case Nif.state(ref) do
      {:ok, fin, reason, pending} -> {:ok, %{finished: fin, reason: reason, pending: pending}}
      other -> norm(other)
    end
  end

  @doc """
  Runs one prompt to the end in the calling process:
  `{:ok, text, usage}` (usage includes `:finish_reason`) or
  `{:error, {code, message}}` (a refused request or an error terminal).
  """
  @spec generate(Runtime.t(), String.t() | [map | keyword], keyword | map) ::
          {:ok, String.t(), map} | {:error, reason}
  def generate(%Runtime{} = rt, prompt, opts \\ []) do
    if is_list(prompt) and prompt != [] and Enum.all?(prompt, &is_binary/1) do
      raise ArgumentError, "generate/3 takes one prompt; use stream/3 or subscribe/4 for a batch"
    end

    {text, last} =
      rt
      |> stream(prompt, opts)
      |> Enum.reduce({[], nil}, fn c, {acc, _} -> {[acc | c.text], c} end)

    case last do
      %Chunk{reason: :error, error: {code, msg}} ->
        {:error, {code, msg}}

      %Chunk{usage: u, reason: r} ->
        {:ok, IO.iodata_to_binary(text), Map.put(u, :finish_reason, r)}
    end
  rescue
    e in Error -> {:error, {e.code, e.message}}
  end

  # ---- stream internals -------------------------------------------------

  defp start_state(handles, opts, rt) do
    %{
      live: handles,
      all: handles,
      sref: make_ref(),
      max: max_batch(opts),
      timeout: Keyword.get(opts, :timeout, :infinity),
      # Keeps the runtime alive while the stream is consumed.
      rt: rt
    }
  end

  defp next_chunks(%{live: []} = st), do: {:halt, st}

  defp next_chunks(st) do
    # One NIF call per stream per wake-up: pull pops what is pending, or
    # arms enif_select when nothing is.
    case pull_all(st.live, st, [], []) do
      {[], []} ->
        {:halt, %{st | live: []}}

      {[], live} ->
        next_chunks(wait(%{st | live: live}))

      {chunks, live} ->
        {chunks, %{st | live: live}}
    end
  end

  defp pull_all([], _st, acc, live), do: {Enum.concat(Enum.reverse(acc)), Enum.reverse(live)}

  defp pull_all([h | rest], st, acc, live) do
    case Nif.pull(h, st.max, st.sref) do
      {:ok, chunks, true} ->
        pull_all(rest, st, [chunks | acc], live)

      {:ok, chunks, false} ->
        pull_all(rest, st, [chunks | acc], [h | live])

      :armed ->
        pull_all(rest, st, acc, [h | live])

      :done ->
        pull_all(rest, st, acc, live)

      {:error, code} ->
        raise Error,
          code: code,
          message: "stream handle: " <> Nif.strerror(Error.code_value(code))
    end
  end

  defp wait(%{sref: sref} = st) do
    receive do
      {:select, _, ^sref, :ready_input} -> st
    after
      st.timeout ->
        raise Error, code: :timeout, message: "no chunk within #{st.timeout} ms"
    end
  end

  defp close_state(st) do
    Enum.each(st.all, &Nif.close/1)
    flush_selects(st.sref)
  end

  defp flush_selects(sref) do
    receive do
      {:select, _, ^sref, _} -> flush_selects(sref)
    after
      0 -> :ok
    end
  end

  # ---- requests ---------------------------------------------------------

  # {json, n_streams, batch?}
  defp prepare!({:raw_json, json}, opts) do
    extra = Keyword.drop(opts, @channel_keys ++ @binding_keys)

    if extra != [] do
      raise ArgumentError,
            "with {:raw_json, _} only channel options are allowed, got #{inspect(Keyword.keys(extra))}"
    end

    json = IO.iodata_to_binary(json)

    n =
      case Lmstream.JSON.decode(json) do
        {:ok, %{"prompts" => ps}} when is_list(ps) and ps != [] -> length(ps)
        _ -> 1
      end

    {json, n, n > 1}
  end

  defp prepare!(prompt, opts) do
    {base, n, batch} =
      cond do
        is_binary(prompt) ->
          {%{"prompt" => prompt}, 1, false}

        is_list(prompt) and prompt != [] and Enum.all?(prompt, &is_binary/1) ->
          {%{"prompts" => prompt}, length(prompt), true}

        is_list(prompt) and prompt != [] and Enum.all?(prompt, &message?/1) ->
          {%{"messages" => Enum.map(prompt, &Map.new/1)}, 1, false}

        true ->
          raise ArgumentError,
                "prompt must be a string, a list of strings (a batch), a list of messages " <>
                  "(%{role: ..., content: ...}) or {:raw_json, json}, got #{inspect(prompt, limit: 5)}"
      end

    fields =
      opts
      |> Keyword.drop(@channel_keys ++ @binding_keys)
      |> Map.new(fn {k, v} -> {Atom.to_string(k), v} end)
      |> Map.merge(stringify_keys(Keyword.get(opts, :extra, %{})))

    case Lmstream.JSON.encode(Map.merge(fields, base)) do
      {:ok, json} -> {json, n, batch}
      {:error, msg} -> raise ArgumentError, "request options: #{msg}"
    end
  end

  defp message?(m) when is_map(m), do: true
  defp message?(m) when is_list(m), do: Keyword.keyword?(m)
  defp message?(_), do: false

  defp stringify_keys(m) when is_map(m), do: Map.new(m, fn {k, v} -> {to_string(k), v} end)

  defp stringify_keys(other),
    do: raise(ArgumentError, "option :extra must be a map, got #{inspect(other)}")

  defp submit_prepared(%Runtime{resource: r}, {json, n, _batch}, opts) do
    {interval, skip, limit, policy} = channel_settings!(opts)

    channels =
      Enum.reduce_while(1..n, [], fn _, acc ->
        case Nif.channel_open(interval, skip, limit, policy) do
          {:ok, ch} -> {:cont, [ch | acc]}
          err -> {:halt, {err, acc}}
        end
      end)

    case channels do
      {err, opened} ->
        Enum.each(opened, &Nif.close/1)
        norm(err)

      chans ->
        chans = Enum.reverse(chans)

        case Nif.submit(r, json, chans) do
          :ok ->
            {:ok, chans}

          err ->
            Enum.each(chans, &Nif.close/1)
            norm(err)
        end
    end
  end

  defp channel_settings!(opts) do
    interval = Keyword.get(opts, :stream_interval, 1)
    skip = Keyword.get(opts, :skip_special_tokens, true)
    limit = Keyword.get(opts, :queue_limit, 256)
    policy = Keyword.get(opts, :queue_policy, :coalesce)

    unless is_integer(interval) and interval >= 0 and interval < 1 <<< 31 do
      raise ArgumentError,
            "option :stream_interval must be a non-negative integer, got #{inspect(interval)}"
    end

    unless is_boolean(skip) do
      raise ArgumentError, "option :skip_special_tokens must be a boolean, got #{inspect(skip)}"
    end

    unless is_integer(limit) and limit >= 1 and limit < 1 <<< 31 do
      raise ArgumentError, "option :queue_limit must be a positive integer, got #{inspect(limit)}"
    end

    policy =
      case policy do
        :coalesce ->
          0

        :pause ->
          1

        "coalesce" ->
          0

        "pause" ->
          1

        other ->
          raise ArgumentError,
                "option :queue_policy must be :coalesce or :pause, got #{inspect(other)}"
      end

    {interval, skip, limit, policy}
  end

  defp max_batch(opts) do
    case Keyword.get(opts, :max_batch, 64) do
      n when is_integer(n) and n >= 1 ->
        min(n, 256)

      other ->
        raise ArgumentError, "option :max_batch must be a positive integer, got #{inspect(other)}"
    end
  end

  defp opts!(opts) when is_map(opts) do
    Enum.map(opts, fn
      {k, v} when is_atom(k) -> {k, v}
      {k, v} when is_binary(k) -> {String.to_atom(k), v}
      kv -> raise ArgumentError, "bad option #{inspect(kv)}"
    end)
  end

  defp opts!(opts) when is_list(opts) do
    unless Keyword.keyword?(opts) do
      raise ArgumentError,
            "options must be a keyword list or a map, got #{inspect(opts, limit: 5)}"
    end

    opts
  end

  defp opts!(opts),
    do: raise(ArgumentError, "options must be a keyword list or a map, got #{inspect(opts)}")

  defp to_map!(m, _what) when is_map(m), do: Map.new(m, fn {k, v} -> {to_string(k), v} end)

  defp to_map!(l, what) when is_list(l) do
    unless Keyword.keyword?(l),
      do: raise(ArgumentError, "#{what} must be a keyword list or a map")

    Map.new(l, fn {k, v} -> {Atom.to_string(k), v} end)
  end

  defp to_map!(other, what),
    do: raise(ArgumentError, "#{what} must be a keyword list or a map, got #{inspect(other)}")

  defp encode(term, what) do
    case Lmstream.JSON.encode(term) do
      {:ok, json} -> {:ok, json}
      {:error, msg} -> raise ArgumentError, "#{what}: #{msg}"
    end
  end

  defp norm(:ok), do: :ok
  defp norm({:error, code, msg}), do: {:error, {code, msg}}

  defp norm({:error, code}) when is_atom(code) or is_integer(code) do
    {:error, {code, Nif.strerror(Error.code_value(code) || -11)}}
  end
end
