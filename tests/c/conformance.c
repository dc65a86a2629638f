/*
** conformance.c — runs every stream-contract vector (the .json files of tests/conformance)
** through the C ABI, as tests/conformance/conformance_test.go does through Go.
**
**   conformance [VECTOR_DIR]      (default: tests/conformance)
**
** For each vector: create a replay runtime from "runtime" (its raw JSON text),
** create one channel per expected stream with the "channel" settings, submit
** "request" (a JSON string is sent verbatim, anything else as its raw text),
** read every channel as "consumer" says and compare with "expect". Vector i
** reads with pop style i % 3:
**   0  lms_channel_wait_pop, one malloc'd chunk at a time;
**   1  lms_channel_pop_batch with deliberately small buffers and max_chunks,
**      so LMS_ERR_BUFFER_TOO_SMALL and partial batches happen; on
**      BUFFER_TOO_SMALL it retries with the size the library asked for;
**   2  lms_channel_consume with a handler (cancelling from inside it when the
**      consumer asks for a cancel).
** Besides the expectation, every chunk is checked for I1 (valid UTF-8, NUL at
** text_len), exactly one terminal chunk (the last), and LMS_DONE after it.
** Prints one line per vector and "N passed, M failed"; exits 1 on failure.
*/
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "lmstream.h"

#define WAIT_MS 10000 /* as the Go runner: a stream that stalls this long fails */

/* ---- Received chunks --------------------------------------------------- */

typedef struct {
    int32_t *ids;
    size_t n_ids;
    char *text;
    size_t text_len;
    int finished, reason, error_code, batch_index;
    char *error_message;
    lms_usage usage;
} got_chunk;

typedef struct {
    got_chunk *v;
    size_t n, cap;
} got_list;

static void got_add(got_list *l, const lms_chunk *c) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    got_chunk *g = &l->v[l->n++];
    g->n_ids = c->n_token_ids;
    g->ids = malloc((c->n_token_ids + 1) * sizeof(int32_t));
    if (c->n_token_ids) memcpy(g->ids, c->token_ids, c->n_token_ids * sizeof(int32_t));
    g->text_len = c->text_len;
    g->text = malloc(c->text_len + 1);
    memcpy(g->text, c->text, c->text_len + 1);
    g->finished = c->finished;
    g->reason = c->reason;
    g->error_code = c->error_code;
    g->batch_index = c->batch_index;
    g->error_message = strdup(c->error_message ? c->error_message : "(NULL)");
    g->usage = c->usage;
}

static void got_free(got_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].ids);
        free(l->v[i].text);
        free(l->v[i].error_message);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- Failure reporting ------------------------------------------------- */

static char failure[2048];

static int failf(const char *fmt, ...) {
    if (failure[0]) return 0; /* keep the first reason */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof failure, fmt, ap);
    va_end(ap);
    return 0;
}

static const char *reason_name(int r) { return lms_finish_reason_name(r); }

/* Status code identifiers as the vectors spell them (status.Code.Ident). */
static int status_by_ident(const char *s) {
    static const struct { const char *name; int code; } t[] = {
        {"invalid_argument", LMS_ERR_INVALID_ARGUMENT}, {"invalid_handle", LMS_ERR_INVALID_HANDLE},
        {"bad_json", LMS_ERR_BAD_JSON}, {"invalid_request", LMS_ERR_INVALID_REQUEST},
        {"model", LMS_ERR_MODEL}, {"prompt_too_long", LMS_ERR_PROMPT_TOO_LONG},
        {"capacity", LMS_ERR_CAPACITY}, {"buffer_too_small", LMS_ERR_BUFFER_TOO_SMALL},
        {"forked", LMS_ERR_FORKED}, {"backend", LMS_ERR_BACKEND}, {"internal", LMS_ERR_INTERNAL},
        {"shutdown", LMS_ERR_SHUTDOWN}, {"closed", LMS_ERR_CLOSED}, {"state", LMS_ERR_STATE},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].name, s)) return t[i].code;
    return 1000; /* matches nothing */
}

/* ---- Checks on one lms_chunk as delivered ------------------------------ */

