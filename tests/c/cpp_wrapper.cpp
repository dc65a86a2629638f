/*
** cpp_wrapper.cpp — the C++ RAII wrapper (include/lmstream.hpp) against the
** real library, on the replay backend (and one test on a real model).
**
**   cpp_wrapper [--tool-model MODEL.gguf] [TEST_NAME ...]
**
** Streams read to their terminal chunk with wait_pop, pop_batch (including a
** chunk bigger than the wrapper's first buffer) and consume; cancellation;
** a consume handler that throws; ownership moving between Channel and
** Runtime objects, checked through the C API's handles; errors turning into
** lmstream::Error with the C status code and the library's message; and,
** given --tool-model (a model whose template renders tools, too slow for
** valgrind), a tool call's reply copied into Chunks.
** Prints PASS/FAIL/SKIP per test and "N passed, M failed, K skipped"; exits 1 on any
** failure. Under valgrind, timeouts stretch (the preload library is detected).
*/
#include <poll.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lmstream.hpp"

using namespace std::chrono_literals;
using lmstream::Channel;
using lmstream::Chunk;
using lmstream::Mux;
using lmstream::Runtime;
using lmstream::Status;
using lmstream::TokenLogprob;

static_assert(!std::is_copy_constructible_v<Channel> && !std::is_copy_assignable_v<Channel>,
              "a Channel must not be copyable");
static_assert(std::is_nothrow_move_constructible_v<Channel> && std::is_nothrow_move_assignable_v<Channel>,
              "moving a Channel must not throw");
static_assert(!std::is_copy_constructible_v<Runtime> && !std::is_copy_assignable_v<Runtime>,
              "a Runtime must not be copyable");
static_assert(std::is_nothrow_move_constructible_v<Runtime> && std::is_nothrow_move_assignable_v<Runtime>,
              "moving a Runtime must not throw");

/* A failed check: thrown by CHECK, caught per test by main. */
struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

static std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static std::string format(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

#define CHECK(cond, ...) do { if (!(cond)) \
    throw Failure(format("%s:%d: ", __FILE__, __LINE__) + format(__VA_ARGS__)); } while (0)
#define CHECK_RC(call, want) do { int rc_ = (call); \
    CHECK(rc_ == (want), "%s returned %d (%s), want %d (%s)", #call, rc_, lms_strerror(rc_), (want), \
          lms_strerror(want)); } while (0)

/* Runs body, which must throw lmstream::Error with code want. */
template <class F>
static lmstream::Error expect_error(int want, F &&body, const char *what) {
    try {
        body();
    } catch (const lmstream::Error &e) {
        CHECK(e.code() == want, "%s: Error code %d (%s), want %d (%s): %s", what, e.code(), lms_strerror(e.code()),
              want, lms_strerror(want), e.what());
        return e;
    }
    throw Failure(format("%s: no lmstream::Error thrown, want %s", what, lms_strerror(want)));
}

static bool under_valgrind;

/* Timeouts stretch under valgrind (memcheck is ~20x slower). */
static std::chrono::milliseconds patience(std::chrono::milliseconds ms) { return under_valgrind ? ms * 20 : ms; }

/* ---- Runtime and request helpers ---------------------------------------- */

/* The vocabulary of stress.c: id 0 is the end token (an empty special
** piece), ids 1..95 the printable ASCII characters, so a script spells a
** string. */
static int tok(char c) { return static_cast<unsigned char>(c) - 0x1f; }

static std::string runtime_config(int max_slots = 8) {
    std::string cfg = "{\"backend\":\"replay\",\"eos_id\":0,\"special_ids\":[0],\"max_slots\":" +
                      std::to_string(max_slots) + ",\"vocab\":[\"\"";
    char hex[8];
    for (int c = 0x20; c < 0x7f; c++) {
        std::snprintf(hex, sizeof hex, ",\"%02x\"", c);
        cfg += hex;
    }
    return cfg + "]}";
}

