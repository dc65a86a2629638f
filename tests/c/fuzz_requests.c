/*
** fuzz_requests — a seeded, bounded request fuzzer through the C ABI
** (issue 10, item 6).
**
** It builds requests from every field the runtime and its backends read,
** with values of the right type, the wrong type, out of range, huge, tiny,
** subnormal, non-finite (1e999, as JSON can say it) and null; random JSON;
** byte-level mutations of valid requests (flips, truncations, duplicated
** keys, trailing data, invalid UTF-8, lone surrogates) and deep nesting.
** Each goes to lms_submit on the replay backend and, when the default
** model is present, on the cpu backend. For each it asserts:
**
**   - either lms_submit returns a clean error: a documented request error
**     code (never LMS_ERR_INTERNAL) with a non-empty message that names no
**     Go type,
**   - or every attached channel receives exactly one terminal chunk (and
**     nothing after it), with well-formed UTF-8 text, within a deadline.
**     Streams are cancelled after a few chunks (or a quiet spell) to bound
**     the time; a wedged engine never delivers the cancel's terminal
**     chunk, and that is reported as a hang;
**
** and every few tries that the runtime still serves a normal request. A
** crash ends the process (the caller sees the signal). It prints its
** counts and exits non-zero on any hang or bad outcome.
**
**   fuzz_requests [--seed S] [--tries N] [--model-tries M] [--model PATH]
*/
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "lmstream.h"

/* ---- randomness ------------------------------------------------------ */

static uint64_t rng_state;
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rnd(int n) { return n <= 0 ? 0 : (int)(next_u64() % (uint64_t)n); }
static int chance(int percent) { return rnd(100) < percent; }

/* ---- a growable string ----------------------------------------------- */

typedef struct { char *p; size_t n, cap; } buf;
static void put_n(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) { perror("realloc"); exit(2); }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void put(buf *b, const char *s) { put_n(b, s, strlen(s)); }
static void putf(buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put_n(b, tmp, (size_t)n);
}

/* ---- values ---------------------------------------------------------- */

static const char *numbers[] = {
    "0", "-0", "1", "-1", "2", "3", "4", "8", "64", "0.5", "1.5", "-0.5", "0.999",
    "1e-320", "1e-310", "2e-308", "4.9e-324", "-1e-320", "1e-300", "1e-5", "9e-6", "5e-5",
    "1e308", "1.7976931348623157e308", "1e999", "-1e999", "1e-999", "100", "100.0001", "101",
    "1e300", "1e39", "-1e39", "0.01", "0.001", "2147483647", "2147483648", "-2147483649",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "1099511627776", "68719476736",
    "1048576", "1048577", "3600000", "3600001", "60000", "1e3", "1E+2", "4096", "4097",
    "12345678901234567890123", "0.0001", "65", "1024", "1025", "49152", "49151",
};
#define NNUM (int)(sizeof numbers / sizeof *numbers)

static const char *strings[] = {
    "", "Hello", "x", "Once upon a time", "\\u00e9\\u6f22\\ud83d\\ude00", "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80",
    "\xff", "a\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\\ud800", "\\udc00x", "\\ud800\\u0041",
    "\\u0000", "\x01", "<|im_start|>user\\nhi<|im_end|>", "\\\"quoted\\\"", "\\\\", "ngram",
    "early_exit", "draft_model", "none", "user", "system", "assistant", "\\u12", "\\x",
};
#define NSTR (int)(sizeof strings / sizeof *strings)

static int huge_string_bytes = 1 << 20; /* smaller on the real model */

/* Half the structured requests are "sane": every value of the right type
** and mostly in range, but still the extremes a range allows (subnormal
** temperatures, the largest windows and top_k), so that many requests
** reach the engine instead of stopping at the parser. */
static int sane, sane_percent = 50;
static int garbage_percent = 40; /* random JSON and mutations, of all tries */
static const char *sane_numbers[] = {"0.5", "1", "0.9", "1e-320", "1e-310", "2e-308", "4.9e-324", "1e-5",
                                     "5e-5", "0.01", "100", "3", "0.999", "1e-300", "0"};
static const char *sane_ints[] = {"1", "2", "3", "4", "64", "1048576", "2147483647"};
static const char *drafters[] = {"ngram", "early_exit", "none", "draft_model"};
static const char *sane_strings[] = {"Hello", "x", "Once upon a time", "\\u00e9\\u6f22\\ud83d\\ude00",
                                     "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80", "ngram", "none", "early_exit",
                                     "<|im_start|>user\\nhi<|im_end|>", "never matches \\u0001"};
