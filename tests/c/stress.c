/*
** stress.c — threads, races, misuse, shutdown, fork and readiness through
** the C ABI of liblmstream, on the replay backend.
**
**   stress [--quick] [--valgrind] [--known-bugs] [TEST_NAME ...]
**
** --quick     smaller counts (1,000 cancel races, 100 concurrent channels),
**             for runs under valgrind
** --valgrind  longer timeouts (memcheck is ~20x slower); set automatically
**             when valgrind's preload library is present
** --known-bugs  also run tests that reproduce library bugs not fixed yet
**             (see the TODO at each one)
** Names select tests (default: all). Prints PASS/FAIL per test and
** "N passed, M failed"; exits 1 on any failure.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "lmstream.h"

static int quick, under_valgrind, known_bugs;

/* A test records its first failure here (any thread) and returns 0. */
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static char fail_msg[1024];

static int failf(const char *fmt, ...) {
    pthread_mutex_lock(&fail_mu);
    if (!fail_msg[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(fail_msg, sizeof fail_msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&fail_mu);
    return 0;
}

static int failed(void) {
    pthread_mutex_lock(&fail_mu);
    int f = fail_msg[0] != 0;
    pthread_mutex_unlock(&fail_mu);
    return f;
}

#define CHECK(cond, ...) do { if (!(cond)) return failf(__VA_ARGS__); } while (0)
#define CHECK_RC(call, want) do { int rc_ = (call); \
    if (rc_ != (want)) return failf("%s:%d: %s returned %d (%s), want %d (%s)", __FILE__, __LINE__, #call, \
                                    rc_, lms_strerror(rc_), (want), lms_strerror(want)); } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* Timeouts stretch under valgrind. */
static int patience(int ms) { return under_valgrind ? ms * 20 : ms; }

/* ---- Runtime and request helpers ---------------------------------------- */

/* The vocabulary: id 0 is the end token (an empty special piece), ids 1..95
** are the printable ASCII characters ' '..'~', so a script spells a string. */
#define EOS 0
static int tok(char c) { return (unsigned char)c - 0x1f; }

static int make_runtime(lms_runtime *rt, int max_slots, int max_queue) {
    char cfg[2048], *p = cfg, err[512] = "";
    p += sprintf(p, "{\"backend\":\"replay\",\"eos_id\":0,\"special_ids\":[0],\"max_slots\":%d,"
                    "\"max_queue\":%d,\"vocab\":[\"\"", max_slots, max_queue);
    for (int c = 0x20; c < 0x7f; c++) p += sprintf(p, ",\"%02x\"", c);
    sprintf(p, "]}");
    int rc = lms_runtime_create(cfg, rt, err, sizeof err);
    if (rc != LMS_OK) return failf("lms_runtime_create: %s: %s", lms_strerror(rc), err);
    return 1;
}

/* A request that spells text one token per burst, paced at delay_ms. The
** caller frees the result. */
static char *spell(const char *text, double delay_ms) {
    size_t n = strlen(text);
    char *req = malloc(n * 8 + 128), *p = req;
    p += sprintf(p, "{\"prompt\":\"p\",\"delay_ms\":%g,\"script\":[", delay_ms);
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%s[%d]", i ? "," : "", tok(text[i]));
    sprintf(p, "]}");
    return req;
}

static int submit_one(lms_runtime rt, lms_channel ch, const char *req) {
    char err[512] = "";
    int rc = lms_submit(rt, req, &ch, 1, err, sizeof err);
    if (rc != LMS_OK) return failf("lms_submit: %s: %s", lms_strerror(rc), err);
    return 1;
}

/* What one stream delivered. */
typedef struct {
    char text[4096];
    size_t text_len;
    int32_t ids[4096];
    size_t n_ids;
    int chunks, terminals, reason, error_code;
} stream_result;

/* Folds one chunk into r, checking I1 and that nothing follows the terminal. */
static int fold(stream_result *r, const lms_chunk *c) {
    CHECK(r->terminals == 0, "a chunk followed the terminal chunk");
    CHECK(utf8_valid(c->text, c->text_len), "I1: chunk text is not UTF-8");
    CHECK(r->text_len + c->text_len < sizeof r->text && r->n_ids + c->n_token_ids <= 4096, "stream too long");
    memcpy(r->text + r->text_len, c->text, c->text_len);
    r->text_len += c->text_len;
    r->text[r->text_len] = 0;
    memcpy(r->ids + r->n_ids, c->token_ids, c->n_token_ids * sizeof(int32_t));
    r->n_ids += c->n_token_ids;
    r->chunks++;
    if (c->finished) {
        r->terminals++;
        r->reason = c->reason;
        r->error_code = c->error_code;
        CHECK(c->reason != LMS_FINISH_NOT_FINISHED, "terminal chunk without a reason");
    } else {
        CHECK(c->reason == LMS_FINISH_NOT_FINISHED, "non-terminal chunk with reason %d", c->reason);
    }
    return 1;
}

/* Reads a stream to its terminal chunk with wait_pop, then checks LMS_DONE. */
static int drain_wait_pop(lms_channel ch, stream_result *r, int timeout_ms) {
    memset(r, 0, sizeof *r);
    while (r->terminals == 0) {
        lms_chunk *c = NULL;
        int rc = lms_channel_wait_pop(ch, timeout_ms, &c);
        CHECK(rc == LMS_OK, "wait_pop after %d chunks: %s", r->chunks, lms_strerror(rc));
        int ok = fold(r, c);
        lms_chunk_free(c);
        if (!ok) return 0;
    }
    lms_chunk *c = NULL;
    CHECK_RC(lms_channel_try_pop(ch, &c), LMS_DONE);
    CHECK(c == NULL, "try_pop set a chunk with LMS_DONE");
    return 1;
}

/* The text the ids spell (ids 1..95 are characters; 0 spells nothing). */
static int ids_spell(const stream_result *r) {
    size_t k = 0;
    for (size_t i = 0; i < r->n_ids; i++) {
        int id = r->ids[i];
        if (id == EOS) { CHECK(i == r->n_ids - 1, "ids continue after the end token"); continue; }
        CHECK(k < r->text_len && r->text[k] == (char)(id + 0x1f), "text does not match the token ids");
        k++;
    }
    CHECK(k == r->text_len, "text longer than the token ids");
    return 1;
}

/* ---- Test: every pop style on one stream --------------------------------- */

typedef struct {
    stream_result *r;
    int calls, stop_after;
} consume_ctx;

static int stop_early(const lms_chunk *c, void *user) {
    consume_ctx *x = user;
    fold(x->r, c);
    return ++x->calls >= x->stop_after;
}

static int test_pop_styles(void) {
    lms_runtime rt;
    lms_channel ch;
    if (!make_runtime(&rt, 8, 64)) return 0;
    CHECK_RC(lms_channel_create(&ch), LMS_OK);
    const char *text = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char *req = spell(text, 5);
    int ok = submit_one(rt, ch, req);
    free(req);
    if (!ok) return 0;
    stream_result r = {0};
    /* 1. try_pop until 5 chunks (LMS_EMPTY in between is expected). */
    int empties = 0;
    double deadline = now_ms() + patience(5000);
    while (r.chunks < 5) {
        lms_chunk *c = NULL;
        int rc = lms_channel_try_pop(ch, &c);
        if (rc == LMS_EMPTY) { CHECK(c == NULL, "LMS_EMPTY with a chunk"); empties++; sleep_ms(0.5); }
        else { CHECK(rc == LMS_OK, "try_pop: %s", lms_strerror(rc)); ok = fold(&r, c); lms_chunk_free(c); if (!ok) return 0; }
        CHECK(now_ms() < deadline, "try_pop: no progress");
    }
    CHECK(empties > 0, "try_pop never saw LMS_EMPTY on a paced stream");
    /* 2. wait_pop for 5 more. */
    for (int i = 0; i < 5; i++) {
        lms_chunk *c = NULL;
        CHECK_RC(lms_channel_wait_pop(ch, patience(5000), &c), LMS_OK);
        ok = fold(&r, c);
        lms_chunk_free(c);
        if (!ok) return 0;
    }
    /* 3. pop_batch until 15 chunks. */
    while (r.chunks < 15) {
        lms_chunk chunks[4];
        char buf[1024];
        size_t n = 0;
        CHECK_RC(lms_channel_pop_batch(ch, chunks, 4, buf, sizeof buf, patience(5000), &n), LMS_OK);
        for (size_t i = 0; i < n; i++) if (!fold(&r, &chunks[i])) return 0;
    }
    /* 4. consume with a handler that stops after 3 chunks. What is pending
    ** is drained first, so consume sees the paced chunks one at a time (see
    ** test_consume_stop_keeps_rest for what happens to a bigger batch). */
    for (;;) {
        lms_chunk chunks[16];
        char buf[1024];
        size_t n = 0;
        int rc = lms_channel_pop_batch(ch, chunks, 16, buf, sizeof buf, 0, &n);
        if (rc == LMS_EMPTY) break;
        CHECK(rc == LMS_OK, "pop_batch: %s", lms_strerror(rc));
        for (size_t i = 0; i < n; i++) if (!fold(&r, &chunks[i])) return 0;
    }
    consume_ctx x = {&r, 0, 3};
    CHECK_RC(lms_channel_consume(ch, stop_early, &x), LMS_INTERRUPTED);
    CHECK(x.calls == 3, "handler called %d times after asking to stop at 3", x.calls);
    /* The request is cancelled: the rest of the stream ends with cancelled. */
    for (;;) {
        lms_chunk *c = NULL;
        CHECK_RC(lms_channel_wait_pop(ch, patience(5000), &c), LMS_OK);
        ok = fold(&r, c);
        int fin = c->finished;
        lms_chunk_free(c);
        if (!ok) return 0;
        if (fin) break;
    }
    CHECK(r.reason == LMS_FINISH_CANCELLED, "reason %s after the handler stopped, want cancelled",
          lms_finish_reason_name(r.reason));
    CHECK(r.text_len < strlen(text) && !strncmp(r.text, text, r.text_len), "text is not a prefix of the script");
    if (!ids_spell(&r)) return 0;
    lms_chunk *c = NULL;
    CHECK_RC(lms_channel_try_pop(ch, &c), LMS_DONE);
    CHECK_RC(lms_channel_wait_pop(ch, 10, &c), LMS_DONE);
    CHECK_RC(lms_channel_release(ch), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: a consume handler that stops early loses nothing --------------
** Regression: Consume used to pop every pending chunk into a batch and drop
** the rest when the handler stopped, terminal chunk included (I2, I3). It
** now pops one chunk at a time; the unhandled ones stay queued. */
static int test_consume_stop_keeps_rest(void) {
    lms_runtime rt;
    lms_channel ch;
    if (!make_runtime(&rt, 8, 64)) return 0;
    CHECK_RC(lms_channel_create(&ch), LMS_OK);
    char *req = spell("abcde", 0);
    int ok = submit_one(rt, ch, req);
    free(req);
    if (!ok) return 0;
    int finished = 0;
    double deadline = now_ms() + patience(5000);
    while (!finished) {
        CHECK_RC(lms_channel_state(ch, &finished, NULL, NULL), LMS_OK);
        CHECK(now_ms() < deadline, "stream did not finish");
        sleep_ms(1);
    }
    /* Six chunks are queued (a..e and the terminal one). Stop after the first. */
    stream_result r = {0};
    consume_ctx x = {&r, 0, 1};
    CHECK_RC(lms_channel_consume(ch, stop_early, &x), LMS_INTERRUPTED);
    for (;;) {
        lms_chunk *c = NULL;
        int rc = lms_channel_try_pop(ch, &c);
        CHECK(rc == LMS_OK, "after the handler stopped at chunk 1 of 6, try_pop says %s: %d chunks and the "
              "terminal chunk were dropped", lms_strerror(rc), 6 - r.chunks);
        ok = fold(&r, c);
        int fin = c->finished;
        lms_chunk_free(c);
        if (!ok) return 0;
        if (fin) break;
    }
    CHECK(!strcmp(r.text, "abcde") && r.reason == LMS_FINISH_END_ID, "text \"%s\" reason %s", r.text,
          lms_finish_reason_name(r.reason));
    CHECK_RC(lms_channel_release(ch), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: cancel from another thread wakes a blocked consumer ----------- */

typedef struct {
    lms_channel ch;
    stream_result r;
    atomic_int entered;
    int rc;
    int style; /* 0 wait_pop, 1 pop_batch, 2 consume */
    double returned_at;
} waiter;

static int fold_handler(const lms_chunk *c, void *user) {
    return !fold(user, c);
}

static void *wait_thread(void *arg) {
    waiter *w = arg;
    memset(&w->r, 0, sizeof w->r);
    atomic_store(&w->entered, 1);
    for (;;) {
        if (w->style == 2) {
            w->rc = lms_channel_consume(w->ch, fold_handler, &w->r);
            break;
        }
        if (w->style == 1) {
            lms_chunk chunks[8];
            char buf[4096];
            size_t n = 0;
            w->rc = lms_channel_pop_batch(w->ch, chunks, 8, buf, sizeof buf, -1, &n);
            if (w->rc != LMS_OK) break;
            for (size_t i = 0; i < n; i++) fold(&w->r, &chunks[i]);
        } else {
            lms_chunk *c = NULL;
            w->rc = lms_channel_wait_pop(w->ch, -1, &c);
            if (w->rc != LMS_OK) break;
            fold(&w->r, c);
            lms_chunk_free(c);
        }
        if (w->r.terminals) break;
    }
    w->returned_at = now_ms();
    return NULL;
}

static int test_cancel_wakes_waiter(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 8, 64)) return 0;
    for (int style = 0; style < 3; style++) {
        waiter w = {0};
        w.style = style;
        CHECK_RC(lms_channel_create(&w.ch), LMS_OK);
        /* 20 tokens at 500 ms each: the stream would take 10 s. */
        char *req = spell("abcdefghijklmnopqrst", 500);
        double submitted = now_ms();
        int ok = submit_one(rt, w.ch, req);
        free(req);
        if (!ok) return 0;
        pthread_t t;
        pthread_create(&t, NULL, wait_thread, &w);
        while (!atomic_load(&w.entered)) sleep_ms(1);
        sleep_ms(patience(100)); /* the consumer is now blocked inside the library */
        double t0 = now_ms();
        CHECK_RC(lms_channel_cancel(w.ch), LMS_OK);
        CHECK_RC(lms_channel_cancel(w.ch), LMS_OK); /* idempotent */
        pthread_join(t, NULL);
        CHECK(w.rc == LMS_OK, "style %d: blocked consumer returned %s", style, lms_strerror(w.rc));
        CHECK(w.r.terminals == 1 && w.r.reason == LMS_FINISH_CANCELLED, "style %d: terminals %d reason %s", style,
              w.r.terminals, lms_finish_reason_name(w.r.reason));
        CHECK(w.returned_at - t0 < patience(400), "style %d: woke %.0f ms after the cancel", style, w.returned_at - t0);
        size_t due = (size_t)((t0 - submitted) / 500) + 1; /* tokens the pacing allowed by the cancel */
        CHECK(w.r.text_len <= due, "style %d: %zu tokens of a paced stream before the cancel (%zu due)", style,
              w.r.text_len, due);
        CHECK_RC(lms_channel_release(w.ch), LMS_OK);
    }
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: releasing a channel wakes a blocked waiter with CLOSED -------- */

static int test_release_wakes_waiter(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 8, 64)) return 0;
    for (int attached = 0; attached < 2; attached++) {
        for (int style = 0; style < 3; style++) {
            waiter w = {0};
            w.style = style;
            CHECK_RC(lms_channel_create(&w.ch), LMS_OK);
            if (attached) {
                char *req = spell("abcdefghij", 1000);
                int ok = submit_one(rt, w.ch, req);
                free(req);
                if (!ok) return 0;
            }
            pthread_t t;
            pthread_create(&t, NULL, wait_thread, &w);
            while (!atomic_load(&w.entered)) sleep_ms(1);
            sleep_ms(patience(100));
            double t0 = now_ms();
            CHECK_RC(lms_channel_release(w.ch), LMS_OK);
            pthread_join(t, NULL);
            CHECK(w.rc == LMS_ERR_CLOSED, "%s channel, style %d: waiter returned %d (%s), want LMS_ERR_CLOSED",
                  attached ? "attached" : "unattached", style, w.rc, lms_strerror(w.rc));
            CHECK(w.returned_at - t0 < patience(400), "waiter woke %.0f ms after the release", w.returned_at - t0);
            lms_chunk *c = NULL;
            CHECK_RC(lms_channel_wait_pop(w.ch, 0, &c), LMS_ERR_INVALID_HANDLE);
            CHECK_RC(lms_channel_release(w.ch), LMS_ERR_INVALID_HANDLE);
        }
    }
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: cancel racing natural finish ---------------------------------- */

#define RACE_INFLIGHT 64

typedef struct {
    lms_runtime rt;
    long rounds;                       /* streams this pair runs */
    _Atomic lms_channel live[RACE_INFLIGHT]; /* handles the canceller may hit */
    atomic_int stop;
    long cancelled, end_id, cancels_ok, cancels_stale;
    unsigned seed;
} race_pair;

static void *race_canceller(void *arg) {
    race_pair *p = arg;
    unsigned seed = p->seed * 7919u + 1;
    unsigned yield_every = 0;
    while (!atomic_load(&p->stop)) {
        int i = rand_r(&seed) % RACE_INFLIGHT;
        lms_channel ch = atomic_load(&p->live[i]);
        if (!ch) { sched_yield(); continue; }
        int spin = rand_r(&seed) % 2000;
        for (volatile int k = 0; k < spin; k++) {}
        int rc = lms_channel_cancel(ch);
        if (rc == LMS_OK) p->cancels_ok++;
        else if (rc == LMS_ERR_INVALID_HANDLE) p->cancels_stale++; /* released meanwhile: fine */
        else { failf("cancel: %s", lms_strerror(rc)); break; }
        /* Valgrind runs one thread at a time and switches late: four
        ** cancellers that never block once held the engine to about one
        ** stream a second (19 million cancels in 445 s), and a stream went
        ** 200 s without its first chunk. Yielding every 16 cancels keeps
        ** the race hard (about 150 cancels a stream, both outcomes) and
        ** runs the quick round in seconds. */
        if (under_valgrind && ++yield_every % 16 == 0) sched_yield();
    }
    return NULL;
}

static void *race_consumer(void *arg) {
    race_pair *p = arg;
    unsigned seed = p->seed;
    static const char *scripts[] = {"a", "ab", "abc", "abcd"};
    char *reqs[4];
    for (int i = 0; i < 4; i++) reqs[i] = spell(scripts[i], 0);
    lms_channel chans[RACE_INFLIGHT];
    int which[RACE_INFLIGHT];
    for (long done = 0; done < p->rounds && !failed();) {
        int batch = (int)(p->rounds - done < RACE_INFLIGHT ? p->rounds - done : RACE_INFLIGHT);
        for (int i = 0; i < batch; i++) {
            if (lms_channel_create(&chans[i]) != LMS_OK) { failf("channel_create"); goto out; }
            which[i] = rand_r(&seed) % 4;
            if (rand_r(&seed) % 8 == 0) lms_channel_set_interval(chans[i], 2);
            atomic_store(&p->live[i], chans[i]); /* cancellable even before submission */
            if (!submit_one(p->rt, chans[i], reqs[which[i]])) goto out;
        }
        for (int i = 0; i < batch; i++) {
            stream_result *r = malloc(sizeof *r);
            int ok = drain_wait_pop(chans[i], r, patience(10000));
            if (ok) {
                const char *want = scripts[which[i]];
                if (r->terminals != 1) ok = failf("%d terminal chunks", r->terminals);
                else if (r->reason == LMS_FINISH_END_ID) {
                    p->end_id++;
                    if (strcmp(r->text, want)) ok = failf("end_id with text \"%s\", want \"%s\"", r->text, want);
                    else if (r->n_ids != strlen(want) + 1 || r->ids[r->n_ids - 1] != EOS) ok = failf("end_id without the end token");
                } else if (r->reason == LMS_FINISH_CANCELLED) {
                    p->cancelled++;
                    if (strncmp(r->text, want, r->text_len) || r->text_len >= strlen(want) + 1)
                        ok = failf("cancelled with text \"%s\", not a prefix of \"%s\"", r->text, want);
                } else ok = failf("reason %s in a cancel race", lms_finish_reason_name(r->reason));
                if (ok) ok = ids_spell(r);
            }
            free(r);
            atomic_store(&p->live[i], 0);
            if (lms_channel_release(chans[i]) != LMS_OK) ok = failf("release");
            if (!ok) goto out;
        }
        done += batch;
    }
out:
    for (int i = 0; i < 4; i++) free(reqs[i]);
    return NULL;
}

static int test_cancel_race(void) {
    long round = quick ? 1000 : 100000, total = 0;
    enum { PAIRS = 4, MAX_ROUNDS = 8 };
    lms_runtime rt;
    if (!make_runtime(&rt, 64, 4096)) return 0;
    pthread_t cons[PAIRS], canc[PAIRS];
    double t0 = now_ms();
    long cancelled = 0, end_id = 0, ok_cancels = 0, stale = 0;
    /* Which way each stream goes is up to the scheduler: on two cores under
    ** valgrind a round of 1,000 once ended every stream before a cancel
    ** landed. Race again, up to MAX_ROUNDS rounds, until it has gone both
    ** ways; every round's streams are still checked. */
    for (int r = 0; r < MAX_ROUNDS && !failed() && (cancelled == 0 || end_id == 0); r++) {
        race_pair *pairs = calloc(PAIRS, sizeof *pairs);
        for (int i = 0; i < PAIRS; i++) {
            pairs[i].rt = rt;
            pairs[i].rounds = round / PAIRS;
            pairs[i].seed = 1234u + (unsigned)(i + PAIRS * r);
            pthread_create(&cons[i], NULL, race_consumer, &pairs[i]);
            pthread_create(&canc[i], NULL, race_canceller, &pairs[i]);
        }
        for (int i = 0; i < PAIRS; i++) {
            pthread_join(cons[i], NULL);
            atomic_store(&pairs[i].stop, 1);
            pthread_join(canc[i], NULL);
            cancelled += pairs[i].cancelled;
            end_id += pairs[i].end_id;
            ok_cancels += pairs[i].cancels_ok;
            stale += pairs[i].cancels_stale;
        }
        free(pairs);
        total += round;
    }
    double ms = now_ms() - t0;
    printf("     %ld streams in %.1f s: %ld cancelled, %ld end_id; %ld cancels, %ld on released handles\n",
           cancelled + end_id, ms / 1000, cancelled, end_id, ok_cancels, stale);
    if (failed()) return 0;
    CHECK(cancelled + end_id == total, "%ld streams ended, want %ld", cancelled + end_id, total);
    CHECK(cancelled > 0 && end_id > 0, "the race never went both ways (%ld cancelled, %ld end_id)", cancelled, end_id);
    char stats[512];
    CHECK_RC(lms_runtime_stats(rt, stats, sizeof stats, NULL), LMS_OK);
    json_value *v = json_parse(stats, strlen(stats), NULL, 0);
    CHECK(v, "stats do not parse");
    double sub = json_get_number(v, "submitted", -1), fin = json_get_number(v, "finished", -1);
    double act = json_get_number(v, "active_slots", -1), q = json_get_number(v, "queued", -1);
    json_free(v);
    CHECK(sub == total && fin == total && act == 0 && q == 0, "stats after the race: %s", stats);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: 1,000 concurrent channels, 8 consumer threads ----------------- */

typedef struct {
    lms_channel *chans;
    char (*want)[32];
    int first, count, stride;
    int completed;
} fanout;

/* Each thread owns every stride-th channel, polls their descriptors and
** drains whichever are ready with pop_batch. */
static void *fanout_thread(void *arg) {
    fanout *f = arg;
    int n = 0;
    for (int i = f->first; i < f->count; i += f->stride) n++;
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    int *idx = calloc((size_t)n, sizeof *idx);
    stream_result *res = calloc((size_t)n, sizeof *res);
    int k = 0;
    for (int i = f->first; i < f->count; i += f->stride, k++) {
        idx[k] = i;
        if (lms_channel_fd(f->chans[i], &pfd[k].fd) != LMS_OK) { failf("lms_channel_fd"); goto out; }
        pfd[k].events = POLLIN;
    }
    int open = n;
    double deadline = now_ms() + patience(30000);
    while (open > 0 && !failed()) {
        if (now_ms() > deadline) { failf("%d streams unfinished after 30 s", open); break; }
        int r = poll(pfd, (nfds_t)n, 1000);
        if (r < 0 && errno != EINTR) { failf("poll: %s", strerror(errno)); break; }
        for (k = 0; k < n; k++) {
            if (pfd[k].fd < 0 || !(pfd[k].revents & POLLIN)) continue;
            lms_chunk chunks[64];
            char buf[8192];
            size_t got = 0;
            int rc = lms_channel_pop_batch(f->chans[idx[k]], chunks, 64, buf, sizeof buf, 0, &got);
            if (rc == LMS_EMPTY) { failf("descriptor readable, pop_batch empty"); goto out; }
            if (rc != LMS_OK) { failf("pop_batch: %s", lms_strerror(rc)); goto out; }
            for (size_t j = 0; j < got; j++) if (!fold(&res[k], &chunks[j])) goto out;
            if (res[k].terminals) {
                const char *want = f->want[idx[k]];
                if (res[k].reason != LMS_FINISH_END_ID || strcmp(res[k].text, want)) {
                    failf("channel %d: text \"%s\" reason %s, want \"%s\" end_id", idx[k], res[k].text,
                          lms_finish_reason_name(res[k].reason), want);
                    goto out;
                }
                pfd[k].fd = -1; /* poll ignores negative descriptors */
                open--;
                f->completed++;
            }
        }
    }
out:
    free(pfd);
    free(idx);
    free(res);
    return NULL;
}

static int test_thousand_channels(void) {
    int count = quick ? 100 : 1000;
    enum { THREADS = 8 };
    lms_runtime rt;
    if (!make_runtime(&rt, 64, count + 16)) return 0;
    lms_channel *chans = calloc((size_t)count, sizeof *chans);
    char (*want)[32] = calloc((size_t)count, sizeof *want);
    for (int i = 0; i < count; i++) {
        snprintf(want[i], sizeof want[i], "stream %d: %x~", i, i * 2654435761u);
        CHECK_RC(lms_channel_create(&chans[i]), LMS_OK);
        char *req = spell(want[i], 0);
        int ok = submit_one(rt, chans[i], req);
        free(req);
        if (!ok) return 0;
    }
    pthread_t t[THREADS];
    fanout f[THREADS];
    for (int i = 0; i < THREADS; i++) {
        f[i] = (fanout){chans, want, i, count, THREADS, 0};
        pthread_create(&t[i], NULL, fanout_thread, &f[i]);
    }
    int completed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        completed += f[i].completed;
    }
    for (int i = 0; i < count; i++) lms_channel_release(chans[i]);
    free(chans);
    free(want);
    if (failed()) return 0;
    CHECK(completed == count, "%d of %d streams completed", completed, count);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: stale, released, forged and zero handles; NULLs; states ------- */

static int noop_handler(const lms_chunk *c, void *u) { (void)c; (void)u; return 0; }

/* Every function taking a channel handle refuses h with want. */
static int channel_calls_refuse(lms_channel h, int want, const char *what) {
    lms_chunk *c = (lms_chunk *)1;
    lms_chunk chunks[2];
    char buf[256];
    size_t n = 0;
    int fd = -1, fin = 0, reason = 0;
    size_t pending = 0;
    int rcs[] = {
        lms_channel_set_interval(h, 2), lms_channel_set_skip_special(h, 0),
        lms_channel_set_queue(h, 4, LMS_QUEUE_PAUSE), lms_channel_try_pop(h, &c),
        lms_channel_wait_pop(h, 10, &c), lms_channel_pop_batch(h, chunks, 2, buf, sizeof buf, 10, &n),
        lms_channel_consume(h, noop_handler, NULL), lms_channel_cancel(h), lms_channel_fd(h, &fd),
        lms_channel_state(h, &fin, &reason, &pending), lms_channel_release(h),
    };
    static const char *names[] = {"set_interval", "set_skip_special", "set_queue", "try_pop", "wait_pop",
                                  "pop_batch", "consume", "cancel", "fd", "state", "release"};
    for (size_t i = 0; i < sizeof rcs / sizeof *rcs; i++)
        CHECK(rcs[i] == want, "%s handle: lms_channel_%s returned %d (%s)", what, names[i], rcs[i], lms_strerror(rcs[i]));
    CHECK(c == NULL, "%s handle: a pop left *out unset", what);
    return 1;
}

static int runtime_calls_refuse(lms_runtime h, lms_channel live_ch, const char *what) {
    char err[256] = "", buf[256];
    size_t len = 0;
    lms_chunk *c = NULL;
    int rc;
    CHECK((rc = lms_runtime_stats(h, buf, sizeof buf, &len)) == LMS_ERR_INVALID_HANDLE, "%s runtime: stats %d", what, rc);
    CHECK((rc = lms_submit(h, "{\"prompt\":\"a\",\"script\":[]}", &live_ch, 1, err, sizeof err)) == LMS_ERR_INVALID_HANDLE,
          "%s runtime: submit %d", what, rc);
    CHECK(err[0], "%s runtime: submit failed without a message", what);
    CHECK((rc = lms_complete(h, "{\"prompt\":\"a\",\"script\":[]}", &c, err, sizeof err)) == LMS_ERR_INVALID_HANDLE,
          "%s runtime: complete %d", what, rc);
    CHECK((rc = lms_runtime_destroy(h)) == LMS_ERR_INVALID_HANDLE, "%s runtime: destroy %d", what, rc);
    return 1;
}

static int test_handles(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 8, 64)) return 0;
    lms_channel live;
    CHECK_RC(lms_channel_create(&live), LMS_OK);

    /* Zero, released (stale and double-released), forged. */
    if (!channel_calls_refuse(0, LMS_ERR_INVALID_HANDLE, "zero")) return 0;
    lms_channel dead;
    CHECK_RC(lms_channel_create(&dead), LMS_OK);
    CHECK_RC(lms_channel_release(dead), LMS_OK);
    if (!channel_calls_refuse(dead, LMS_ERR_INVALID_HANDLE, "released")) return 0;
    CHECK_RC(lms_channel_release(dead), LMS_ERR_INVALID_HANDLE);
    /* A new channel probably reuses dead's slot: dead must still be refused. */
    lms_channel reuse;
    CHECK_RC(lms_channel_create(&reuse), LMS_OK);
    if (!channel_calls_refuse(dead, LMS_ERR_INVALID_HANDLE, "stale (slot reused)")) return 0;
    CHECK_RC(lms_channel_set_interval(reuse, 3), LMS_OK);
    lms_channel forged[] = {live ^ (1ull << 32), live + 1000, 0xFFFFFFFFFFFFFFFFull, 0x00000001FFFFFFFFull,
                            live & 0xFFFFFFFFull, live & ~0xFFFFFFFFull};
    for (size_t i = 0; i < sizeof forged / sizeof *forged; i++) {
        if (forged[i] == live || forged[i] == reuse) continue;
        char what[64];
        snprintf(what, sizeof what, "forged 0x%llx", (unsigned long long)forged[i]);
        if (!channel_calls_refuse(forged[i], LMS_ERR_INVALID_HANDLE, what)) return 0;
    }
    CHECK_RC(lms_channel_set_interval(live, 1), LMS_OK); /* untouched by all that */

    /* Runtime handles. */
    if (!runtime_calls_refuse(0, live, "zero")) return 0;
    if (!runtime_calls_refuse(rt ^ (1ull << 33), live, "forged")) return 0;
    if (!runtime_calls_refuse(0xFFFFFFFFFFFFFFFFull, live, "forged")) return 0;
    lms_runtime rt2;
    if (!make_runtime(&rt2, 1, 1)) return 0;
    CHECK_RC(lms_runtime_destroy(rt2), LMS_OK);
    if (!runtime_calls_refuse(rt2, live, "destroyed")) return 0;
    /* A channel in a list with a bad handle: nothing is attached. */
    char err[256] = "";
    lms_channel two[2] = {live, dead};
    CHECK_RC(lms_submit(rt, "{\"prompts\":[\"a\",\"b\"],\"script\":[]}", two, 2, err, sizeof err), LMS_ERR_INVALID_HANDLE);
    CHECK_RC(lms_channel_set_interval(live, 1), LMS_OK);

    /* NULL pointers and bad values. */
    lms_chunk *c = NULL;
    lms_chunk chunks[2];
    char buf[64];
    size_t n = 0;
    lms_runtime rtx;
    CHECK_RC(lms_channel_create(NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_runtime_create(NULL, &rtx, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_runtime_create("{\"backend\":\"replay\"}", NULL, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_runtime_create(NULL, NULL, NULL, 0), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_configure_process(NULL, NULL, 0), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_try_pop(live, NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_wait_pop(live, 10, NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_pop_batch(live, NULL, 2, buf, sizeof buf, 0, &n), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_pop_batch(live, chunks, 2, buf, sizeof buf, 0, NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_pop_batch(live, chunks, 0, buf, sizeof buf, 0, &n), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_pop_batch(live, chunks, 2, NULL, 64, 0, &n), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_consume(live, NULL, NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_fd(live, NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_channel_state(live, NULL, NULL, NULL), LMS_OK); /* documented: any may be NULL */
    CHECK_RC(lms_channel_set_queue(live, 4, 7), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_submit(rt, NULL, &live, 1, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_submit(rt, "{\"prompt\":\"a\",\"script\":[]}", NULL, 1, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_submit(rt, "{\"prompt\":\"a\",\"script\":[]}", &live, 0, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_complete(rt, NULL, &c, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_complete(rt, "{\"prompt\":\"a\",\"script\":[]}", NULL, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    lms_chunk_free(NULL);
    /* A message buffer of size 1 or NULL is fine. */
    char one[1] = {'x'};
    CHECK_RC(lms_submit(rt, "{", &live, 1, one, sizeof one), LMS_ERR_BAD_JSON);
    CHECK(one[0] == 0, "a one-byte message buffer holds the NUL");
    CHECK_RC(lms_submit(rt, "{", &live, 1, NULL, 100), LMS_ERR_BAD_JSON);

    /* n != number of prompts: an error, nothing attached. */
    lms_channel b;
    CHECK_RC(lms_channel_create(&b), LMS_OK);
    lms_channel pair[2] = {live, b};
    int rc = lms_submit(rt, "{\"prompt\":\"a\",\"script\":[]}", pair, 2, err, sizeof err);
    CHECK(rc < 0 && err[0], "2 channels for 1 prompt: %d", rc);
    rc = lms_submit(rt, "{\"prompts\":[\"a\",\"b\"],\"script\":[]}", pair, 1, err, sizeof err);
    CHECK(rc < 0 && err[0], "1 channel for 2 prompts: %d", rc);
    /* The same channel twice in one request: LMS_ERR_STATE, nothing attached. */
    lms_channel same[2] = {b, b};
    CHECK_RC(lms_submit(rt, "{\"prompts\":[\"a\",\"b\"],\"script\":[]}", same, 2, err, sizeof err), LMS_ERR_STATE);
    CHECK_RC(lms_channel_set_interval(live, 1), LMS_OK);
    CHECK_RC(lms_channel_set_interval(b, 1), LMS_OK);

    /* Attached once; twice is LMS_ERR_STATE, and so are the setters. */
    char *req = spell("xyz", 0);
    CHECK_RC(lms_submit(rt, req, &live, 1, err, sizeof err), LMS_OK);
    CHECK_RC(lms_submit(rt, req, &live, 1, err, sizeof err), LMS_ERR_STATE);
    free(req);
    CHECK(err[0], "attach twice without a message");
    CHECK_RC(lms_channel_set_interval(live, 2), LMS_ERR_STATE);
    CHECK_RC(lms_channel_set_skip_special(live, 0), LMS_ERR_STATE);
    CHECK_RC(lms_channel_set_queue(live, 8, LMS_QUEUE_COALESCE), LMS_ERR_STATE);
    stream_result r;
    if (!drain_wait_pop(live, &r, patience(5000))) return 0;
    CHECK(!strcmp(r.text, "xyz"), "text %s", r.text);
    CHECK_RC(lms_channel_set_interval(live, 2), LMS_ERR_STATE); /* still, after the end */

    /* Releasing everything; then every handle is stale. */
    CHECK_RC(lms_channel_release(live), LMS_OK);
    CHECK_RC(lms_channel_release(b), LMS_OK);
    CHECK_RC(lms_channel_release(reuse), LMS_OK);
    if (!channel_calls_refuse(live, LMS_ERR_INVALID_HANDLE, "released after use")) return 0;
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_ERR_INVALID_HANDLE);
    return 1;
}

/* ---- Test: destroying a runtime with 100 streams in flight ---------------- */

static int test_destroy_live(void) {
    enum { N = 100 };
    lms_runtime rt;
    if (!make_runtime(&rt, 64, 1000)) return 0;
    lms_channel chans[N];
    /* Paced so each script lasts 14 s, far past any start-up delay (one of
    ** valgrind's took 2.9 s): destroy, not the script, must end them. */
    char *req = spell("the quick brown fox jumps over the lazy dog, again and again and again", 200);
    for (int i = 0; i < N; i++) {
        CHECK_RC(lms_channel_create(&chans[i]), LMS_OK);
        if (!submit_one(rt, chans[i], req)) { free(req); return 0; }
    }
    free(req);
    /* Let the first 64 get going (36 stay queued: max_slots is 64). */
    lms_chunk *c = NULL;
    CHECK_RC(lms_channel_wait_pop(chans[0], patience(5000), &c), LMS_OK);
    stream_result first = {0};
    fold(&first, c);
    lms_chunk_free(c);
    sleep_ms(30);
    double t0 = now_ms();
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    double took = now_ms() - t0;
    CHECK(took < patience(1000), "destroy took %.0f ms", took);
    /* The terminal chunks were pushed before destroy returned: no waiting. */
    for (int i = 0; i < N; i++) {
        stream_result r = {0};
        if (i == 0) r = first;
        for (;;) {
            int rc = lms_channel_try_pop(chans[i], &c);
            if (rc == LMS_DONE) break;
            CHECK(rc == LMS_OK, "channel %d after destroy: %s (the terminal chunk must be queued)", i, lms_strerror(rc));
            int ok = fold(&r, c);
            lms_chunk_free(c);
            if (!ok) return 0;
        }
        CHECK(r.terminals == 1, "channel %d: %d terminal chunks", i, r.terminals);
        CHECK(r.reason == LMS_FINISH_ERROR && r.error_code == LMS_ERR_SHUTDOWN, "channel %d: reason %s code %d", i,
              lms_finish_reason_name(r.reason), r.error_code);
        if (!ids_spell(&r)) return 0;
        CHECK_RC(lms_channel_cancel(chans[i]), LMS_OK); /* harmless now */
        CHECK_RC(lms_channel_release(chans[i]), LMS_OK);
    }
    return 1;
}

/* ---- Test: fork ------------------------------------------------------------ */

static int child_checks(lms_runtime rt, lms_channel ch) {
    lms_runtime rt2;
    lms_channel ch2;
    lms_chunk *c = NULL;
    lms_chunk chunks[1];
    char buf[64], err[64];
    size_t n;
    int fd;
    struct { const char *name; int rc; } calls[] = {
        {"channel_create", lms_channel_create(&ch2)},
        {"runtime_create", lms_runtime_create("{\"backend\":\"replay\",\"vocab\":[\"00\"],\"eos_id\":0}", &rt2, err, sizeof err)},
        {"submit", lms_submit(rt, "{\"prompt\":\"a\",\"script\":[]}", &ch, 1, err, sizeof err)},
        {"complete", lms_complete(rt, "{\"prompt\":\"a\",\"script\":[]}", &c, err, sizeof err)},
        {"configure_process", lms_configure_process("{\"threads\":1}", err, sizeof err)},
        {"runtime_stats", lms_runtime_stats(rt, buf, sizeof buf, &n)},
        {"set_interval", lms_channel_set_interval(ch, 1)},
        {"set_skip_special", lms_channel_set_skip_special(ch, 1)},
        {"set_queue", lms_channel_set_queue(ch, 1, 0)},
        {"try_pop", lms_channel_try_pop(ch, &c)},
        {"wait_pop", lms_channel_wait_pop(ch, -1, &c)},
        {"pop_batch", lms_channel_pop_batch(ch, chunks, 1, buf, sizeof buf, -1, &n)},
        {"consume", lms_channel_consume(ch, noop_handler, NULL)},
        {"cancel", lms_channel_cancel(ch)},
        {"fd", lms_channel_fd(ch, &fd)},
        {"state", lms_channel_state(ch, NULL, NULL, NULL)},
        {"release", lms_channel_release(ch)},
        {"runtime_destroy", lms_runtime_destroy(rt)},
    };
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        if (calls[i].rc != LMS_ERR_FORKED) {
            fprintf(stderr, "child: lms_%s returned %d, want LMS_ERR_FORKED\n", calls[i].name, calls[i].rc);
            return 0;
        }
    if (strcmp(lms_strerror(LMS_ERR_FORKED), "called in a forked child process") ||
        strcmp(lms_finish_reason_name(LMS_FINISH_CANCELLED), "cancelled") || lms_abi_version() != LMS_ABI_VERSION) {
        fprintf(stderr, "child: strerror/finish_reason_name/abi_version broken\n");
        return 0;
    }
    lms_chunk_free(NULL);
    return 1;
}

static int test_fork(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 8, 64)) return 0;
    lms_channel ch, ch_in_child;
    CHECK_RC(lms_channel_create(&ch), LMS_OK);
    CHECK_RC(lms_channel_create(&ch_in_child), LMS_OK);
    char *req = spell("before the fork", 1);
    int ok = submit_one(rt, ch, req);
    free(req);
    if (!ok) return 0;
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(5); /* a call that enters the Go runtime would hang: fail instead */
        _exit(child_checks(rt, ch_in_child) ? 0 : 1);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(!WIFSIGNALED(st), "child killed by signal %d%s", WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (it hung)" : "");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed (exit %d)", WEXITSTATUS(st));
    /* The parent goes on: the stream started before the fork completes, and
    ** a new one works. */
    stream_result r;
    if (!drain_wait_pop(ch, &r, patience(5000))) return 0;
    CHECK(!strcmp(r.text, "before the fork") && r.reason == LMS_FINISH_END_ID, "parent stream: \"%s\"", r.text);
    req = spell("after", 0);
    ok = submit_one(rt, ch_in_child, req);
    free(req);
    if (!ok || !drain_wait_pop(ch_in_child, &r, patience(5000))) return 0;
    CHECK(!strcmp(r.text, "after"), "parent stream after fork: \"%s\"", r.text);
    CHECK_RC(lms_channel_release(ch), LMS_OK);
    CHECK_RC(lms_channel_release(ch_in_child), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: the readiness descriptor -------------------------------------- */

static int readable(int fd, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {}
    return r > 0 && (p.revents & POLLIN);
}

static int test_fd(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 8, 64)) return 0;
    lms_channel ch;
    CHECK_RC(lms_channel_create(&ch), LMS_OK);
    int fd = -1, fd2 = -1;
    CHECK_RC(lms_channel_fd(ch, &fd), LMS_OK);
    CHECK_RC(lms_channel_fd(ch, &fd2), LMS_OK);
    CHECK(fd >= 0 && fd == fd2, "fd %d then %d", fd, fd2);
    CHECK(!readable(fd, 0), "unattached channel is readable");
    double delay = under_valgrind ? 400 : 100;
    char *req = spell("abc", delay);
    int ok = submit_one(rt, ch, req);
    free(req);
    if (!ok) return 0;
    stream_result r = {0};
    int wakeups = 0;
    while (!r.terminals) {
        double t0 = now_ms();
        CHECK(readable(fd, patience(5000)), "no readiness within 5 s");
        double waited = now_ms() - t0;
        wakeups++;
        /* Not readable before the paced chunk could exist. */
        CHECK(wakeups > 1 || waited > delay * 0.5, "readable after %.1f ms, the first chunk is due at %.0f ms", waited, delay);
        lms_chunk chunks[8];
        char buf[512];
        size_t n = 0;
        CHECK_RC(lms_channel_pop_batch(ch, chunks, 8, buf, sizeof buf, 0, &n), LMS_OK);
        for (size_t i = 0; i < n; i++) if (!fold(&r, &chunks[i])) return 0;
        if (!r.terminals) {
            /* Drained and unfinished: not readable. A chunk may land between
            ** the state check and poll, so a readable answer is re-checked. */
            int finished = 0;
            size_t pending = 0;
            CHECK_RC(lms_channel_state(ch, &finished, NULL, &pending), LMS_OK);
            if (!finished && pending == 0 && readable(fd, 0)) {
                CHECK_RC(lms_channel_state(ch, &finished, NULL, &pending), LMS_OK);
                CHECK(finished || pending > 0, "drained and unfinished, yet readable");
            }
        }
    }
    CHECK(!strcmp(r.text, "abc") && r.reason == LMS_FINISH_END_ID, "text \"%s\"", r.text);
    CHECK(wakeups >= 3, "%d wake-ups for 4 paced chunks", wakeups);
    /* Finished (and drained) stays readable, so a loop sees LMS_DONE. */
    CHECK(readable(fd, 0), "finished channel not readable");
    lms_chunk *c = NULL;
    CHECK_RC(lms_channel_try_pop(ch, &c), LMS_DONE);
    CHECK(readable(fd, 0), "finished channel not readable after LMS_DONE");
    CHECK_RC(lms_channel_release(ch), LMS_OK);
    CHECK_RC(lms_channel_fd(ch, &fd2), LMS_ERR_INVALID_HANDLE);
    /* A channel finished before anyone asked for its descriptor is readable
    ** as soon as the descriptor exists. */
    CHECK_RC(lms_channel_create(&ch), LMS_OK);
    req = spell("z", 0);
    ok = submit_one(rt, ch, req);
    free(req);
    if (!ok) return 0;
    int finished = 0;
    double deadline = now_ms() + patience(5000);
    while (!finished && now_ms() < deadline) { lms_channel_state(ch, &finished, NULL, NULL); sleep_ms(1); }
    CHECK_RC(lms_channel_fd(ch, &fd), LMS_OK);
    CHECK(readable(fd, 0), "late descriptor of a finished stream is not readable");
    CHECK_RC(lms_channel_release(ch), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: one multiplexer serves many streams --------------------------- */

typedef struct {
    lms_mux mux;
    int rc;
} mux_waiter;

static void *mux_wait_thread(void *arg) {
    mux_waiter *w = arg;
    lms_channel ready[4];
    size_t n = 0;
    w->rc = lms_mux_ready(w->mux, -1, ready, 4, &n);
    return NULL;
}

/* Paced streams read through one multiplexer: poll on its descriptor, list
** the ready channels, drain each with a batch pop. Every stream arrives
** whole and in order; drained streams drop out of the ready list; the
** membership rules and a destroy that wakes a blocked waiter hold. */
static int test_mux(void) {
    int count = quick ? 40 : 300;
    lms_runtime rt;
    if (!make_runtime(&rt, 64, count + 16)) return 0;
    lms_mux mux;
    CHECK_RC(lms_mux_create(&mux), LMS_OK);
    int fd = -1;
    CHECK_RC(lms_mux_fd(mux, &fd), LMS_OK);
    CHECK(fd >= 0 && !readable(fd, 0), "an empty multiplexer is readable");
    lms_channel *chans = calloc((size_t)count, sizeof *chans);
    stream_result *res = calloc((size_t)count, sizeof *res);
    char (*want)[40] = calloc((size_t)count, sizeof *want);
    for (int i = 0; i < count; i++) {
        snprintf(want[i], sizeof want[i], "mux %d: %x~", i, i * 2654435761u);
        CHECK_RC(lms_channel_create(&chans[i]), LMS_OK);
        CHECK_RC(lms_mux_add(mux, chans[i]), LMS_OK);
    }
    CHECK_RC(lms_mux_add(mux, chans[0]), LMS_ERR_STATE);
    lms_mux other;
    CHECK_RC(lms_mux_create(&other), LMS_OK);
    CHECK_RC(lms_mux_add(other, chans[0]), LMS_ERR_STATE);
    CHECK_RC(lms_mux_remove(other, chans[0]), LMS_ERR_STATE);
    for (int i = 0; i < count; i++) {
        char *req = spell(want[i], under_valgrind ? 2 : 0.5);
        int ok = submit_one(rt, chans[i], req);
        free(req);
        if (!ok) return 0;
    }
    int finished = 0, wakeups = 0;
    double deadline = now_ms() + patience(30000);
    while (finished < count) {
        CHECK(now_ms() < deadline, "%d of %d streams finished", finished, count);
        if (!readable(fd, 1000)) continue;
        wakeups++;
        lms_channel ready[64];
        size_t n = 0;
        int rc = lms_mux_ready(mux, 0, ready, 64, &n);
        CHECK(rc == LMS_OK || rc == LMS_EMPTY, "lms_mux_ready: %s", lms_strerror(rc));
        for (size_t k = 0; k < n; k++) {
            int i = -1;
            for (int j = 0; j < count; j++) if (chans[j] == ready[k]) { i = j; break; }
            CHECK(i >= 0, "lms_mux_ready listed an unknown handle");
            CHECK(!res[i].terminals, "stream %d listed after its terminal chunk was popped", i);
            lms_chunk chunks[16];
            char buf[1024];
            size_t got = 0;
            CHECK_RC(lms_channel_pop_batch(chans[i], chunks, 16, buf, sizeof buf, 0, &got), LMS_OK);
            for (size_t c = 0; c < got; c++) if (!fold(&res[i], &chunks[c])) return 0;
            if (res[i].terminals) finished++;
        }
    }
    for (int i = 0; i < count; i++) {
        CHECK(!strcmp(res[i].text, want[i]) && res[i].reason == LMS_FINISH_END_ID,
              "stream %d: \"%s\"", i, res[i].text);
    }
    /* Everything drained: nothing listed, nothing readable. */
    lms_channel ready[4];
    size_t n = 9;
    CHECK_RC(lms_mux_ready(mux, 0, ready, 4, &n), LMS_EMPTY);
    CHECK(n == 0 && !readable(fd, 0), "drained multiplexer still ready");
    CHECK_RC(lms_mux_ready(mux, 10, ready, 4, &n), LMS_EMPTY);
    CHECK_RC(lms_mux_ready(mux, 0, ready, 0, &n), LMS_ERR_INVALID_ARGUMENT);
    /* Released channels leave; removed ones can join another multiplexer. */
    CHECK_RC(lms_channel_release(chans[1]), LMS_OK);
    CHECK_RC(lms_mux_remove(mux, chans[1]), LMS_ERR_INVALID_HANDLE);
    CHECK_RC(lms_mux_remove(mux, chans[0]), LMS_OK);
    CHECK_RC(lms_mux_add(other, chans[0]), LMS_OK);
    /* Destroy wakes a waiter blocked without a timeout. */
    mux_waiter w = {mux, 99};
    pthread_t t;
    pthread_create(&t, NULL, mux_wait_thread, &w);
    sleep_ms(under_valgrind ? 200 : 20);
    CHECK_RC(lms_mux_destroy(mux), LMS_OK);
    pthread_join(t, NULL);
    CHECK(w.rc == LMS_ERR_CLOSED || w.rc == LMS_ERR_INVALID_HANDLE, "waiter woke with %s", lms_strerror(w.rc));
    CHECK_RC(lms_mux_destroy(mux), LMS_ERR_INVALID_HANDLE);
    CHECK_RC(lms_mux_fd(mux, &fd), LMS_ERR_INVALID_HANDLE);
    CHECK_RC(lms_mux_add(0, chans[2]), LMS_ERR_INVALID_HANDLE);
    CHECK_RC(lms_mux_create(NULL), LMS_ERR_INVALID_ARGUMENT);
    CHECK_RC(lms_mux_destroy(other), LMS_OK);
    for (int i = 0; i < count; i++) if (i != 1) CHECK_RC(lms_channel_release(chans[i]), LMS_OK);
    free(chans);
    free(res);
    free(want);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Test: complete, stats, configure_process ----------------------------- */

static int test_complete_stats_config(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 4, 16)) return 0;
    char err[512] = "";
    lms_chunk *c = NULL;
    char *req = spell("the whole answer", 0);
    CHECK_RC(lms_complete(rt, req, &c, err, sizeof err), LMS_OK);
    free(req);
    CHECK(c && c->finished == 1 && c->reason == LMS_FINISH_END_ID, "complete: not a terminal end_id chunk");
    CHECK(c->text_len == 16 && !strcmp(c->text, "the whole answer"), "complete: text \"%s\"", c->text);
    CHECK(c->n_token_ids == 17 && c->token_ids[16] == EOS && c->token_ids[0] == tok('t'), "complete: %zu ids", c->n_token_ids);
    CHECK(c->usage.generated_tokens == 17, "complete: usage.generated_tokens %lld", (long long)c->usage.generated_tokens);
    lms_chunk_free(c);
    c = NULL;
    CHECK_RC(lms_complete(rt, "{\"prompts\":[\"a\",\"b\"],\"script\":[]}", &c, err, sizeof err), LMS_ERR_INVALID_ARGUMENT);
    CHECK(c == NULL && err[0], "complete with two prompts");
    CHECK_RC(lms_complete(rt, "{\"prompt\":\"a\",\"script\":[[1]],\"max_token\":1}", &c, err, sizeof err), LMS_ERR_INVALID_REQUEST);
    CHECK(strstr(err, "max_token"), "message does not name the field: %s", err);
    CHECK_RC(lms_complete(rt, "{\"prompt\":\"a\",\"script\":[[1],[2]],\"error_at\":1}", &c, err, sizeof err), LMS_OK);
    CHECK(c->reason == LMS_FINISH_ERROR && c->error_code == LMS_ERR_BACKEND && c->error_message[0] && !strcmp(c->text, " "),
          "complete with a backend error: reason %d code %d text \"%s\"", c->reason, c->error_code, c->text);
    lms_chunk_free(c);

    /* Stats. */
    char small[8], buf[512];
    size_t len = 0, len2 = 0;
    CHECK_RC(lms_runtime_stats(rt, small, sizeof small, &len), LMS_ERR_BUFFER_TOO_SMALL);
    CHECK(len > sizeof small, "stats needs %zu bytes", len);
    CHECK_RC(lms_runtime_stats(rt, NULL, 0, &len2), LMS_ERR_BUFFER_TOO_SMALL);
    CHECK(len2 == len, "stats length %zu then %zu", len, len2);
    CHECK_RC(lms_runtime_stats(rt, buf, len + 1, &len2), LMS_OK); /* exactly enough */
    CHECK(len2 == len && strlen(buf) == len, "stats length");
    char jerr[128];
    json_value *v = json_parse(buf, len, jerr, sizeof jerr);
    CHECK(v, "stats JSON does not parse: %s: %s", jerr, buf);
    static const char *keys[] = {"max_slots", "active_slots", "queued", "submitted", "finished", "tokens_generated", "iterations"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const json_value *m = json_get(v, keys[i]);
        if (!m || m->type != JSON_NUMBER) { json_free(v); return failf("stats lack %s: %s", keys[i], buf); }
    }
    double sub = json_get_number(v, "submitted", 0), fin = json_get_number(v, "finished", 0);
    double slots = json_get_number(v, "max_slots", 0), toks = json_get_number(v, "tokens_generated", 0);
    double iters = json_get_number(v, "iterations", 0);
    json_free(v);
    /* Two completes ran (the invalid ones never queued): 17 + 2 tokens. */
    CHECK(sub == 2 && fin == 2 && slots == 4, "stats: %s", buf);
    CHECK(toks >= 18 && iters >= 17, "stats count tokens/iterations: %s", buf);

    /* Process settings. */
    CHECK_RC(lms_configure_process("{\"threads\":2}", err, sizeof err), LMS_OK);
    CHECK_RC(lms_configure_process("{}", err, sizeof err), LMS_OK);
    err[0] = 0;
    CHECK_RC(lms_configure_process("{\"threads\":0}", err, sizeof err), LMS_ERR_INVALID_REQUEST);
    CHECK(strstr(err, "threads"), "threads 0: message \"%s\"", err);
    err[0] = 0;
    CHECK_RC(lms_configure_process("{\"bogus\":1}", err, sizeof err), LMS_ERR_INVALID_REQUEST);
    CHECK(strstr(err, "bogus"), "bogus field: message \"%s\"", err);
    err[0] = 0;
    CHECK_RC(lms_configure_process("{\"threads\":\"2\"}", err, sizeof err), LMS_ERR_INVALID_REQUEST);
    CHECK(err[0], "wrong type: no message");
    CHECK_RC(lms_configure_process("{\"memory_limit_bytes\":0}", err, sizeof err), LMS_ERR_INVALID_REQUEST);
    CHECK_RC(lms_configure_process("threads=2", err, sizeof err), LMS_ERR_BAD_JSON);
    CHECK_RC(lms_configure_process("{\"gc_percent\":100,\"memory_limit_bytes\":17179869184}", err, sizeof err), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);

    /* Runtime creation errors carry messages. */
    lms_runtime bad;
    err[0] = 0;
    CHECK_RC(lms_runtime_create("{\"backend\":\"replay\",\"vocab\":[\"41\"],\"eos_id\":0,\"max_slots\":0}", &bad, err, sizeof err),
             LMS_ERR_INVALID_REQUEST);
    CHECK(strstr(err, "max_slots"), "max_slots 0: message \"%s\"", err);
    CHECK_RC(lms_runtime_create("{\"backend\":\"nope\"}", &bad, err, sizeof err), LMS_ERR_INVALID_REQUEST);
    CHECK_RC(lms_runtime_create("{\"backend\":", &bad, err, sizeof err), LMS_ERR_BAD_JSON);
    CHECK(lms_abi_version() == LMS_ABI_VERSION, "ABI version");
    CHECK(!strcmp(lms_strerror(12345), "unknown status") && !strcmp(lms_finish_reason_name(99), "unknown"), "names of unknown codes");
    return 1;
}

/* ---- Test: the pause policy stops decoding until the consumer drains ------ */

static int test_pause_policy(void) {
    lms_runtime rt;
    if (!make_runtime(&rt, 8, 64)) return 0;
    lms_channel ch;
    CHECK_RC(lms_channel_create(&ch), LMS_OK);
    CHECK_RC(lms_channel_set_queue(ch, 2, LMS_QUEUE_PAUSE), LMS_OK);
    const char *text = "paused decoding resumes when the consumer drains";
    char *req = spell(text, 0);
    int ok = submit_one(rt, ch, req);
    free(req);
    if (!ok) return 0;
    /* Nobody pops: the queue fills to its limit and the engine stops. */
    size_t pending = 0;
    double deadline = now_ms() + patience(5000);
    while (pending < 2) {
        CHECK_RC(lms_channel_state(ch, NULL, NULL, &pending), LMS_OK);
        CHECK(now_ms() < deadline, "queue never filled");
        sleep_ms(1);
    }
    sleep_ms(patience(50));
    int finished = 0;
    CHECK_RC(lms_channel_state(ch, &finished, NULL, &pending), LMS_OK);
    CHECK(!finished && pending == 2, "paused stream: finished %d pending %zu", finished, pending);
    /* Drain slowly: every token arrives, one chunk per token (nothing had to
    ** be coalesced), and the stream finishes. */
    stream_result r = {0};
    while (!r.terminals) {
        lms_chunk *c = NULL;
        CHECK_RC(lms_channel_wait_pop(ch, patience(5000), &c), LMS_OK);
        ok = fold(&r, c);
        lms_chunk_free(c);
        if (!ok) return 0;
    }
    CHECK(!strcmp(r.text, text) && r.reason == LMS_FINISH_END_ID, "text \"%s\"", r.text);
    CHECK(r.chunks == (int)strlen(text) + 1, "%d chunks for %zu tokens and the end", r.chunks, strlen(text));
    if (!ids_spell(&r)) return 0;
    CHECK_RC(lms_channel_release(ch), LMS_OK);
    CHECK_RC(lms_runtime_destroy(rt), LMS_OK);
    return 1;
}

/* ---- Main ------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int (*fn)(void);
    int known_bug; /* runs only with --known-bugs */
} test;

static const test tests[] = {
    {"pop_styles", test_pop_styles, 0},
    {"consume_stop_keeps_rest", test_consume_stop_keeps_rest, 0},
    {"cancel_wakes_waiter", test_cancel_wakes_waiter, 0},
    {"release_wakes_waiter", test_release_wakes_waiter, 0},
    {"cancel_race", test_cancel_race, 0},
    {"thousand_channels", test_thousand_channels, 0},
    {"handles", test_handles, 0},
    {"destroy_live", test_destroy_live, 0},
    {"fork", test_fork, 0},
    {"fd", test_fd, 0},
    {"complete_stats_config", test_complete_stats_config, 0},
    {"pause_policy", test_pause_policy, 0},
    {"mux", test_mux, 0},
};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only[32];
    int n_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--valgrind")) under_valgrind = 1;
        else if (!strcmp(argv[i], "--known-bugs")) known_bugs = 1;
        else if (n_only < 32) only[n_only++] = argv[i];
    }
    /* Valgrind preloads its vgpreload_*.so into the client: stretch timeouts
    ** even when --valgrind was not given. */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) under_valgrind = 1;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096; /* 1,000 eventfds */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int passed = 0, nfailed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        const test *t = &tests[i];
        int selected = n_only == 0;
        for (int k = 0; k < n_only; k++) if (!strcmp(only[k], t->name)) selected = 1;
        if (!selected) continue;
        if (t->known_bug && !known_bugs && n_only == 0) {
            printf("SKIP %s (reproduces a known library bug; run with --known-bugs)\n", t->name);
            continue;
        }
        fail_msg[0] = 0;
        double t0 = now_ms();
        int ok = t->fn() && !failed();
        double ms = now_ms() - t0;
        if (ok) { passed++; printf("PASS %-24s %8.0f ms\n", t->name, ms); }
        else { nfailed++; printf("FAIL %-24s %8.0f ms: %s\n", t->name, ms, fail_msg); }
    }
    printf("%d passed, %d failed\n", passed, nfailed);
    return nfailed ? 1 : 0;
}