/* The script that spells text one token per burst. */
static std::string script(const std::string &text) {
    std::string s = "[";
    for (size_t i = 0; i < text.size(); i++) s += (i ? ",[" : "[") + std::to_string(tok(text[i])) + "]";
    return s + "]";
}

/* A request that spells text one token per burst, paced at delay_ms. */
static std::string spell(const std::string &text, double delay_ms = 0) {
    return "{\"prompt\":\"p\",\"delay_ms\":" + format("%g", delay_ms) + ",\"script\":" + script(text) + "}";
}

/* What one stream delivered. */
struct Stream {
    std::string text;
    std::vector<int32_t> ids;
    int chunks = 0, terminals = 0, reason = LMS_FINISH_NOT_FINISHED, error_code = 0;
    lmstream::Usage usage{};

    void fold(const Chunk &c) {
        CHECK(terminals == 0, "a chunk followed the terminal chunk");
        text += c.text;
        ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
        chunks++;
        if (c.finished) {
            terminals++;
            reason = c.reason;
            error_code = c.error_code;
            usage = c.usage;
            CHECK(c.reason != LMS_FINISH_NOT_FINISHED, "terminal chunk without a reason");
        } else {
            CHECK(c.reason == LMS_FINISH_NOT_FINISHED, "non-terminal chunk with reason %s", c.reason_name());
        }
    }

    /* The whole script arrived: text, the ids that spell it, then the end token. */
    void expect_complete(const std::string &want) const {
        CHECK(terminals == 1, "%d terminal chunks", terminals);
        CHECK(reason == LMS_FINISH_END_ID, "reason %s, want end_id", lms_finish_reason_name(reason));
        CHECK(text == want, "text \"%s\", want \"%s\"", text.c_str(), want.c_str());
        CHECK(ids.size() == want.size() + 1 && ids.back() == 0, "%zu ids for %zu characters", ids.size(),
              want.size());
        for (size_t i = 0; i < want.size(); i++) CHECK(ids[i] == tok(want[i]), "id %zu is %d", i, ids[i]);
        CHECK(usage.generated_tokens == static_cast<int64_t>(ids.size()), "usage.generated_tokens %lld, %zu ids",
              static_cast<long long>(usage.generated_tokens), ids.size());
    }
};

/* Reads ch to its terminal chunk with wait_pop; a timeout is a failure. */
static Stream read_wait_pop(Channel &ch) {
    Stream s;
    while (auto c = ch.wait_pop(patience(10s))) s.fold(*c);
    CHECK(ch.done(), "wait_pop timed out after %d chunks", s.chunks);
    return s;
}

/* After the terminal chunk, every pop style says the stream is over. */
static void expect_over(Channel &ch) {
    CHECK(ch.done(), "done() is false after the terminal chunk");
    CHECK(!ch.try_pop(), "try_pop returned a chunk after the terminal chunk");
    CHECK(!ch.wait_pop(10ms), "wait_pop returned a chunk after the terminal chunk");
    std::vector<Chunk> v(3);
    CHECK(ch.pop_batch(v, 10ms) == Status::done && v.empty(), "pop_batch after the terminal chunk");
    CHECK(ch.consume([](const Chunk &) { throw Failure("handler called after the terminal chunk"); }) == Status::done,
          "consume after the terminal chunk");
}

/* ---- Tests -------------------------------------------------------------- */

static void test_wait_pop() {
    Runtime rt(runtime_config());
    Channel ch;
    const std::string text = "Hello, C++ world!";
    rt.submit(spell(text, 1), ch);
    Stream s = read_wait_pop(ch);
    s.expect_complete(text);
    CHECK(s.chunks == static_cast<int>(text.size()) + 1, "%d chunks for a paced script of %zu tokens", s.chunks,
          text.size());
    expect_over(ch);
}