#define NSANE(a) (int)(sizeof a / sizeof *a)

static void gen_any(buf *b, int depth);

static void gen_string(buf *b) {
    put(b, "\"");
    if (sane) {
        put(b, sane_strings[rnd(NSANE(sane_strings))]);
    } else if (chance(4)) {
        int n = chance(50) ? 4097 : rnd(huge_string_bytes);
        for (int i = 0; i < n; i++) put_n(b, &"abcdefgh "[rnd(9)], 1);
    } else if (chance(10)) {
        for (int i = rnd(20); i > 0; i--) put_n(b, &"xyz \\/"[rnd(4)], 1);
    } else {
        put(b, strings[rnd(NSTR)]);
    }
    put(b, "\"");
}

static void gen_number(buf *b) { put(b, sane ? sane_numbers[rnd(NSANE(sane_numbers))] : numbers[rnd(NNUM)]); }

static void gen_deep(buf *b) {
    static const int depths[] = {3, 63, 64, 65, 200, 100000};
    int d = depths[rnd(6)];
    int obj = chance(50);
    for (int i = 0; i < d; i++) put(b, obj ? "{\"a\":" : "[");
    put(b, "1");
    for (int i = 0; i < d; i++) put(b, obj ? "}" : "]");
}

static void gen_array_of(buf *b, void (*elem)(buf *), int maxn) {
    int n = !sane && chance(5) ? maxn + rnd(3) : sane + rnd(4);
    put(b, "[");
    for (int i = 0; i < n; i++) {
        if (i) put(b, ",");
        if (!sane && chance(8)) gen_any(b, 2); else elem(b);
    }
    put(b, "]");
}

static void gen_any(buf *b, int depth) {
    switch (rnd(depth > 3 ? 5 : 8)) {
    case 0: put(b, "null"); break;
    case 1: put(b, chance(50) ? "true" : "false"); break;
    case 2: gen_number(b); break;
    case 3: case 4: gen_string(b); break;
    case 5: {
        put(b, "[");
        for (int i = rnd(4); i > 0; i--) { gen_any(b, depth + 1); if (i > 1) put(b, ","); }
        put(b, "]");
        break;
    }
    case 6: {
        put(b, "{");
        for (int i = rnd(3); i > 0; i--) {
            putf(b, "\"k%d\":", rnd(5));
            gen_any(b, depth + 1);
            if (i > 1) put(b, ",");
        }
        put(b, "}");
        break;
    }
    default: gen_deep(b);
    }
}

static void gen_small_int(buf *b) { putf(b, "%d", !sane && rnd(3) == 0 ? rnd(300) : 1 + rnd(96)); }
static void gen_burst(buf *b) { gen_array_of(b, gen_small_int, 3); }
static void gen_script(buf *b) { gen_array_of(b, gen_burst, 6); }
static void gen_message(buf *b) {
    static const char *roles[] = {"user", "system", "assistant", "", "tool"};
    putf(b, "{\"role\":\"%s\",\"content\":", roles[sane ? rnd(3) : rnd(5)]);
    if (!sane && chance(10)) gen_any(b, 2); else gen_string(b);
    if (!sane && chance(5)) put(b, ",\"name\":\"x\"");
    put(b, "}");
}

/* The fields, by the type they expect. */
typedef enum { K_STR, K_NUM, K_INT, K_SEED, K_DRAFTER, K_BOOL, K_STRS, K_INTS, K_STOP, K_MSGS, K_SCRIPT, K_SCRIPTS } kind;
/* backend: 0 every backend, 1 replay only, 2 cpu only (a sane request
** asks its own backend's fields only). */
typedef struct { const char *name; kind k; int backend; } field;
static const field fields[] = {
    {"max_tokens", K_INT, 0},       {"stop", K_STOP, 0},          {"stop_token_ids", K_INTS, 0},
    {"include_stop", K_BOOL, 0},    {"temperature", K_NUM, 0},    {"top_p", K_NUM, 0},
    {"top_k", K_INT, 0},            {"min_p", K_NUM, 0},          {"seed", K_SEED, 0},
    {"tpot_slo_ms", K_NUM, 0},      {"ttft_slo_ms", K_NUM, 0},    {"repetition_penalty", K_NUM, 0},
    {"presence_penalty", K_NUM, 0}, {"frequency_penalty", K_NUM, 0}, {"repeat_last_n", K_INT, 0},
    {"drafter", K_DRAFTER, 2},          {"speculate", K_BOOL, 2},     {"delay_ms", K_NUM, 1},
    {"error_at", K_INT, 1},         {"panic_at", K_INT, 1},       {"temprature", K_NUM, 0},
};
#define NFIELDS (int)(sizeof fields / sizeof *fields)

