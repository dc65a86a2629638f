/*
** lmstream.hpp — a header-only C++17 wrapper over the C interface of
** liblmstream (lmstream.h).
**
** The C interface hands out handles that must be released exactly once and
** chunks that must be freed exactly once, and reports failure as status
** codes that every caller has to check. In C++ each of those duties belongs
** to an object: a Runtime and a Channel release their handle in their
** destructor, a chunk is copied into a Chunk value and the library's block
** freed before the pop returns, and a failed call throws lmstream::Error.
** Nothing a wrapper object hands out points into library memory, so nothing
** can dangle when a channel or runtime goes away.
**
** The outcomes that are part of normal streaming are not exceptions:
** "nothing pending yet" and "the stream is over" come back as an empty
** std::optional (with Channel::done() telling the two apart) or as a
** Status, so a read loop never needs try/catch.
**
** Only the standard library and lmstream.h are used. Link with -llmstream
** (pkg-config --cflags --libs lmstream).
**
**   lmstream::Runtime rt(R"({"model_path": "models/x.gguf"})");
**   lmstream::Channel ch;
**   rt.submit(R"({"prompt": "Hello", "max_tokens": 64})", ch);
**   while (auto c = ch.wait_pop())
**       std::cout << c->text << std::flush;
*/
#ifndef LMSTREAM_HPP
#define LMSTREAM_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lmstream.h"

namespace lmstream {

/* A failed call. code() is the LMS_ERR_* status, so a caller can react to
** the kind of failure (LMS_ERR_CAPACITY: retry later; LMS_ERR_BAD_JSON: a
** bug) without parsing text; message() is the detail the library wrote into
** the caller's message buffer, empty for calls that have none. what()
** joins the C function, lms_strerror's name of the code and the detail,
** which is what a log line wants. The detail is kept in a runtime_error so
** that copying an Error, as exception handling may, never throws. */
class Error : public std::runtime_error {
public:
    Error(int code, const char *function, const std::string &message = std::string())
        : std::runtime_error(describe(code, function, message)), code_(code), message_(message) {}

    int code() const noexcept { return code_; }
    const char *message() const noexcept { return message_.what(); }

private:
    static std::string describe(int code, const char *function, const std::string &message) {
        std::string s = function ? function : "lmstream";
        s += ": ";
        s += lms_strerror(code);
        if (!message.empty()) {
            s += ": ";
            s += message;
        }
        return s;
    }

    int code_;
    std::runtime_error message_;
};

/* Waits without a deadline. A negative timeout means the same to the C
** interface; a name keeps call sites from reading as a typo. */
inline constexpr std::chrono::milliseconds forever{-1};

/* The outcomes of the calls that can end without a chunk: a batch pop
** (ok, empty, done) and consume (ok, interrupted, done). Values are the C
** status codes. */
enum class Status : int {
    ok = LMS_OK,
    empty = LMS_EMPTY,
    done = LMS_DONE,
    interrupted = LMS_INTERRUPTED,
};

/* Usage has no pointers, so the C struct is already a value type. */
using Usage = lms_usage;

/* A token's log-probability and piece (lms_logprob), owned. */
struct Logprob {
    int32_t token_id = 0;
    double logprob = 0;
    std::string bytes;  /* the piece; may be part of a character */
};

/* A generated token's logprob and its top alternatives (lms_token_logprob). */
struct TokenLogprob {
    int32_t token_id = 0;
    double logprob = 0;
    std::string bytes;
    std::vector<Logprob> top;  /* most likely first */
};

/* Part of one tool call the model made (lms_tool_call_delta), owned: a
** call's first delta has its id and name, later ones more of its
** arguments. Join a stream's deltas by index to get its calls. */
struct ToolCallDelta {
    int32_t index = 0;      /* the call's position among the answer's calls */
    std::string id;         /* "call_..." on the call's first delta, else "" */
    std::string name;       /* the function, on the call's first delta, else "" */
    std::string arguments;  /* more of the arguments' JSON text */
};

/* One chunk, owned. The C chunk points into a block the library allocated
** (try_pop, wait_pop, complete) or into a caller buffer that the next batch
** pop overwrites (pop_batch, consume); a Chunk copies everything out so it
** can be kept, moved into a container or handed to another thread.
** assign() reuses the vector's and strings' capacity, which is how
** pop_batch and consume avoid an allocation per chunk. */
struct Chunk {
    std::vector<int32_t> token_ids;  /* special tokens included */
    std::string text;                /* well-formed UTF-8 */
    bool finished = false;           /* the terminal chunk of its stream */
    int reason = LMS_FINISH_NOT_FINISHED;
    int error_code = 0;              /* LMS_ERR_* when reason is LMS_FINISH_ERROR */
    int batch_index = 0;
    std::string error_message;
    Usage usage{};                   /* meaningful on the terminal chunk */
    std::vector<TokenLogprob> logprobs;  /* one per token id with "logprobs": true, else empty */
    /* The parsed reply, when the request parses one (a chat with "tools",
    ** or a model whose template thinks): text split into content,
    ** reasoning and tool-call deltas, each this chunk's part. Else false
    ** and empty. */
    bool has_reply = false;
    std::string content;
    std::string reasoning;
    std::vector<ToolCallDelta> tool_calls;