static void test_pop_batch() {
    Runtime rt(runtime_config());
    Channel ch;
    const std::string text = "abcdefghijklmnopqrstuvwxyz0123456789";
    rt.submit(spell(text), ch);
    Stream s;
    std::vector<Chunk> batch;
    int calls = 0;
    while (!ch.done()) {
        /* Small batches, so a stream takes several calls and the vector is reused. */
        Status st = ch.pop_batch(batch, patience(10s), 4);
        CHECK(st == Status::ok, "pop_batch returned %d after %d chunks", static_cast<int>(st), s.chunks);
        CHECK(!batch.empty() && batch.size() <= 4, "pop_batch gave %zu chunks", batch.size());
        for (const Chunk &c : batch) s.fold(c);
        calls++;
    }
    s.expect_complete(text);
    CHECK(calls > 1, "one call popped everything with max_chunks 4");
    expect_over(ch);
}

/* Logprobs are copied out of every way of reading: pop_batch's reused
** buffer and complete()'s block. The replay backend's tokens are certain. */
static void test_logprobs() {
    Runtime rt(runtime_config());
    const std::string text = "logprobs";
    const std::string req = "{\"prompt\":\"p\",\"logprobs\":true,\"top_logprobs\":1,\"script\":" + script(text) + "}";
    Channel ch;
    rt.submit(req, ch);
    std::vector<Chunk> batch;
    std::vector<TokenLogprob> lps;
    std::vector<int32_t> ids;
    while (!ch.done()) {
        Status st = ch.pop_batch(batch, patience(10s), 2);
        CHECK(st == Status::ok, "pop_batch returned %d", static_cast<int>(st));
        for (const Chunk &c : batch) {
            CHECK(c.logprobs.size() == c.token_ids.size(), "%zu logprobs for %zu ids", c.logprobs.size(),
                  c.token_ids.size());
            lps.insert(lps.end(), c.logprobs.begin(), c.logprobs.end());
            ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
        }
    }
    CHECK(lps.size() == text.size() + 1, "%zu logprobs", lps.size());
    for (size_t i = 0; i < lps.size(); i++) {
        const std::string piece = i < text.size() ? text.substr(i, 1) : "";
        CHECK(lps[i].token_id == ids[i] && lps[i].logprob == 0 && lps[i].bytes == piece, "logprob %zu", i);
        CHECK(lps[i].top.size() == 1 && lps[i].top[0].token_id == ids[i] && lps[i].top[0].bytes == piece,
              "alternatives of %zu", i);
    }
    Chunk all = rt.complete(req);
    CHECK(all.logprobs.size() == lps.size() && all.logprobs.back().token_id == 0, "complete: %zu logprobs",
          all.logprobs.size());
    CHECK(rt.complete(spell(text)).logprobs.empty(), "logprobs nobody asked for");
}

/* A request that parses no reply leaves a chunk's reply empty. */
static void test_no_reply() {
    Runtime rt(runtime_config());
    Chunk all = rt.complete(spell("plain"));
    CHECK(all.text == "plain" && !all.has_reply && all.content.empty() && all.reasoning.empty() &&
              all.tool_calls.empty(),
          "a replay chunk has a reply: '%s' (%zu calls)", all.content.c_str(), all.tool_calls.size());
}

/* The model of test_tool_reply (--tool-model): its template renders tools. */
static const char *tool_model;