static void gen_typed(buf *b, kind k) {
    if (!sane && chance(12)) { gen_any(b, 1); return; } /* the wrong type, null, nesting */
    switch (k) {
    case K_STR: gen_string(b); break;
    case K_DRAFTER:
        if (sane || chance(50)) putf(b, "\"%s\"", drafters[rnd(NSANE(drafters))]);
        else gen_string(b);
        break;
    case K_NUM: gen_number(b); break;
    case K_SEED:
        if (sane && chance(30)) put(b, "18446744073709551615");
        else if (sane) gen_small_int(b);
        else gen_number(b);
        break;
    case K_INT:
        if (sane) put(b, sane_ints[rnd(NSANE(sane_ints))]);
        else if (chance(70)) gen_number(b);
        else gen_small_int(b);
        break;
    case K_BOOL: put(b, chance(50) ? "true" : "false"); break;
    case K_STRS: gen_array_of(b, gen_string, 65); break;
    case K_INTS: gen_array_of(b, gen_small_int, 1025); break;
    case K_STOP: if (chance(50)) gen_string(b); else gen_array_of(b, gen_string, 65); break;
    case K_MSGS: gen_array_of(b, gen_message, 3); break;
    case K_SCRIPT: gen_script(b); break;
    case K_SCRIPTS: gen_array_of(b, gen_script, 4); break;
    }
}

/* A structured request; *items is the number of batch items it asks for
** when that is known (else 1, and the submit error tells). */
static void gen_request(buf *b, int replay, int *items) {
    *items = 1;
    sane = chance(sane_percent);
    put(b, "{");
    int r = rnd(10);
    if (r < 6) {
        put(b, "\"prompt\":");
        if (chance(90)) gen_string(b); else gen_any(b, 1);
    } else if (r < 8) {
        int n = !sane && chance(5) ? 4097 : 1 + rnd(4);
        put(b, "\"prompts\":[");
        for (int i = 0; i < n; i++) {
            if (i) put(b, ",");
            if (chance(5)) gen_any(b, 2); else gen_string(b);
        }
        put(b, "]");
        *items = n;
    } else {
        put(b, "\"messages\":");
        gen_typed(b, K_MSGS);
    }
    if (replay) {
        if (sane || chance(90)) {
            put(b, ",\"script\":");
            gen_typed(b, K_SCRIPT);
        }
        if (!sane && chance(5)) {
            put(b, ",\"scripts\":");
            gen_typed(b, K_SCRIPTS);
        }
    }
    if (sane && chance(40)) {
        /* The sampler's edge: tiny, subnormal and extreme temperatures. */
        put(b, ",\"temperature\":");
        gen_number(b);
    }
    for (int i = rnd(6); i > 0; i--) {
        const field *f = &fields[rnd(NFIELDS)];
        if (f->backend == 1 && !replay) continue;
        if (sane && (f->backend == 2 && replay)) continue;
        if (sane && (!strcmp(f->name, "temprature") || !strcmp(f->name, "stop_token_ids"))) continue;
        if (strstr(b->p, f->name) && (sane || chance(80))) continue; /* mostly no duplicates */
        putf(b, ",\"%s\":", f->name);
        gen_typed(b, f->k);
    }
    put(b, "}");
    sane = 0;
}