    Chunk() = default;
    explicit Chunk(const lms_chunk &c) { assign(c); }

    void assign(const lms_chunk &c) {
        if (c.token_ids && c.n_token_ids)
            token_ids.assign(c.token_ids, c.token_ids + c.n_token_ids);
        else
            token_ids.clear();
        if (c.text && c.text_len)
            text.assign(c.text, c.text_len);
        else
            text.clear();
        finished = c.finished != 0;
        reason = c.reason;
        error_code = c.error_code;
        batch_index = c.batch_index;
        error_message.assign(c.error_message ? c.error_message : "");
        usage = c.usage;
        logprobs.resize(c.logprobs ? c.n_logprobs : 0);
        for (size_t i = 0; i < logprobs.size(); i++) {
            const lms_token_logprob &src = c.logprobs[i];
            TokenLogprob &dst = logprobs[i];
            dst.token_id = src.token_id;
            dst.logprob = src.logprob;
            dst.bytes.assign(src.bytes ? src.bytes : "", src.bytes ? src.n_bytes : 0);
            dst.top.resize(src.top ? src.n_top : 0);
            for (size_t k = 0; k < dst.top.size(); k++) {
                const lms_logprob &t = src.top[k];
                dst.top[k].token_id = t.token_id;
                dst.top[k].logprob = t.logprob;
                dst.top[k].bytes.assign(t.bytes ? t.bytes : "", t.bytes ? t.n_bytes : 0);
            }
        }
        has_reply = c.has_reply != 0;
        content.assign(c.content ? c.content : "", c.content ? c.content_len : 0);
        reasoning.assign(c.reasoning ? c.reasoning : "", c.reasoning ? c.reasoning_len : 0);
        tool_calls.resize(c.tool_calls ? c.n_tool_calls : 0);
        for (size_t i = 0; i < tool_calls.size(); i++) {
            const lms_tool_call_delta &src = c.tool_calls[i];
            ToolCallDelta &dst = tool_calls[i];
            dst.index = src.index;
            dst.id.assign(src.id ? src.id : "");
            dst.name.assign(src.name ? src.name : "");
            dst.arguments.assign(src.arguments ? src.arguments : "", src.arguments ? src.arguments_len : 0);
        }
    }