/* A forced tool call on a real model, read with pop_batch (whose Chunks
** reuse their strings and vectors from one batch to the next) and with
** complete(): every chunk has the reply, the deltas join by index into
** one get_weather call, and the content stays empty. The second send of
** the same request finds its prompt in the slot's KV: Usage's
** cached_tokens (ABI 4) is 0 on the first and most of the prompt then. */
static void test_tool_reply() {
    CHECK(tool_model, "needs --tool-model MODEL.gguf");
    Runtime rt(format("{\"model_path\":\"%s\",\"max_slots\":1,\"context_length\":512,\"spec_budget\":12}",
                      tool_model));
    const std::string req =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather like in Paris today?\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}],"
        "\"tool_choice\":\"required\",\"max_tokens\":60}";
    Channel ch;
    rt.submit(req, ch);
    std::vector<Chunk> batch;
    std::vector<lmstream::ToolCallDelta> calls;
    std::string content, text;
    lmstream::Usage first{};
    while (!ch.done()) {
        Status st = ch.pop_batch(batch, patience(60s), 2);
        CHECK(st == Status::ok, "pop_batch returned %d", static_cast<int>(st));
        for (const Chunk &c : batch) {
            CHECK(c.has_reply, "a chunk without the reply: '%s'", c.text.c_str());
            if (c.finished) first = c.usage;
            content += c.content;
            text += c.text;
            for (const lmstream::ToolCallDelta &d : c.tool_calls) {
                if (!d.id.empty()) {
                    CHECK(d.index == static_cast<int32_t>(calls.size()), "call %d after %zu calls", d.index,
                          calls.size());
                    calls.push_back(d);
                } else {
                    CHECK(d.index >= 0 && d.index < static_cast<int32_t>(calls.size()) && d.name.empty(),
                          "a delta of call %d before its id", d.index);
                    calls[d.index].arguments += d.arguments;
                }
            }
        }
    }
    CHECK(calls.size() == 1 && calls[0].name == "get_weather" && calls[0].id.rfind("call_", 0) == 0 &&
              calls[0].arguments.find("\"city\"") != std::string::npos,
          "%zu calls in '%s'", calls.size(), text.c_str());
    CHECK(content.empty(), "content '%s' beside the call", content.c_str());
    Chunk all = rt.complete(req);
    CHECK(all.has_reply && all.tool_calls.size() == 1 && all.tool_calls[0].name == "get_weather" &&
              all.tool_calls[0].arguments == calls[0].arguments && all.content.empty(),
          "complete: %zu calls in '%s'", all.tool_calls.size(), all.text.c_str());
    CHECK(first.prompt_tokens > 0 && first.cached_tokens == 0, "first send: %lld of %lld prompt tokens cached",
          static_cast<long long>(first.cached_tokens), static_cast<long long>(first.prompt_tokens));
    CHECK(all.usage.prompt_tokens == first.prompt_tokens && all.usage.cached_tokens > 0 &&
              all.usage.cached_tokens < all.usage.prompt_tokens,
          "second send: %lld of %lld prompt tokens cached", static_cast<long long>(all.usage.cached_tokens),
          static_cast<long long>(all.usage.prompt_tokens));
}

/* One burst of 8,000 tokens is one chunk of ~40 kB, more than the wrapper's
** first 16 kB buffer: pop_batch grows it instead of failing. */
static void test_pop_batch_grows() {
    Runtime rt(runtime_config());
    Channel ch;
    std::string text, burst = "[[";
    for (int i = 0; i < 8000; i++) {
        char c = static_cast<char>('a' + i % 26);
        text += c;
        burst += (i ? "," : "") + std::to_string(tok(c));
    }
    rt.submit("{\"prompt\":\"p\",\"script\":" + burst + "]]}", ch);
    Stream s;
    std::vector<Chunk> batch;
    while (!ch.done()) {
        CHECK(ch.pop_batch(batch, patience(10s)) == Status::ok, "pop_batch failed after %d chunks", s.chunks);
        for (const Chunk &c : batch) s.fold(c);
    }
    s.expect_complete(text);
}

static void test_consume() {
    Runtime rt(runtime_config());
    Channel ch;
    const std::string text = "consumed on this thread";
    rt.submit(spell(text, 1), ch);
    Stream s;
    CHECK(ch.consume([&s](const Chunk &c) { s.fold(c); }) == Status::ok, "consume did not reach the end");
    s.expect_complete(text);
    expect_over(ch);
}

/* A bool handler returning false stops consume and cancels the request;
** the rest of the stream still ends with one terminal chunk. */
static void test_consume_stop() {
    Runtime rt(runtime_config());
    Channel ch;
    const std::string text = "a stream long enough to be stopped part of the way through";
    rt.submit(spell(text, 5), ch);
    Stream s;
    int calls = 0;
    Status st = ch.consume([&](const Chunk &c) {
        s.fold(c);
        return ++calls < 3;
    });
    CHECK(st == Status::interrupted, "consume returned %d, want interrupted", static_cast<int>(st));
    CHECK(calls == 3, "handler called %d times after asking to stop at 3", calls);
    while (auto c = ch.wait_pop(patience(10s))) s.fold(*c);
    CHECK(ch.done(), "no terminal chunk after the handler stopped");
    CHECK(s.reason == LMS_FINISH_CANCELLED, "reason %s, want cancelled", lms_finish_reason_name(s.reason));
    CHECK(s.text.size() < text.size() && text.compare(0, s.text.size(), s.text) == 0,
          "text \"%s\" is not a strict prefix of the script", s.text.c_str());
}