/* A byte-level mutation of a valid request. */
static void mutate(buf *b) {
    static const char *inserts[] = {"}", "]", ",", "\"", ":", "null", "{", "\\", "\xff", "\xed\xa0\x80",
                                    "\\ud800", " ", "1e999", "[", "\x01"};
    buf out = {0};
    size_t at = b->n ? (size_t)rnd((int)b->n) : 0;
    switch (rnd(7)) {
    case 0: /* flip a byte (never to NUL, which would just truncate) */
        b->p[at] = (char)(1 + rnd(255));
        return;
    case 1: /* insert a fragment */
        put_n(&out, b->p, at);
        put(&out, inserts[rnd((int)(sizeof inserts / sizeof *inserts))]);
        put(&out, b->p + at);
        break;
    case 2: /* delete a span */
        put_n(&out, b->p, at);
        put(&out, b->p + at + (size_t)rnd((int)(b->n - at) + 1));
        break;
    case 3: /* truncate */
        b->p[at] = 0;
        b->n = at;
        return;
    case 4: { /* duplicate the first key at the end */
        char *q = strchr(b->p, '"'), *e = q ? strchr(q + 1, '"') : NULL;
        if (!e || b->n < 2) return;
        put_n(&out, b->p, b->n - 1);
        put(&out, ",");
        put_n(&out, q, (size_t)(e - q + 1));
        put(&out, ":1}");
        break;
    }
    case 5: /* trailing data */
        put(&out, b->p);
        put(&out, (const char *[]){"}", " x", "{}", "\n\n", "]", ",", " null"}[rnd(7)]);
        break;
    default: /* a deep value for an unknown key */
        if (b->n < 2) return;
        put_n(&out, b->p, b->n - 1);
        put(&out, ",\"deep\":");
        gen_deep(&out);
        put(&out, "}");
        break;
    }
    free(b->p);
    *b = out;
}

/* ---- checking -------------------------------------------------------- */

static long tries, clean_errors, accepted, hangs, bad;
static int verbose; /* FUZZ_VERBOSE=1: print every clean error */
static double hang_timeout_s = 30;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report_bad(const char *what, const char *req, const char *detail) {
    bad++;
    if (bad <= 20) {
        fprintf(stderr, "BAD %s: %s\n  request: %.300s%s\n", what, detail ? detail : "",
                req, strlen(req) > 300 ? "..." : "");
    }
}

/* Fragments of Go type names that must never reach a caller. */
static const char *go_words[] = {"*string", "[]string", "runtime.", "int32", "int64", "uint64",
                                 "float64", "[]int", "struct {", "json: ", "Go value"};

static int clean_code(int rc) {
    switch (rc) {
    case LMS_ERR_BAD_JSON: case LMS_ERR_INVALID_REQUEST: case LMS_ERR_INVALID_ARGUMENT:
    case LMS_ERR_PROMPT_TOO_LONG: case LMS_ERR_CAPACITY:
        return 1;
    }
    return 0;
}

typedef struct {
    lms_channel ch;
    const char *req; /* owned by the batch entry */
    int chunks, terminals, cancelled, done;
    double start, cancelled_at;
} stream;

typedef struct { char *req; stream *s; int n; } entry;

#define MAX_PENDING 8
static entry pending[MAX_PENDING];
static int npending;

/* drain follows every pending stream to its terminal chunk. */
static void drain(void) {
    int left = 0;
    for (int i = 0; i < npending; i++) left += pending[i].n;
    while (left > 0) {
        for (int i = 0; i < npending; i++) {
            for (int j = 0; j < pending[i].n; j++) {
                stream *s = &pending[i].s[j];
                if (s->done) continue;
                lms_chunk *c = NULL;
                int rc = lms_channel_wait_pop(s->ch, 20, &c);
                double t = now_s();
                if (rc == LMS_OK) {
                    s->chunks++;
                    if (!utf8_valid(c->text, c->text_len)) report_bad("invalid UTF-8 in a chunk", s->req, NULL);
                    if (c->finished) {
                        s->terminals++;
                        s->done = 1;
                        left--;
                        lms_chunk_free(c);
                        lms_chunk *after = NULL;
                        int rc2 = lms_channel_wait_pop(s->ch, 5, &after);
                        if (rc2 != LMS_DONE) {
                            report_bad("something followed the terminal chunk", s->req, lms_strerror(rc2));
                            if (after) lms_chunk_free(after);
                        }
                        continue;
                    }
                    lms_chunk_free(c);
                } else if (rc != LMS_EMPTY) {
                    report_bad("wait_pop failed", s->req, lms_strerror(rc));
                    s->done = 1;
                    left--;
                    continue;
                }
                /* Bound the time: a few chunks, or a quiet spell, then cancel. */
                if (!s->cancelled && (s->chunks >= 3 || t - s->start > 3)) {
                    lms_channel_cancel(s->ch);
                    s->cancelled = 1;
                    s->cancelled_at = t;
                }
                if (s->cancelled && t - s->cancelled_at > hang_timeout_s) {
                    hangs++;
                    fprintf(stderr, "HANG: no terminal chunk %.0f s after cancel (%d chunks)\n  request: %.300s\n",
                            hang_timeout_s, s->chunks, s->req);
                    s->done = 1;
                    left--;
                }
            }
        }
    }
    if (hangs) {
        /* A wedged engine never lets a normal request or destroy return:
        ** report and stop here. */
        printf("fuzz_requests: %ld tries, %ld clean errors, %ld accepted, crashes 0, hangs %ld, bad %ld: FAILED\n",
               tries, clean_errors, accepted, hangs, bad);
        fflush(stdout);
        _exit(1);
    }
    for (int i = 0; i < npending; i++) {
        for (int j = 0; j < pending[i].n; j++) {
            if (pending[i].s[j].terminals > 1) report_bad("more than one terminal chunk", pending[i].req, NULL);
            lms_channel_release(pending[i].s[j].ch);
        }
        free(pending[i].s);
        free(pending[i].req);
    }
    npending = 0;
}