    /* "end_id", "length", "cancelled", ... for messages and logs. */
    const char *reason_name() const noexcept { return lms_finish_reason_name(reason); }
};

/* What lms_channel_state reports, for polling a stream without popping. */
struct ChannelState {
    bool finished = false;  /* the terminal chunk was pushed (maybe not popped) */
    int reason = LMS_FINISH_NOT_FINISHED;
    std::size_t pending = 0;
};

namespace detail {

constexpr std::size_t err_size = 1024;

/* Statuses >= 0 are outcomes the caller handles; < 0 are failures. */
inline int check(int rc, const char *function) {
    if (rc < 0) throw Error(rc, function);
    return rc;
}

/* A chunk block from the library, freed on every path out of a pop,
** including an exception thrown while copying it. */
struct ChunkFree {
    void operator()(lms_chunk *c) const noexcept { lms_chunk_free(c); }
};
using ChunkPtr = std::unique_ptr<lms_chunk, ChunkFree>;

inline int32_t timeout_ms(std::chrono::milliseconds t) noexcept {
    if (t.count() < 0) return -1;
    if (t.count() > std::numeric_limits<int32_t>::max()) return std::numeric_limits<int32_t>::max();
    return static_cast<int32_t>(t.count());
}

} // namespace detail

/* The ABI of the loaded library matches this header. Check it once at
** start-up when the library may come from elsewhere than the header. */
inline bool abi_compatible() noexcept { return lms_abi_version() == LMS_ABI_VERSION; }

inline const char *finish_reason_name(int reason) noexcept { return lms_finish_reason_name(reason); }

/* Process-wide settings (see lms_configure_process); throws on failure. */
inline void configure_process(const std::string &settings_json) {
    char err[detail::err_size] = "";
    int rc = lms_configure_process(settings_json.c_str(), err, sizeof err);
    if (rc != LMS_OK) throw Error(rc, "lms_configure_process", err);
}

class Runtime;

/* One stream's receiving end. It owns its handle: the destructor releases
** the channel, which cancels a request still running and drops what was
** not read, so leaving a scope early (a break, an exception) never leaves
** a stream generating into a queue nobody reads. Channels are move-only:
** two owners would release one handle twice, and the second release could
** hit a handle the library has since reissued to someone else. A
** moved-from Channel holds no handle; its destructor does nothing and any
** call on it throws LMS_ERR_INVALID_HANDLE.
**
** A channel outlives its runtime safely (it then holds the shutdown
** terminal chunk), so destruction order does not matter.
**
** Threads: cancel(), state() and fd() may be called from any thread while
** another pops; popping from several threads at once is not supported
** (pop_batch keeps reusable buffers in the object), nor is moving a
** Channel that another thread is using. */
class Channel {
public:
    /* Creates a channel with the library's defaults: interval 1, special
    ** tokens skipped, a queue of 256 chunks that coalesces when full. */
    Channel() { detail::check(lms_channel_create(&h_), "lms_channel_create"); }

    ~Channel() { release(); }

    Channel(const Channel &) = delete;
    Channel &operator=(const Channel &) = delete;

    Channel(Channel &&other) noexcept
        : h_(std::exchange(other.h_, 0)),
          done_(other.done_.load()),
          raw_(std::move(other.raw_)),
          buf_(std::move(other.buf_)) {}

    Channel &operator=(Channel &&other) noexcept {
        if (this != &other) {
            release();
            h_ = std::exchange(other.h_, 0);
            done_.store(other.done_.load());
            raw_ = std::move(other.raw_);
            buf_ = std::move(other.buf_);
        }
        return *this;
    }

    /* The C handle, for calls this wrapper does not cover. It stays owned
    ** by this object: do not release it. */
    lms_channel handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != 0; }

    /* Releases the channel now rather than at scope exit (see the class
    ** comment); afterwards the object is empty, as if moved from. */
    void release() noexcept {
        if (h_) lms_channel_release(std::exchange(h_, 0));
    }

    /* Settings are allowed until the channel is submitted; afterwards they
    ** throw LMS_ERR_STATE. They return *this so a channel can be set up in
    ** one expression. */
    Channel &set_interval(int32_t n) {
        detail::check(lms_channel_set_interval(h_, n), "lms_channel_set_interval");
        return *this;
    }
    Channel &set_skip_special(bool skip) {
        detail::check(lms_channel_set_skip_special(h_, skip ? 1 : 0), "lms_channel_set_skip_special");
        return *this;
    }
    Channel &set_queue(int32_t limit, int policy = LMS_QUEUE_COALESCE) {
        detail::check(lms_channel_set_queue(h_, limit, policy), "lms_channel_set_queue");
        return *this;
    }

    /* The next chunk, or an empty optional when none is pending yet or the
    ** stream is over; done() says which. */
    std::optional<Chunk> try_pop() { return pop(0, "lms_channel_try_pop"); }

    /* As try_pop, waiting up to timeout for a chunk (forever by default).
    ** A loop `while (auto c = ch.wait_pop())` reads a stream to its end:
    ** the terminal chunk is returned, and the call after it returns empty.
    ** Code that must stay interruptible waits in short timeouts instead. */
    std::optional<Chunk> wait_pop(std::chrono::milliseconds timeout = forever) {
        int32_t t = detail::timeout_ms(timeout);
        return pop(t, t == 0 ? "lms_channel_try_pop" : "lms_channel_wait_pop");
    }