static int check_delivered(const lms_chunk *c, size_t index) {
    if (!c->text) return failf("chunk %zu: text is NULL", index);
    if (c->text[c->text_len] != 0) return failf("chunk %zu: text not NUL-terminated at text_len", index);
    if (!utf8_valid(c->text, c->text_len)) return failf("I1: chunk %zu text is not valid UTF-8", index);
    if (c->n_token_ids && !c->token_ids) return failf("chunk %zu: token_ids is NULL", index);
    if (((uintptr_t)c->token_ids & 3) != 0) return failf("chunk %zu: token_ids misaligned", index);
    if (!c->error_message) return failf("chunk %zu: error_message is NULL", index);
    if (c->finished != 0 && c->finished != 1) return failf("chunk %zu: finished = %d", index, c->finished);
    if (!c->finished && c->reason != LMS_FINISH_NOT_FINISHED)
        return failf("chunk %zu: not finished but reason %d", index, c->reason);
    if (c->finished && c->reason == LMS_FINISH_NOT_FINISHED)
        return failf("chunk %zu: terminal chunk with reason not_finished", index);
    if ((c->reason == LMS_FINISH_ERROR) != (c->error_code != 0))
        return failf("chunk %zu: reason %s with error_code %d", index, reason_name(c->reason), c->error_code);
    if ((c->error_code != 0) != (c->error_message[0] != 0))
        return failf("chunk %zu: error_code %d with message \"%s\"", index, c->error_code, c->error_message);
    return 1;
}

/* ---- The three pop styles ---------------------------------------------- */

typedef struct {
    lms_channel ch;
    long cancel_after; /* -1: never */
    got_list got;
    int cancelled;
} reader;

/* Called after each chunk: cancels once the consumer has seen enough. */
static void after_chunk(reader *r) {
    if (r->cancel_after >= 0 && !r->cancelled && (long)r->got.n == r->cancel_after &&
        !r->got.v[r->got.n - 1].finished) {
        int rc = lms_channel_cancel(r->ch);
        if (rc != LMS_OK) failf("lms_channel_cancel: %s", lms_strerror(rc));
        r->cancelled = 1;
    }
}

static int read_wait_pop(reader *r) {
    for (;;) {
        lms_chunk *c = NULL;
        int rc = lms_channel_wait_pop(r->ch, WAIT_MS, &c);
        if (rc != LMS_OK) return failf("wait_pop after %zu chunks: %s", r->got.n, lms_strerror(rc));
        if (!c) return failf("wait_pop returned LMS_OK and no chunk");
        int ok = check_delivered(c, r->got.n);
        got_add(&r->got, c);
        int fin = c->finished;
        lms_chunk_free(c);
        if (!ok) return 0;
        if (fin) return 1;
        after_chunk(r);
    }
}

/* pop_batch events over the whole run: the test fails if the small buffers
** never provoked them, since then style 1 would not test what it claims. */
static long batch_too_small, batch_partial;