static void test_cancel() {
    Runtime rt(runtime_config());
    Channel ch;
    std::string text(200, 'x');
    rt.submit(spell(text, 10), ch);
    Stream s;
    auto first = ch.wait_pop(patience(10s));
    CHECK(first.has_value(), "no first chunk");
    s.fold(*first);
    ch.cancel();
    ch.cancel(); /* idempotent */
    while (auto c = ch.wait_pop(patience(10s))) s.fold(*c);
    CHECK(ch.done() && s.terminals == 1, "no terminal chunk after cancel");
    CHECK(s.reason == LMS_FINISH_CANCELLED, "reason %s, want cancelled", lms_finish_reason_name(s.reason));
    CHECK(s.text.size() < text.size(), "the whole script arrived despite the cancel");
    auto st = ch.state();
    CHECK(st.finished && st.reason == LMS_FINISH_CANCELLED && st.pending == 0, "state after cancel: %d %d %zu",
          st.finished, st.reason, st.pending);
    expect_over(ch);
}

/* The exception a handler throws crosses back to the caller of consume,
** not through the library; consumption stops at it and the channel is
** still usable, then released by its destructor. */
static void test_consume_throws() {
    Runtime rt(runtime_config());
    const std::string text = "the handler throws at the third chunk of this text";
    lms_channel h = 0;
    {
        Channel ch;
        h = ch.handle();
        rt.submit(spell(text, 5), ch);
        int calls = 0;
        bool caught = false;
        try {
            ch.consume([&calls](const Chunk &) {
                if (++calls == 3) throw std::out_of_range("handler gave up");
            });
        } catch (const std::out_of_range &e) {
            caught = std::strcmp(e.what(), "handler gave up") == 0;
        }
        CHECK(caught, "the handler's exception did not reach the caller intact");
        CHECK(calls == 3, "handler called %d times, want 3 (it threw at 3)", calls);
        /* Throwing stopped the consumption like returning false: the request
        ** is cancelled, and the channel still works. */
        Stream s;
        while (auto c = ch.wait_pop(patience(10s))) s.fold(*c);
        CHECK(ch.done() && s.reason == LMS_FINISH_CANCELLED, "reason %s after the handler threw, want cancelled",
              lms_finish_reason_name(s.reason));
        CHECK_RC(lms_channel_state(h, nullptr, nullptr, nullptr), LMS_OK);
        /* An lmstream::Error thrown by a handler keeps its type and code. */
        Runtime rt2(runtime_config());
        Channel ch2;
        rt2.submit(spell(text, 5), ch2);
        auto e = expect_error(LMS_ERR_CAPACITY, [&] {
            ch2.consume([](const Chunk &) -> bool { throw lmstream::Error(LMS_ERR_CAPACITY, "handler", "full"); });
        }, "consume with a handler throwing lmstream::Error");
        CHECK(std::strcmp(e.message(), "full") == 0, "message \"%s\"", e.message());
    }
    CHECK_RC(lms_channel_state(h, nullptr, nullptr, nullptr), LMS_ERR_INVALID_HANDLE);
}