    /* Pops up to max_chunks chunks in one call into out, which is resized
    ** to the number popped; its elements are reassigned in place, so a
    ** vector reused across calls stops allocating once it has grown. The
    ** chunks are copied through a buffer the Channel keeps and grows when a
    ** chunk does not fit, so LMS_ERR_BUFFER_TOO_SMALL never reaches the
    ** caller. Waits up to timeout for the first chunk (not at all by
    ** default: this is the call to make when fd() polls readable).
    ** Returns Status::ok, Status::empty (nothing before the timeout; out is
    ** empty) or Status::done (the terminal chunk was already popped). */
    Status pop_batch(std::vector<Chunk> &out,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                     std::size_t max_chunks = 64) {
        if (max_chunks == 0) max_chunks = 1;
        if (raw_.size() < max_chunks) raw_.resize(max_chunks);
        if (buf_.empty()) buf_.resize(16384);
        const int32_t t = detail::timeout_ms(timeout);
        std::size_t n = 0;
        int rc;
        while ((rc = lms_channel_pop_batch(h_, raw_.data(), max_chunks, buf_.data(), buf_.size(), t, &n)) ==
               LMS_ERR_BUFFER_TOO_SMALL) {
            /* n is the size the first chunk needs; it stays queued. */
            buf_.resize(std::max(n, 2 * buf_.size()));
        }
        if (rc == LMS_EMPTY || rc == LMS_DONE) {
            out.clear();
            if (rc == LMS_DONE) done_.store(true);
            return static_cast<Status>(rc);
        }
        detail::check(rc, "lms_channel_pop_batch");
        if (out.size() > n)
            out.erase(out.begin() + static_cast<std::ptrdiff_t>(n), out.end());
        else
            out.resize(n);
        for (std::size_t i = 0; i < n; i++) {
            out[i].assign(raw_[i]);
            if (out[i].finished) done_.store(true);
        }
        return Status::ok;
    }

    /* Calls handler(const Chunk &) on this thread for every chunk until the
    ** terminal one. The handler returns void to read everything, or bool:
    ** true to go on, false to stop (which cancels the request; chunks not
    ** yet handed to the handler stay queued). Only void and bool are
    ** accepted, because an int would invite the C convention, where 0
    ** means "go on", and so the opposite of bool's.
    **
    ** The chunk is reused between calls: copy it to keep it. An exception
    ** thrown by the handler must not unwind through the library (which is
    ** Go underneath), so it is caught at the boundary, consumption stops as
    ** if the handler had returned false, and the exception is rethrown here
    ** once the library has returned. Returns Status::ok after the terminal
    ** chunk, Status::interrupted when the handler stopped, Status::done when
    ** the stream was already read to its end. */
    template <class F>
    Status consume(F &&handler) {
        using Fn = std::remove_reference_t<F>;
        using Result = std::invoke_result_t<Fn &, const Chunk &>;
        static_assert(std::is_void_v<Result> || std::is_same_v<Result, bool>,
                      "a consume handler returns void, or bool: true to go on, false to stop");
        Consumer<Fn> ctx{&handler, &done_, Chunk(), nullptr};
        int rc = lms_channel_consume(h_, &Consumer<Fn>::call, &ctx);
        if (ctx.error) std::rethrow_exception(ctx.error);
        if (rc == LMS_DONE) done_.store(true);
        return static_cast<Status>(detail::check(rc, "lms_channel_consume"));
    }

    /* Asks the runtime to stop the request; the stream still ends with a
    ** terminal chunk (LMS_FINISH_CANCELLED unless it had already ended).
    ** Fire-and-forget and idempotent, from any thread. */
    void cancel() { detail::check(lms_channel_cancel(h_), "lms_channel_cancel"); }

    /* A descriptor that polls readable while chunks are pending or the
    ** stream is finished; drain it with pop_batch. The Channel keeps
    ** owning it: do not read or close it. */
    int fd() const {
        int out = -1;
        detail::check(lms_channel_fd(h_, &out), "lms_channel_fd");
        return out;
    }

    ChannelState state() const {
        int finished = 0, reason = 0;
        std::size_t pending = 0;
        detail::check(lms_channel_state(h_, &finished, &reason, &pending), "lms_channel_state");
        return ChannelState{finished != 0, reason, pending};
    }

