/*
** bench.c — C-side throughput and latency of liblmstream on the replay backend.
**
**   bench [--streams S] [--tokens L] [--threads T] [--samples N]
**
** (a) chunks/s through lms_channel_pop_batch: S concurrent streams (default
**     64 = max_slots) each replaying L one-token bursts of one byte, read by T
**     consumer threads that wait with poll() on the channels' descriptors
**     (10 ms timeout) and drain every ready channel with pop_batch (64 chunks,
**     64 KiB buffer, no wait). Queues hold 4096 chunks so nothing coalesces
**     unless consumers fall far behind; chunks and tokens are both counted.
**     The clock runs from the first submit to the last terminal chunk.
** (b) readiness wake-up latency, two honest views:
**     - submit -> readable: a thread blocks in poll() on a fresh channel's
**       descriptor; the main thread takes t0 and submits a one-token request
**       to an idle runtime; the poller takes t1 when poll() returns. t1 - t0
**       (same CLOCK_MONOTONIC) is the whole path: submit parsing, the engine
**       waking, one iteration, the push, the eventfd write and the kernel
**       waking the poller. It bounds the pure wake-up latency from above.
**     - paced jitter: a stream paced at delay_ms = 1; the consumer blocks in
**       poll() and timestamps each wake-up. The push times cannot be seen
**       from C, so this reports (interval between wake-ups - 1 ms): the
**       engine's per-iteration overhead and the Go timer's lateness plus the
**       difference of two wake-up latencies. A late wake-up shows in p99.
** (c) as (a), but drained with lms_channel_wait_pop(ch, 0, ...) one chunk at
**     a time (one malloc per chunk, freed with lms_chunk_free).
** Prints a table: figure, value, unit.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lmstream.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what, int rc, const char *err) {
    fprintf(stderr, "bench: %s: %s %s\n", what, lms_strerror(rc), err ? err : "");
    exit(1);
}

/* Vocabulary: id 0 the end token, ids 1..26 the letters a..z. */
static lms_runtime make_runtime(int max_slots, int max_queue) {
    char cfg[1024], *p = cfg, err[256] = "";
    p += sprintf(p, "{\"backend\":\"replay\",\"eos_id\":0,\"special_ids\":[0],\"max_slots\":%d,\"max_queue\":%d,"
                    "\"vocab\":[\"\"", max_slots, max_queue);
    for (int c = 'a'; c <= 'z'; c++) p += sprintf(p, ",\"%02x\"", c);
    sprintf(p, "]}");
    lms_runtime rt;
    int rc = lms_runtime_create(cfg, &rt, err, sizeof err);
    if (rc != LMS_OK) die("lms_runtime_create", rc, err);
    return rt;
}

static char *script(int tokens, double delay_ms) {
    char *req = malloc((size_t)tokens * 6 + 128), *p = req;
    p += sprintf(p, "{\"prompt\":\"p\",\"delay_ms\":%g,\"script\":[", delay_ms);
    for (int i = 0; i < tokens; i++) p += sprintf(p, "%s[%d]", i ? "," : "", 1 + i % 26);
    sprintf(p, "]}");
    return req;
}

/* ---- (a) and (c): throughput ---------------------------------------------- */

typedef struct {
    lms_channel *chans;
    int first, count, stride;
    int use_batch;
    _Atomic long chunks;
    long tokens, regrows;
} drainer;

static void *drain_thread(void *arg) {
    drainer *d = arg;
    int n = 0;
    for (int i = d->first; i < d->count; i += d->stride) n++;
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    lms_channel *mine = calloc((size_t)n, sizeof *mine);
    int k = 0;
    for (int i = d->first; i < d->count; i += d->stride, k++) {
        mine[k] = d->chans[i];
        int rc = lms_channel_fd(mine[k], &pfd[k].fd);
        if (rc != LMS_OK) die("lms_channel_fd", rc, NULL);
        pfd[k].events = POLLIN;
    }
    enum { MAX = 64 };
    size_t buf_size = 64 * 1024;
    lms_chunk *chunks = malloc(MAX * sizeof *chunks);
    char *buf = malloc(buf_size);
    int open = n;
    while (open > 0) {
        if (poll(pfd, (nfds_t)n, 10) < 0 && errno != EINTR) die("poll", 0, strerror(errno));
        for (k = 0; k < n; k++) {
            if (pfd[k].fd < 0 || !(pfd[k].revents & POLLIN)) continue;
            int finished = 0;
            if (d->use_batch) {
                for (;;) { /* drain this channel */
                    size_t got = 0;
                    int rc = lms_channel_pop_batch(mine[k], chunks, MAX, buf, buf_size, 0, &got);
                    if (rc == LMS_EMPTY) break;
                    if (rc == LMS_ERR_BUFFER_TOO_SMALL) {
                        /* A full queue coalesced into one big chunk: grow as told. */
                        buf_size = got;
                        buf = realloc(buf, buf_size);
                        d->regrows++;
                        continue;
                    }
                    if (rc != LMS_OK) die("pop_batch", rc, NULL);
                    for (size_t j = 0; j < got; j++) {
                        d->tokens += (long)chunks[j].n_token_ids;
                        finished |= chunks[j].finished;
                    }
                    d->chunks += (long)got;
                    if (finished || got < MAX) break;
                }
            } else {
                for (;;) {
                    lms_chunk *c = NULL;
                    int rc = lms_channel_wait_pop(mine[k], 0, &c);
                    if (rc == LMS_EMPTY) break;
                    if (rc != LMS_OK) die("wait_pop", rc, NULL);
                    d->tokens += (long)c->n_token_ids;
                    d->chunks++;
                    finished = c->finished;
                    lms_chunk_free(c);
                    if (finished) break;
                }
            }
            if (finished) { pfd[k].fd = -1; open--; }
        }
    }
    free(chunks);
    free(buf);
    free(pfd);
    free(mine);
    return NULL;
}