static void test_move_channel() {
    Runtime rt(runtime_config());
    lms_channel h = 0, h3 = 0;
    {
        Channel b;
        {
            Channel a;
            h = a.handle();
            CHECK(h != 0 && a, "a new Channel has no handle");
            b = Channel(std::move(a));
            CHECK(!a && a.handle() == 0, "the moved-from Channel still holds a handle");
            CHECK(b.handle() == h, "the handle did not move");
            /* Calls on a moved-from Channel fail cleanly. */
            expect_error(LMS_ERR_INVALID_HANDLE, [&] { a.try_pop(); }, "try_pop on a moved-from Channel");
            expect_error(LMS_ERR_INVALID_HANDLE, [&] { a.cancel(); }, "cancel on a moved-from Channel");
        } /* a's destructor must not release h */
        CHECK_RC(lms_channel_state(h, nullptr, nullptr, nullptr), LMS_OK);
        /* Move assignment releases what the target held. */
        Channel c;
        h3 = c.handle();
        c = std::move(b);
        CHECK_RC(lms_channel_state(h3, nullptr, nullptr, nullptr), LMS_ERR_INVALID_HANDLE);
        CHECK_RC(lms_channel_state(h, nullptr, nullptr, nullptr), LMS_OK);
        /* The new owner streams through the moved handle. */
        rt.submit(spell("moved", 0), c);
        read_wait_pop(c).expect_complete("moved");
        /* Channels in a growing vector move on reallocation and stay valid. */
        std::vector<Channel> v;
        std::vector<lms_channel> hs;
        for (int i = 0; i < 9; i++) {
            v.emplace_back();
            hs.push_back(v.back().handle());
        }
        for (size_t i = 0; i < v.size(); i++) CHECK(v[i].handle() == hs[i], "channel %zu changed handle", i);
        for (lms_channel x : hs) CHECK_RC(lms_channel_state(x, nullptr, nullptr, nullptr), LMS_OK);
        v.clear();
        for (lms_channel x : hs) CHECK_RC(lms_channel_state(x, nullptr, nullptr, nullptr), LMS_ERR_INVALID_HANDLE);
        CHECK_RC(lms_channel_state(h, nullptr, nullptr, nullptr), LMS_OK);
    } /* c, the last owner, releases h */
    CHECK_RC(lms_channel_state(h, nullptr, nullptr, nullptr), LMS_ERR_INVALID_HANDLE);
}

static void test_move_runtime() {
    size_t len = 0;
    char buf[1024];
    lms_runtime h = 0;
    {
        Runtime b(runtime_config());
        {
            Runtime a(runtime_config(3));
            h = a.handle();
            b = std::move(a); /* destroys b's first runtime */
            CHECK(!a && b.handle() == h, "the runtime handle did not move");
        }
        CHECK_RC(lms_runtime_stats(h, buf, sizeof buf, &len), LMS_OK);
        std::string stats = b.stats();
        CHECK(stats.find("\"max_slots\":3") != std::string::npos, "stats %s", stats.c_str());
        CHECK(stats == std::string(buf, len), "stats() %s, C %.*s", stats.c_str(), static_cast<int>(len), buf);
        Chunk c = b.complete(spell("complete"));
        CHECK(c.finished && c.reason == LMS_FINISH_END_ID && c.text == "complete", "complete: %s \"%s\"",
              c.reason_name(), c.text.c_str());
        CHECK(c.token_ids.size() == 9, "complete: %zu ids", c.token_ids.size());
    }
    CHECK_RC(lms_runtime_stats(h, buf, sizeof buf, &len), LMS_ERR_INVALID_HANDLE);
}

/* Submitting to several channels at once, with both container overloads. */
static void test_batch_submit() {
    Runtime rt(runtime_config());
    const std::string texts[3] = {"first", "second one", "third"};
    std::string req = "{\"prompts\":[\"a\",\"b\",\"c\"],\"delay_ms\":1,\"scripts\":[" + script(texts[0]) + "," +
                      script(texts[1]) + "," + script(texts[2]) + "]}";
    Channel a, b, c;
    rt.submit(req, std::vector<Channel *>{&a, &b, &c});
    std::vector<Channel> v(3);
    rt.submit(req, v);
    Channel *all[6] = {&a, &b, &c, &v[0], &v[1], &v[2]};
    for (int i = 0; i < 6; i++) {
        Stream s;
        int batch_index = -1;
        while (auto ch = all[i]->wait_pop(patience(10s))) {
            batch_index = ch->batch_index;
            s.fold(*ch);
        }
        CHECK(all[i]->done(), "channel %d timed out", i);
        s.expect_complete(texts[i % 3]);
        CHECK(batch_index == i % 3, "channel %d has batch_index %d", i, batch_index);
    }
}