    /* Whether this object has popped (or been told it missed) the terminal
    ** chunk: what distinguishes "the stream is over" from "nothing yet"
    ** after a pop that returned nothing. */
    bool done() const noexcept { return done_.load(); }

private:
    /* The C handler for consume: copies the chunk out, calls the C++
    ** handler, and turns an exception into "stop" plus a saved exception. */
    template <class Fn>
    struct Consumer {
        Fn *fn;
        std::atomic<bool> *done;
        Chunk chunk;
        std::exception_ptr error;

        static int call(const lms_chunk *c, void *user) noexcept {
            auto *self = static_cast<Consumer *>(user);
            if (c->finished) self->done->store(true);
            try {
                self->chunk.assign(*c);
                const Chunk &view = self->chunk;
                if constexpr (std::is_void_v<std::invoke_result_t<Fn &, const Chunk &>>) {
                    (*self->fn)(view);
                    return 0;
                } else {
                    return (*self->fn)(view) ? 0 : 1;
                }
            } catch (...) {
                self->error = std::current_exception();
                return 1;
            }
        }
    };

    std::optional<Chunk> pop(int32_t timeout, const char *function) {
        lms_chunk *raw = nullptr;
        int rc = timeout == 0 ? lms_channel_try_pop(h_, &raw) : lms_channel_wait_pop(h_, timeout, &raw);
        detail::ChunkPtr owned(raw);
        if (rc == LMS_EMPTY) return std::nullopt;
        if (rc == LMS_DONE) {
            done_.store(true);
            return std::nullopt;
        }
        detail::check(rc, function);
        if (!owned) throw Error(LMS_ERR_INTERNAL, function, "no chunk with LMS_OK");
        std::optional<Chunk> c(std::in_place, *owned);
        if (c->finished) done_.store(true);
        return c;
    }

    lms_channel h_ = 0;
    std::atomic<bool> done_{false};
    std::vector<lms_chunk> raw_;  /* pop_batch's chunk structs */
    std::vector<char> buf_;       /* pop_batch's ids and text */
};

/* A model and its engine loop. The destructor stops the engine: streams
** still queued or running get their terminal chunk (an LMS_ERR_SHUTDOWN
** error) and the channels stay valid until their own destructors run.
** Move-only, for the same reason as Channel. Every method may be called
** from any thread, so one Runtime, shared by reference, serves them all. */
class Runtime {
public:
    /* Throws Error with the library's message (an unreadable model file, an
    ** unknown config field) when the runtime cannot be created. */
    explicit Runtime(const std::string &config_json) {
        char err[detail::err_size] = "";
        int rc = lms_runtime_create(config_json.c_str(), &h_, err, sizeof err);
        if (rc != LMS_OK) {
            h_ = 0;
            throw Error(rc, "lms_runtime_create", err);
        }
    }

    ~Runtime() { destroy(); }

    Runtime(const Runtime &) = delete;
    Runtime &operator=(const Runtime &) = delete;
    Runtime(Runtime &&other) noexcept : h_(std::exchange(other.h_, 0)) {}
    Runtime &operator=(Runtime &&other) noexcept {
        if (this != &other) {
            destroy();
            h_ = std::exchange(other.h_, 0);
        }
        return *this;
    }