/* *chunks_per_s is the steady-state rate: chunks delivered after the last
** submit returned, over the time from then to the last terminal chunk (the
** JSON parsing of long scripts in lms_submit is not the streaming path).
** *e2e_per_s counts everything from the first submit. */
static void throughput(int streams, int tokens, int threads, int use_batch, double *chunks_per_s,
                       double *tokens_per_chunk, double *e2e_per_s) {
    lms_runtime rt = make_runtime(64, streams + 16);
    lms_channel *chans = calloc((size_t)streams, sizeof *chans);
    char *req = script(tokens, 0);
    for (int i = 0; i < streams; i++) {
        int rc = lms_channel_create(&chans[i]);
        if (rc == LMS_OK) rc = lms_channel_set_queue(chans[i], 4096, LMS_QUEUE_COALESCE);
        if (rc != LMS_OK) die("channel", rc, NULL);
    }
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    drainer *d = calloc((size_t)threads, sizeof *d);
    for (int i = 0; i < threads; i++) {
        d[i] = (drainer){chans, i, streams, threads, use_batch, 0, 0, 0};
        /* Descriptors exist before submission: wake-ups are never missed. */
    }
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, drain_thread, &d[i]);
    double t0 = now_us();
    char err[256];
    for (int i = 0; i < streams; i++) {
        int rc = lms_submit(rt, req, &chans[i], 1, err, sizeof err);
        if (rc != LMS_OK) die("lms_submit", rc, err);
    }
    double t1 = now_us();
    size_t backlog = 0; /* chunks queued at t1: popped in the window, produced before it */
    for (int i = 0; i < streams; i++) {
        size_t pending = 0;
        lms_channel_state(chans[i], NULL, NULL, &pending);
        backlog += pending;
    }
    long before = 0;
    for (int i = 0; i < threads; i++) before += atomic_load(&d[i].chunks);
    long chunks = 0, toks = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        chunks += d[i].chunks;
        toks += d[i].tokens;
    }
    double t2 = now_us();
    if (toks != (long)streams * (tokens + 1)) {
        fprintf(stderr, "bench: %ld tokens delivered, want %ld\n", toks, (long)streams * (tokens + 1));
        exit(1);
    }
    /* The backlog is not counted: only chunks produced and delivered in the window. */
    *chunks_per_s = ((double)(chunks - before) - (double)backlog) / ((t2 - t1) / 1e6);
    *e2e_per_s = chunks / ((t2 - t0) / 1e6);
    *tokens_per_chunk = (double)toks / chunks;
    for (int i = 0; i < streams; i++) lms_channel_release(chans[i]);
    lms_runtime_destroy(rt);
    free(req);
    free(chans);
    free(t);
    free(d);
}