/* Readiness: poll the descriptor, drain with pop_batch. */
static void test_fd_poll() {
    Runtime rt(runtime_config());
    Channel ch;
    const std::string text = "polled";
    rt.submit(spell(text, 2), ch);
    struct pollfd pfd = {ch.fd(), POLLIN, 0};
    Stream s;
    std::vector<Chunk> batch;
    while (!ch.done()) {
        int n = poll(&pfd, 1, static_cast<int>(patience(10s).count()));
        CHECK(n == 1, "poll returned %d after %d chunks", n, s.chunks);
        if (ch.pop_batch(batch) == Status::ok)
            for (const Chunk &c : batch) s.fold(c);
    }
    s.expect_complete(text);
}

/* Many streams through one Mux: wait on ready(), drain the listed
** channels; drained streams drop out; membership errors throw. */
static void test_mux() {
    Runtime rt(runtime_config(16));
    Mux mux;
    std::vector<Channel> chans(24);
    std::vector<Stream> got(chans.size());
    for (Channel &c : chans) mux.add(c);
    expect_error(LMS_ERR_STATE, [&] { mux.add(chans[0]); }, "adding a member twice");
    for (size_t i = 0; i < chans.size(); i++) rt.submit(spell("mux stream " + std::to_string(i), 1), chans[i]);
    size_t finished = 0;
    std::vector<Chunk> batch;
    auto deadline = std::chrono::steady_clock::now() + patience(30s);
    while (finished < chans.size()) {
        CHECK(std::chrono::steady_clock::now() < deadline, "%zu of %zu streams finished", finished, chans.size());
        for (lms_channel h : mux.ready(patience(1s))) {
            size_t i = 0;
            while (i < chans.size() && chans[i].handle() != h) i++;
            CHECK(i < chans.size(), "ready() listed an unknown handle");
            CHECK(!chans[i].done(), "stream %zu listed after its terminal chunk was popped", i);
            if (chans[i].pop_batch(batch) != Status::ok) continue;
            for (const Chunk &c : batch) got[i].fold(c);
            if (chans[i].done()) finished++;
        }
    }
    for (size_t i = 0; i < chans.size(); i++) got[i].expect_complete("mux stream " + std::to_string(i));
    CHECK(mux.ready().empty(), "a drained mux still lists channels");
    mux.remove(chans[3]);
    expect_error(LMS_ERR_STATE, [&] { mux.remove(chans[3]); }, "removing a non-member");
    Mux moved(std::move(mux));
    CHECK(moved.handle() != 0 && mux.handle() == 0, "move did not transfer the handle");
    moved.add(chans[3]);
}

static void test_errors() {
    auto e = expect_error(LMS_ERR_BAD_JSON, [] { Runtime rt("{not json"); }, "Runtime from bad JSON");
    CHECK(e.message()[0] != 0, "no message with LMS_ERR_BAD_JSON");
    CHECK(std::strstr(e.what(), lms_strerror(LMS_ERR_BAD_JSON)) && std::strstr(e.what(), e.message()),
          "what() \"%s\" lacks the status name or the message", e.what());
    e = expect_error(LMS_ERR_INVALID_REQUEST, [] { Runtime rt("{\"backend\":\"replay\",\"vocab\":[\"41\"],"
                                                               "\"eos_id\":0,\"no_such_field\":1}"); },
                     "Runtime with an unknown field");
    CHECK(std::strstr(e.message(), "no_such_field"), "message \"%s\" does not name the field", e.message());

    Runtime rt(runtime_config());
    Channel ch;
    e = expect_error(LMS_ERR_INVALID_REQUEST, [&] { rt.submit("{\"prompt\":\"p\",\"bogus\":1}", ch); },
                     "submit with an unknown field");
    CHECK(e.message()[0] != 0, "no message with a bad request");
    e = expect_error(LMS_ERR_BAD_JSON, [&] { rt.complete("["); }, "complete with bad JSON");
    CHECK(e.message()[0] != 0, "no message from complete with bad JSON");
    expect_error(LMS_ERR_INVALID_ARGUMENT, [&] { rt.submit(spell("x"), std::vector<Channel *>{nullptr}); },
                 "submit with a null channel");
    /* A failed submission attaches nothing: settings still work, until a real one. */
    ch.set_interval(2).set_skip_special(false).set_queue(16, LMS_QUEUE_PAUSE);
    rt.submit(spell("abcd"), ch);
    expect_error(LMS_ERR_STATE, [&] { ch.set_interval(1); }, "set_interval after submit");
    /* Interval 2: non-terminal chunks carry at least two tokens; the end
    ** token's text is kept (it is empty here anyway). */
    Stream s = read_wait_pop(ch);
    s.expect_complete("abcd");
    CHECK(s.chunks <= 3, "%d chunks with interval 2 for 5 tokens", s.chunks);
    expect_error(LMS_ERR_STATE, [&] { rt.submit(spell("again"), ch); }, "submitting a channel twice");
}