    lms_runtime handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != 0; }

    /* Stops the engine now rather than at scope exit. */
    void destroy() noexcept {
        if (h_) lms_runtime_destroy(std::exchange(h_, 0));
    }

    /* The counters as JSON; left unparsed, since this header adds no JSON
    ** dependency. */
    std::string stats() const {
        std::vector<char> buf(512);
        std::size_t len = 0;
        int rc;
        while ((rc = lms_runtime_stats(h_, buf.data(), buf.size(), &len)) == LMS_ERR_BUFFER_TOO_SMALL)
            buf.resize(len + 1);
        detail::check(rc, "lms_runtime_stats");
        return std::string(buf.data(), len);
    }

    /* Submits a request and attaches the channels, one per prompt; returns
    ** at once. Errors known before the first token (bad JSON, a bad field, a
    ** prompt too long, a full queue) throw, with the library's message, and
    ** attach nothing; later errors arrive as the streams' terminal chunks. */
    void submit(const std::string &request_json, Channel &channel) const {
        lms_channel h = channel.handle();
        submit_handles(request_json, &h, 1);
    }

    void submit(const std::string &request_json, const std::vector<Channel *> &channels) const {
        std::vector<lms_channel> hs;
        hs.reserve(channels.size());
        for (const Channel *c : channels) {
            if (!c) throw Error(LMS_ERR_INVALID_ARGUMENT, "lms_submit", "a channel pointer is null");
            hs.push_back(c->handle());
        }
        submit_handles(request_json, hs.data(), hs.size());
    }

    void submit(const std::string &request_json, std::vector<Channel> &channels) const {
        std::vector<lms_channel> hs;
        hs.reserve(channels.size());
        for (const Channel &c : channels) hs.push_back(c.handle());
        submit_handles(request_json, hs.data(), hs.size());
    }

    /* Runs a single-prompt request without a channel, blocking until it
    ** ends, and returns the whole answer as one terminal chunk. How the
    ** generation ended is in its reason: an error during generation is an
    ** LMS_FINISH_ERROR chunk, not an exception, as it would be on a
    ** channel; only failures before the first token throw. */
    Chunk complete(const std::string &request_json) const {
        char err[detail::err_size] = "";
        lms_chunk *raw = nullptr;
        int rc = lms_complete(h_, request_json.c_str(), &raw, err, sizeof err);
        detail::ChunkPtr owned(raw);
        if (rc != LMS_OK) throw Error(rc, "lms_complete", err);
        if (!owned) throw Error(LMS_ERR_INTERNAL, "lms_complete", "no chunk with LMS_OK");
        return Chunk(*owned);
    }

private:
    void submit_handles(const std::string &request_json, const lms_channel *hs, std::size_t n) const {
        char err[detail::err_size] = "";
        int rc = lms_submit(h_, request_json.c_str(), hs, n, err, sizeof err);
        if (rc != LMS_OK) throw Error(rc, "lms_submit", err);
    }

    lms_runtime h_ = 0;
};

/* One readiness descriptor for many channels (see lms_mux_create). It owns
** its handle and destroys it on destruction; the channels stay valid and
** owned by their Channel objects, and leave it. A channel whose terminal
** chunk was popped stops being listed by ready() by itself. Move-only, like
** Channel. ready() may block on one thread while others pop. */
class Mux {
public:
    Mux() { detail::check(lms_mux_create(&h_), "lms_mux_create"); }
    ~Mux() {
        if (h_) lms_mux_destroy(std::exchange(h_, 0));
    }
    Mux(const Mux &) = delete;
    Mux &operator=(const Mux &) = delete;
    Mux(Mux &&other) noexcept : h_(std::exchange(other.h_, 0)) {}
    Mux &operator=(Mux &&other) noexcept {
        if (this != &other) {
            if (h_) lms_mux_destroy(h_);
            h_ = std::exchange(other.h_, 0);
        }
        return *this;
    }

    lms_mux handle() const noexcept { return h_; }

    /* Membership; LMS_ERR_STATE when the channel is in another mux (add)
    ** or not in this one (remove). */
    void add(const Channel &ch) { detail::check(lms_mux_add(h_, ch.handle()), "lms_mux_add"); }
    void remove(const Channel &ch) { detail::check(lms_mux_remove(h_, ch.handle()), "lms_mux_remove"); }

    /* Readable while some member has chunks pending; valid while the Mux
    ** lives. */
    int fd() const {
        int out = -1;
        detail::check(lms_mux_fd(h_, &out), "lms_mux_fd");
        return out;
    }

    /* The handles of the members with chunks pending (at most max_channels),
    ** after waiting up to timeout for one (0: no wait, negative: no limit);
    ** empty on timeout. Compare them with Channel::handle(). */
    std::vector<lms_channel> ready(std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                                   std::size_t max_channels = 256) const {
        std::vector<lms_channel> out(max_channels == 0 ? 1 : max_channels);
        std::size_t n = 0;
        int rc = lms_mux_ready(h_, detail::timeout_ms(timeout), out.data(), out.size(), &n);
        detail::check(rc, "lms_mux_ready");
        out.resize(rc == LMS_OK ? n : 0);
        return out;
    }

private:
    lms_mux h_ = 0;
};

} // namespace lmstream

#endif /* LMSTREAM_HPP */