/* try_request submits req with n channels and checks the outcome; it takes
** ownership of req. */
static void try_request(lms_runtime rt, char *req, int n) {
    char err[1024];
    for (int attempt = 0; attempt < 2; attempt++) {
        if (n < 1) n = 1;
        lms_channel *chs = calloc((size_t)n, sizeof *chs);
        for (int i = 0; i < n; i++) lms_channel_create(&chs[i]);
        err[0] = 0;
        int rc = lms_submit(rt, req, chs, (size_t)n, err, sizeof err);
        if (rc == LMS_OK) {
            accepted++;
            entry *e = &pending[npending++];
            e->req = req;
            e->n = n;
            e->s = calloc((size_t)n, sizeof *e->s);
            for (int i = 0; i < n; i++) {
                e->s[i].ch = chs[i];
                e->s[i].req = req;
                e->s[i].start = now_s();
            }
            free(chs);
            if (npending == MAX_PENDING) drain();
            return;
        }
        for (int i = 0; i < n; i++) lms_channel_release(chs[i]);
        free(chs);
        int k;
        const char *m = strstr(err, "request has ");
        if (attempt == 0 && rc == LMS_ERR_INVALID_ARGUMENT && m && sscanf(m, "request has %d batch item", &k) == 1 &&
            k >= 1 && k <= 4096 && k != n) {
            n = k; /* a mutated "prompts": submit again with as many channels */
            continue;
        }
        if (!clean_code(rc)) {
            report_bad("unexpected status", req, lms_strerror(rc));
            fprintf(stderr, "  message: %s\n", err);
        } else if (err[0] == 0) {
            report_bad("an error without a message", req, lms_strerror(rc));
        } else {
            for (size_t w = 0; w < sizeof go_words / sizeof *go_words; w++) {
                if (strstr(err, go_words[w])) report_bad("a Go type in a message", req, err);
            }
            clean_errors++;
            if (verbose) printf("clean %s: %s\n  request: %.200s\n", lms_strerror(rc), err, req);
        }
        free(req);
        return;
    }
}

/* serves_normally checks the runtime still answers a plain request. */
static void serves_normally(lms_runtime rt, const char *normal) {
    drain();
    char err[512] = "";
    lms_chunk *c = NULL;
    int rc = lms_complete(rt, normal, &c, err, sizeof err);
    if (rc != LMS_OK) {
        report_bad("a normal request failed", normal, err);
        return;
    }
    if (c->reason != LMS_FINISH_LENGTH && c->reason != LMS_FINISH_END_ID) report_bad("a normal request did not finish normally", normal, c->error_message);
    if (c->n_token_ids == 0) report_bad("a normal request generated nothing", normal, NULL);
    lms_chunk_free(c);
}

static void run(lms_runtime rt, int replay, long n, const char *normal) {
    for (long t = 0; t < n; t++) {
        buf b = {0};
        int items;
        int r = rnd(100);
        if (r < garbage_percent / 4) { /* random JSON, mostly not an object */
            gen_any(&b, 0);
            items = 1;
        } else if (r < garbage_percent) { /* a mutated request */
            gen_request(&b, replay, &items);
            for (int m = 1 + rnd(3); m > 0; m--) mutate(&b);
        } else {
            gen_request(&b, replay, &items);
        }
        tries++;
        try_request(rt, b.p, items);
        if (t % 64 == 63) serves_normally(rt, normal);
    }
    serves_normally(rt, normal);
}