/* A channel outlives its runtime: destroying the runtime ends the stream
** with a shutdown error chunk, and the channel is released later. */
static void test_runtime_first() {
    Channel ch;
    {
        Runtime rt(runtime_config());
        rt.submit(spell(std::string(500, 'z'), 10), ch);
        CHECK(ch.wait_pop(patience(10s)).has_value(), "no first chunk");
    }
    Stream s = read_wait_pop(ch);
    CHECK(s.reason == LMS_FINISH_ERROR && s.error_code == LMS_ERR_SHUTDOWN, "reason %s code %d after destroy",
          lms_finish_reason_name(s.reason), s.error_code);
}

/* ---- Main ---------------------------------------------------------------- */

struct Test {
    const char *name;
    void (*fn)();
};

static const Test tests[] = {
    {"wait_pop", test_wait_pop},
    {"mux", test_mux},
    {"pop_batch", test_pop_batch},
    {"pop_batch_grows", test_pop_batch_grows},
    {"logprobs", test_logprobs},
    {"no_reply", test_no_reply},
    {"tool_reply", test_tool_reply},
    {"consume", test_consume},
    {"consume_stop", test_consume_stop},
    {"cancel", test_cancel},
    {"consume_throws", test_consume_throws},
    {"move_channel", test_move_channel},
    {"move_runtime", test_move_runtime},
    {"batch_submit", test_batch_submit},
    {"fd_poll", test_fd_poll},
    {"errors", test_errors},
    {"runtime_first", test_runtime_first},
};

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const char *preload = std::getenv("LD_PRELOAD");
    under_valgrind = preload && std::strstr(preload, "vgpreload");
    if (!lmstream::abi_compatible()) {
        std::printf("FAIL liblmstream ABI %d, header %d\n", lms_abi_version(), LMS_ABI_VERSION);
        return 1;
    }
    std::vector<const char *> names;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--tool-model") == 0 && i + 1 < argc)
            tool_model = argv[++i];
        else
            names.push_back(argv[i]);
    }
    int passed = 0, failed = 0, skipped = 0;
    for (const Test &t : tests) {
        bool selected = names.empty();
        for (const char *n : names) selected |= std::strcmp(n, t.name) == 0;
        if (!selected) continue;
        if (t.fn == test_tool_reply && !tool_model && names.empty()) {
            skipped++;
            std::printf("SKIP %-24s (no --tool-model)\n", t.name);
            continue;
        }
        auto start = std::chrono::steady_clock::now();
        std::string why;
        try {
            t.fn();
        } catch (const std::exception &e) {
            why = e.what();
        } catch (...) {
            why = "an exception of an unknown type";
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (why.empty()) {
            passed++;
            std::printf("PASS %-24s %8.0f ms\n", t.name, ms);
        } else {
            failed++;
            std::printf("FAIL %-24s %8.0f ms: %s\n", t.name, ms, why.c_str());
        }
    }
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