/* ---- (b) latency ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p) {
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

typedef struct {
    int fd;
    atomic_int armed;
    double woke;
} poller;

static void *poll_thread(void *arg) {
    poller *p = arg;
    struct pollfd pfd = {p->fd, POLLIN, 0};
    atomic_store(&p->armed, 1);
    while (poll(&pfd, 1, 5000) < 0 && errno == EINTR) {}
    p->woke = now_us();
    return NULL;
}

static void submit_latency(int samples, double *p50, double *p99) {
    lms_runtime rt = make_runtime(8, 64);
    double *lat = calloc((size_t)samples, sizeof *lat);
    char err[256];
    const char *req = "{\"prompt\":\"p\",\"script\":[[1]]}";
    for (int i = 0; i < samples; i++) {
        lms_channel ch;
        lms_channel_create(&ch);
        poller p = {-1, 0, 0};
        if (lms_channel_fd(ch, &p.fd) != LMS_OK) die("fd", 0, NULL);
        pthread_t t;
        pthread_create(&t, NULL, poll_thread, &p);
        while (!atomic_load(&p.armed)) sched_yield();
        struct timespec pause = {0, 200000}; /* let it enter poll() */
        nanosleep(&pause, NULL);
        double t0 = now_us();
        int rc = lms_submit(rt, req, &ch, 1, err, sizeof err);
        if (rc != LMS_OK) die("lms_submit", rc, err);
        pthread_join(t, NULL);
        lat[i] = p.woke - t0;
        lms_channel_release(ch);
    }
    qsort(lat, (size_t)samples, sizeof *lat, cmp_double);
    *p50 = pct(lat, samples, 0.50);
    *p99 = pct(lat, samples, 0.99);
    free(lat);
    lms_runtime_destroy(rt);
}

static void paced_jitter(int samples, double *p50, double *p99) {
    lms_runtime rt = make_runtime(8, 64);
    lms_channel ch;
    lms_channel_create(&ch);
    int fd;
    lms_channel_fd(ch, &fd);
    char *req = script(samples + 1, 1.0);
    char err[256];
    int rc = lms_submit(rt, req, &ch, 1, err, sizeof err);
    if (rc != LMS_OK) die("lms_submit", rc, err);
    double *iv = calloc((size_t)samples + 2, sizeof *iv);
    int n = 0, finished = 0;
    double last = 0;
    lms_chunk chunks[64];
    static char buf[64 * 1024];
    while (!finished) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 5000) <= 0) die("paced poll timed out", 0, NULL);
        double t = now_us();
        size_t got = 0;
        rc = lms_channel_pop_batch(ch, chunks, 64, buf, sizeof buf, 0, &got);
        if (rc != LMS_OK) die("pop_batch", rc, NULL);
        for (size_t j = 0; j < got; j++) finished |= chunks[j].finished;
        if (last > 0 && n < samples) iv[n++] = t - last - 1000.0;
        last = t;
    }
    qsort(iv, (size_t)n, sizeof *iv, cmp_double);
    *p50 = pct(iv, n, 0.50);
    *p99 = pct(iv, n, 0.99);
    free(iv);
    free(req);
    lms_channel_release(ch);
    lms_runtime_destroy(rt);
}

int main(int argc, char **argv) {
    int streams = 64, tokens = 20000, threads = 2, samples = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--streams")) streams = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--samples")) samples = atoi(argv[i + 1]);
    }
    double batch_cps, batch_tpc, batch_e2e, pop_cps, pop_tpc, pop_e2e, s50, s99, j50, j99;
    throughput(streams, tokens, threads, 1, &batch_cps, &batch_tpc, &batch_e2e);
    throughput(streams, tokens, threads, 0, &pop_cps, &pop_tpc, &pop_e2e);
    submit_latency(samples, &s50, &s99);
    paced_jitter(samples, &j50, &j99);

    printf("%-52s %14s  %s\n", "figure", "value", "unit");
    printf("%-52s %14.0f  %s\n", "(a) chunks/s, pop_batch (64 chunks, 64 KiB)", batch_cps, "chunks/s");
    printf("%-52s %14.2f  %s\n", "    tokens per chunk (1.00 = nothing coalesced)", batch_tpc, "tokens");
    printf("%-52s %14.0f  %s\n", "    tokens/s", batch_cps * batch_tpc, "tokens/s");
    printf("%-52s %14.0f  %s\n", "    chunks/s including lms_submit (JSON parsing)", batch_e2e, "chunks/s");
    printf("%-52s %14.1f  %s\n", "(b) submit -> fd readable, p50", s50, "us");
    printf("%-52s %14.1f  %s\n", "(b) submit -> fd readable, p99", s99, "us");
    printf("%-52s %14.1f  %s\n", "(b) paced 1 ms: wake-up interval - 1 ms, p50", j50, "us");
    printf("%-52s %14.1f  %s\n", "(b) paced 1 ms: wake-up interval - 1 ms, p99", j99, "us");
    printf("%-52s %14.0f  %s\n", "(c) chunks/s, wait_pop (one malloc per chunk)", pop_cps, "chunks/s");
    printf("%-52s %14.2f  %s\n", "    tokens per chunk", pop_tpc, "tokens");
    printf("%-52s %14.0f  %s\n", "    tokens/s", pop_cps * pop_tpc, "tokens/s");
    printf("%-52s %14d  %s\n", "    streams x tokens, consumer threads", streams, "streams");
    printf("%-52s %14d  %s\n", "", tokens, "tokens each");
    printf("%-52s %14d  %s\n", "", threads, "threads");
    return 0;
}