static lms_runtime create(const char *cfg) {
    char err[1024] = "";
    lms_runtime rt = 0;
    int rc = lms_runtime_create(cfg, &rt, err, sizeof err);
    if (rc != LMS_OK) {
        fprintf(stderr, "lms_runtime_create: %s: %s\n", lms_strerror(rc), err);
        exit(2);
    }
    return rt;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "HANG: fuzz_requests exceeded its --budget-s; crashes 0, hangs 1: FAILED\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

int main(int argc, char **argv) {
    uint64_t seed = 1;
    double hang_override = 0;
    int budget = 0;
    long n = 1500, model_n = 48;
    const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tries") && i + 1 < argc) n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--model-tries") && i + 1 < argc) model_n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--hang-s") && i + 1 < argc) hang_override = atof(argv[++i]);
        else if (!strcmp(argv[i], "--budget-s") && i + 1 < argc) budget = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--seed S] [--tries N] [--model-tries M] [--model PATH] [--hang-s S] [--budget-s S]\n", argv[0]);
            return 2;
        }
    }
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (budget > 0) {
        /* A backstop for a hang the per-stream deadline cannot see (a
        ** call that never returns). */
        signal(SIGALRM, on_alarm);
        alarm((unsigned)budget);
    }
    double t0 = now_s();

    /* Replay: the vocabulary is byte-like (id 0 the end token, ids 1..96
    ** printable ASCII), so scripts of small integers spell text. */
    buf cfg = {0};
    put(&cfg, "{\"backend\":\"replay\",\"eos_id\":0,\"special_ids\":[0],\"max_slots\":8,\"vocab\":[\"\"");
    for (int c = 0x20; c < 0x7f; c++) putf(&cfg, ",\"%02x\"", c);
    for (int c = 0x80; c < 0x100; c++) putf(&cfg, ",\"%02x\"", c); /* invalid UTF-8 pieces too */
    put(&cfg, "]}");
    rng_state = seed;
    lms_runtime rt = create(cfg.p);
    free(cfg.p);
    hang_timeout_s = hang_override > 0 ? hang_override : 30;
    run(rt, 1, n, "{\"prompt\":\"x\",\"script\":[[41],[74],[1]]}");
    drain();
    if (lms_runtime_destroy(rt) != LMS_OK) report_bad("destroy failed", "replay", NULL);
    printf("fuzz_requests replay: seed %llu, %ld tries, %ld clean errors, %ld accepted, crashes 0, hangs %ld, bad %ld (%.1f s)\n",
           (unsigned long long)seed, tries, clean_errors, accepted, hangs, bad, now_s() - t0);
    long rtries = tries, rclean = clean_errors, racc = accepted;

    if (model_n > 0 && access(model, R_OK) == 0) {
        double t1 = now_s();
        buf mc = {0};
        /* A fixed spec_budget skips the start-up calibration. */
        putf(&mc, "{\"model_path\":\"%s\",\"max_slots\":8,\"context_length\":256,\"spec_budget\":8}", model);
        rt = create(mc.p);
        free(mc.p);
        huge_string_bytes = 1 << 14; /* tokenizing is the caller's time */
        sane_percent = 80;           /* the parser had its share on replay */
        garbage_percent = 12;
        /* A loaded machine is slow, a wedged engine never ends. */
        hang_timeout_s = hang_override > 0 ? hang_override : 120;
        rng_state = seed ^ 0x5eed;
        run(rt, 0, model_n, "{\"prompt\":\"Hello\",\"max_tokens\":2}");
        drain();
        if (lms_runtime_destroy(rt) != LMS_OK) report_bad("destroy failed", "model", NULL);
        printf("fuzz_requests model:  seed %llu, %ld tries, %ld clean errors, %ld accepted, crashes 0, hangs %ld, bad %ld (%.1f s)\n",
               (unsigned long long)seed, tries - rtries, clean_errors - rclean, accepted - racc, hangs, bad, now_s() - t1);
    } else if (model_n > 0) {
        printf("fuzz_requests model:  skipped, %s absent (run make model)\n", model);
    }
    printf("fuzz_requests total:  %ld tries, %ld clean errors, %ld accepted, crashes 0, hangs %ld, bad %ld\n",
           tries, clean_errors, accepted, hangs, bad);
    return hangs || bad ? 1 : 0;
}