static int read_pop_batch(reader *r, unsigned seed) {
    /* Small sizes cycle so that single-chunk, partial and too-small batches
    ** all happen; the buffer is offset by a byte or two now and then to
    ** check the library's own alignment of token ids. */
    static const size_t sizes[] = {8, 24, 64, 7, 200, 33};
    static const size_t maxes[] = {1, 2, 3, 5};
    size_t buf_size = sizes[seed % 6], max_chunks = maxes[seed % 4];
    unsigned step = seed;
    int too_small_seen = 0;
    for (;;) {
        /* Guard bytes on both sides catch a library that writes outside the
        ** buffer (memcheck cannot: the writes come from Go code, see go.supp). */
        enum { GUARD = 16 };
        size_t shift = step % 3;
        unsigned char *mem = malloc(buf_size + shift + 2 * GUARD);
        memset(mem, 0xA5, buf_size + shift + 2 * GUARD);
        char *buf = (char *)mem + GUARD + shift;
        lms_chunk chunks[5];
        size_t n = 0;
        int rc = lms_channel_pop_batch(r->ch, chunks, max_chunks, buf, buf_size, WAIT_MS, &n);
        for (size_t g = 0; g < GUARD + shift; g++)
            if (mem[g] != 0xA5 || mem[GUARD + shift + buf_size + g % GUARD] != 0xA5) {
                free(mem);
                return failf("pop_batch wrote outside the caller buffer (%zu bytes)", buf_size);
            }
        if (rc == LMS_ERR_BUFFER_TOO_SMALL) {
            free(mem);
            if (n <= buf_size) return failf("BUFFER_TOO_SMALL asks for %zu bytes, buffer has %zu", n, buf_size);
            buf_size = n; /* exactly what it asked for must do */
            too_small_seen++;
            batch_too_small++;
            continue;
        }
        if (rc != LMS_OK) { free(mem); return failf("pop_batch after %zu chunks: %s", r->got.n, lms_strerror(rc)); }
        if (n == 0 || n > max_chunks) { free(mem); return failf("pop_batch returned %zu chunks (max %zu)", n, max_chunks); }
        int fin = 0;
        for (size_t i = 0; i < n && !fin; i++) {
            const lms_chunk *c = &chunks[i];
            const char *lo = buf, *hi = buf + buf_size;
            if (c->text < lo || c->text + c->text_len >= hi ||
                (c->n_token_ids && ((const char *)c->token_ids < lo || (const char *)(c->token_ids + c->n_token_ids) > hi))) {
                free(mem);
                return failf("chunk %zu points outside the caller buffer", r->got.n);
            }
            if (!check_delivered(c, r->got.n)) { free(mem); return 0; }
            got_add(&r->got, c);
            fin = c->finished;
            if (fin && i + 1 != n) { free(mem); return failf("a chunk follows the terminal chunk in one batch"); }
            if (!fin) after_chunk(r);
        }
        free(mem);
        if (fin) return 1;
        size_t pending = 0;
        if (n < max_chunks && lms_channel_state(r->ch, NULL, NULL, &pending) == LMS_OK && pending > 0)
            batch_partial++; /* whole chunks only: the next one did not fit */
        step++;
        buf_size = sizes[step % 6];
        max_chunks = maxes[step % 4];
    }
    (void)too_small_seen;
}

static int consume_handler(const lms_chunk *c, void *user) {
    reader *r = user;
    if (!check_delivered(c, r->got.n)) return 1; /* stop: the failure is recorded */
    got_add(&r->got, c);
    if (!c->finished) after_chunk(r);
    return 0;
}

static int read_consume(reader *r) {
    int rc = lms_channel_consume(r->ch, consume_handler, r);
    if (failure[0]) return 0;
    if (rc != LMS_OK) return failf("consume after %zu chunks: %s", r->got.n, lms_strerror(rc));
    if (r->got.n == 0 || !r->got.v[r->got.n - 1].finished) return failf("consume returned LMS_OK before the terminal chunk");
    return 1;
}

/* After the terminal chunk, every pop says LMS_DONE. */
static int check_done(lms_channel ch) {
    lms_chunk *c = NULL;
    int rc = lms_channel_try_pop(ch, &c);
    if (rc != LMS_DONE) { lms_chunk_free(c); return failf("try_pop after the terminal chunk: %s (want LMS_DONE)", lms_strerror(rc)); }
    rc = lms_channel_wait_pop(ch, 50, &c);
    if (rc != LMS_DONE) { lms_chunk_free(c); return failf("wait_pop after the terminal chunk: %s", lms_strerror(rc)); }
    lms_chunk chunks[2];
    char buf[256];
    size_t n = 99;
    rc = lms_channel_pop_batch(ch, chunks, 2, buf, sizeof buf, 0, &n);
    if (rc != LMS_DONE || n != 0) return failf("pop_batch after the terminal chunk: %s, n=%zu", lms_strerror(rc), n);
    reader dummy = {ch, -1, {0}, 0};
    rc = lms_channel_consume(ch, consume_handler, &dummy);
    got_free(&dummy.got);
    if (rc != LMS_DONE) return failf("consume after the terminal chunk: %s", lms_strerror(rc));
    int finished = -1, reason = -1;
    size_t pending = 99;
    rc = lms_channel_state(ch, &finished, &reason, &pending);
    if (rc != LMS_OK || finished != 1 || pending != 0) return failf("state after drain: rc %d finished %d pending %zu", rc, finished, pending);
    return 1;
}

/* ---- Comparison with "expect" ------------------------------------------ */

static int ids_equal(const json_value *exp, const int32_t *ids, size_t n) {
    if (!exp || exp->type != JSON_ARRAY || exp->count != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (exp->items[i]->type != JSON_NUMBER || (int32_t)exp->items[i]->number != ids[i]) return 0;
    return 1;
}

static int text_equal(const json_value *exp, const char *text, size_t len) {
    return exp && exp->type == JSON_STRING && exp->length == len && memcmp(exp->string, text, len) == 0;
}

static int compare(const json_value *exp, got_list *got, size_t batch_index) {
    if (got->n == 0) return failf("no chunk received");
    size_t total_text = 0, total_ids = 0;
    for (size_t i = 0; i < got->n; i++) {
        got_chunk *g = &got->v[i];
        if (g->finished != (i == got->n - 1)) return failf("I3: chunk %zu finished=%d of %zu chunks", i, g->finished, got->n);
        if ((size_t)g->batch_index != batch_index) return failf("chunk %zu: batch_index %d, want %zu", i, g->batch_index, batch_index);
        total_text += g->text_len;
        total_ids += g->n_ids;
    }
    char *text = malloc(total_text + 1), *t = text;
    int32_t *ids = malloc((total_ids + 1) * sizeof *ids), *d = ids;
    for (size_t i = 0; i < got->n; i++) {
        memcpy(t, got->v[i].text, got->v[i].text_len);
        t += got->v[i].text_len;
        memcpy(d, got->v[i].ids, got->v[i].n_ids * sizeof *ids);
        d += got->v[i].n_ids;
    }
    *t = 0;
    got_chunk *last = &got->v[got->n - 1];
    int ok = 1;
    const char *want_reason = json_get_string(exp, "reason", "");
    int want_code = (int)json_get_number(exp, "error_code", 0);
    double max_chunks = json_get_number(exp, "max_chunks", 0);
    if (strcmp(reason_name(last->reason), want_reason))
        ok = failf("reason %s, want %s (%s)", reason_name(last->reason), want_reason, last->error_message);
    else if (last->error_code != want_code)
        ok = failf("error_code %d, want %d (%s)", last->error_code, want_code, last->error_message);
    else if (!text_equal(json_get(exp, "text"), text, total_text))
        ok = failf("I2: text \"%s\", want \"%s\"", text, json_get_string(exp, "text", "?"));
    else if (!ids_equal(json_get(exp, "token_ids"), ids, total_ids))
        ok = failf("I4: concatenated token ids differ (%zu ids)", total_ids);
    else if (max_chunks > 0 && (double)got->n > max_chunks)
        ok = failf("%zu chunks, the queue limit allows %g", got->n, max_chunks);
    else if (last->usage.generated_tokens != (int64_t)total_ids)
        ok = failf("usage.generated_tokens %lld, %zu ids delivered", (long long)last->usage.generated_tokens, total_ids);
    free(text);
    free(ids);
    if (!ok) return 0;

    const json_value *chunks = json_get(exp, "chunks");
    if (!chunks) return 1;
    if (chunks->type != JSON_ARRAY) return failf("expect.chunks is not an array");
    if (chunks->count != got->n) return failf("chunk sequence: %zu chunks, want %zu", got->n, chunks->count);
    for (size_t i = 0; i < got->n; i++) {
        const json_value *w = chunks->items[i];
        got_chunk *g = &got->v[i];
        int w_fin = json_get_bool(w, "finished", 0);
        if (!ids_equal(json_get(w, "token_ids"), g->ids, g->n_ids)) return failf("chunk %zu: token ids differ", i);
        if (!text_equal(json_get(w, "text"), g->text, g->text_len))
            return failf("chunk %zu: text \"%s\", want \"%s\"", i, g->text, json_get_string(w, "text", "?"));
        if (g->finished != w_fin) return failf("chunk %zu: finished %d, want %d", i, g->finished, w_fin);
        if (w_fin && strcmp(reason_name(g->reason), json_get_string(w, "reason", "")))
            return failf("chunk %zu: reason %s, want %s", i, reason_name(g->reason), json_get_string(w, "reason", ""));
        if (g->error_code != (int)json_get_number(w, "error_code", 0))
            return failf("chunk %zu: error_code %d, want %g", i, g->error_code, json_get_number(w, "error_code", 0));
    }
    return 1;
}

/* ---- One vector ---------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int wait_finished(lms_channel ch) {
    double deadline = now_ms() + WAIT_MS;
    for (;;) {
        int finished = 0;
        int rc = lms_channel_state(ch, &finished, NULL, NULL);
        if (rc != LMS_OK) return failf("lms_channel_state: %s", lms_strerror(rc));
        if (finished) return 1;
        if (now_ms() > deadline) return failf("stream did not finish");
        usleep(1000);
    }
}

static int run_vector(const json_value *v, int style) {
    const json_value *runtime = json_get(v, "runtime"), *request = json_get(v, "request");
    const json_value *chan = json_get(v, "channel"), *consumer = json_get(v, "consumer");
    const json_value *expect = json_get(v, "expect");
    const char *submit_error = json_get_string(v, "expect_submit_error", NULL);
    if (!runtime || !request || !chan || !consumer) return failf("vector lacks runtime/request/channel/consumer");

    char err[1024] = "";
    char *cfg = json_raw_dup(runtime);
    lms_runtime rt = 0;
    int rc = lms_runtime_create(cfg, &rt, err, sizeof err);
    free(cfg);
    if (rc != LMS_OK) return failf("lms_runtime_create: %s: %s", lms_strerror(rc), err);

    size_t n = expect && expect->type == JSON_ARRAY && expect->count > 0 ? expect->count : 1;
    lms_channel *chans = calloc(n, sizeof *chans);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        if ((rc = lms_channel_create(&chans[i])) != LMS_OK) { ok = failf("lms_channel_create: %s", lms_strerror(rc)); break; }
        rc = lms_channel_set_interval(chans[i], (int32_t)json_get_number(chan, "interval", 0));
        const json_value *skip = json_get(chan, "skip_special");
        if (rc == LMS_OK && skip && skip->type == JSON_BOOL) rc = lms_channel_set_skip_special(chans[i], skip->boolean);
        int limit = (int)json_get_number(chan, "queue_limit", 0);
        const char *policy = json_get_string(chan, "policy", "coalesce");
        if (rc == LMS_OK && limit > 0)
            rc = lms_channel_set_queue(chans[i], limit, strcmp(policy, "pause") ? LMS_QUEUE_COALESCE : LMS_QUEUE_PAUSE);
        if (rc != LMS_OK) ok = failf("channel settings: %s", lms_strerror(rc));
    }

    char *req = request->type == JSON_STRING ? strdup(request->string) : json_raw_dup(request);
    if (ok) {
        err[0] = 0;
        rc = lms_submit(rt, req, chans, n, err, sizeof err);
        if (submit_error) {
            int want = status_by_ident(submit_error);
            if (rc != want) ok = failf("lms_submit: %d (%s), want %s: %s", rc, lms_strerror(rc), submit_error, err);
            else if (!err[0]) ok = failf("lms_submit failed without a message");
            /* Nothing was attached: the channels still take settings. */
            else if ((rc = lms_channel_set_interval(chans[0], 2)) != LMS_OK)
                ok = failf("after a failed submit the channel is not reusable: %s", lms_strerror(rc));
        } else if (rc != LMS_OK) {
            ok = failf("lms_submit: %s: %s", lms_strerror(rc), err);
        } else if (!expect || expect->type != JSON_ARRAY) {
            ok = failf("vector has neither expect nor expect_submit_error");
        }
    }
    free(req);

    if (ok && !submit_error) {
        long cancel_after = (long)json_get_number(consumer, "cancel_after_chunks", -1);
        int drain_after_finish = json_get_bool(consumer, "drain_after_finish", 0);
        for (size_t i = 0; i < n && ok; i++) {
            reader r = {chans[i], cancel_after, {0}, 0};
            if (drain_after_finish) ok = wait_finished(chans[i]);
            if (ok) {
                switch (style) {
                case 0: ok = read_wait_pop(&r); break;
                case 1: ok = read_pop_batch(&r, (unsigned)i * 7 + 1); break;
                default: ok = read_consume(&r); break;
                }
            }
            if (ok) ok = check_done(chans[i]);
            if (ok) ok = compare(expect->items[i], &r.got, i);
            got_free(&r.got);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (chans[i] && (rc = lms_channel_release(chans[i])) != LMS_OK && ok)
            ok = failf("lms_channel_release: %s", lms_strerror(rc));
    free(chans);
    if ((rc = lms_runtime_destroy(rt)) != LMS_OK && ok) ok = failf("lms_runtime_destroy: %s", lms_strerror(rc));
    return ok;
}

/* ---- The JSON reader checks itself first --------------------------------- */

static int json_selftest(void) {
    static const char *good[] = {
        "{}", "[]", "0", "-0.5e+3", "\"\\u00e9\\ud83d\\ude00\\/\\n\"", "[true,false,null]",
        " {\"a\" : [1, {\"b\": \"c\"}]} ",
    };
    static const char *bad[] = {
        "", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "\"\\ud83d\"", "\"\\ude00\"", "\"a\tb\"",
        "[1] x", "{a:1}", "\"\\x\"", "tru", "\"\xff\"", "\"\xed\xa0\x80\"", "[", "\"abc",
    };
    char err[128];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        json_value *v = json_parse(good[i], strlen(good[i]), err, sizeof err);
        if (!v) { printf("json self-test: rejected %s: %s\n", good[i], err); return 0; }
        json_free(v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_value *v = json_parse(bad[i], strlen(bad[i]), err, sizeof err);
        if (v) { printf("json self-test: accepted %s\n", bad[i]); json_free(v); return 0; }
    }
    const char *s = "{\"k\":\"\\u00e9\\ud83d\\ude00\",\"n\":[1,2.5],\"r\":{\"x\":[1, 2]}}";
    json_value *v = json_parse(s, strlen(s), err, sizeof err);
    int ok = v && !strcmp(json_get_string(v, "k", ""), "\xc3\xa9\xf0\x9f\x98\x80") &&
             json_get(v, "n")->count == 2 && json_get(v, "n")->items[1]->number == 2.5 &&
             json_get(v, "r")->raw_len == 12 && !memcmp(json_get(v, "r")->raw, "{\"x\":[1, 2]}", 12);
    json_free(v);
    static const char *u_good[] = {"", "a", "\xc2\x80", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"};
    static const char *u_bad[] = {"\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x80\x80\xaf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe4\xb8", "\xff"};
    for (size_t i = 0; i < sizeof u_good / sizeof *u_good; i++) ok = ok && utf8_valid(u_good[i], strlen(u_good[i]));
    for (size_t i = 0; i < sizeof u_bad / sizeof *u_bad; i++) ok = ok && !utf8_valid(u_bad[i], strlen(u_bad[i]));
    if (!ok) printf("json self-test: decoding or UTF-8 validation is wrong\n");
    return ok;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); fclose(f); return NULL; }
    s[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return s;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/conformance";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (lms_abi_version() != LMS_ABI_VERSION) {
        printf("ABI mismatch: library %d, header %d\n", lms_abi_version(), LMS_ABI_VERSION);
        return 1;
    }
    int passed = 0, failed = 0;
    if (json_selftest()) passed++; else failed++;

    DIR *d = opendir(dir);
    if (!d) { printf("cannot open %s\n", dir); return 1; }
    char **names = NULL;
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) {
            names = realloc(names, (count + 1) * sizeof *names);
            names[count++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, count, sizeof *names, cmp_str);
    if (count == 0) { printf("no vectors in %s\n", dir); failed++; }

    static const char *styles[] = {"wait_pop", "pop_batch", "consume"};
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = read_file(path, &len);
        char err[256] = "";
        json_value *v = text ? json_parse(text, len, err, sizeof err) : NULL;
        failure[0] = 0;
        int style = (int)(i % 3);
        int ok = v ? run_vector(v, style) : failf("cannot read or parse: %s", err);
        if (ok && failure[0]) ok = 0;
        if (ok) { passed++; printf("PASS %-70s [%s]\n", names[i], styles[style]); }
        else { failed++; printf("FAIL %-70s [%s]: %s\n", names[i], styles[style], failure); }
        json_free(v);
        free(text);
        free(names[i]);
    }
    free(names);
    printf("pop_batch: %ld BUFFER_TOO_SMALL retries, %ld partial batches\n", batch_too_small, batch_partial);
    if (count > 3 && (batch_too_small == 0 || batch_partial == 0)) {
        printf("FAIL pop_batch style never hit BUFFER_TOO_SMALL or a partial batch\n");
        failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
