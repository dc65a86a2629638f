// The public entry points. Each checks the fork guard and then enters Go
// (lmsgo_* in exports.go). Functions that need no Go state (strerror, chunk
// free, version) are plain C, so they work even in a forked child.
#include <pthread.h>
#include <stdlib.h>
#include "lmstream.h"
#include "_cgo_export.h"

// Memcheck and Go. Memcheck follows the stack pointer to decide which
// stack memory holds defined values, and takes any move shorter than 2 MB
// for frames pushed or popped. Go switches between goroutine stacks (and
// copies a growing one to a new place) that often lie closer than that,
// so memcheck now and then marks live Go frames undefined. Go then stores
// correct bits whose shadow says "undefined" into the chunks it hands to
// C, and a client under valgrind reports reading uninitialised fields
// though every byte is right: CI's stress test under valgrind failed so,
// twice in some twenty runs, in threads entering Go for the first time,
// while the same test verified every chunk's text. Go writes every field
// of every chunk it returns (fillChunk), so the entry points that return
// chunks vouch for them to memcheck. Outside valgrind this is one branch
// on a constant 0; without memcheck.h at build time it is nothing.
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define LMS_MEMCHECK 1
#endif
#endif

#ifdef LMS_MEMCHECK
static void lms_vouch_string(const char *s) {
    for (; s; s++) {
        VALGRIND_MAKE_MEM_DEFINED(s, 1);
        if (*s == 0) break;
    }
}

static void lms_vouch(const lms_chunk *c) {
    if (!RUNNING_ON_VALGRIND || c == NULL) return;
    VALGRIND_MAKE_MEM_DEFINED(c, sizeof *c);
    if (c->token_ids) VALGRIND_MAKE_MEM_DEFINED(c->token_ids, c->n_token_ids * sizeof *c->token_ids);
    if (c->text) VALGRIND_MAKE_MEM_DEFINED(c->text, c->text_len + 1);
    lms_vouch_string(c->error_message);
    if (c->logprobs) {
        VALGRIND_MAKE_MEM_DEFINED(c->logprobs, c->n_logprobs * sizeof *c->logprobs);
        for (size_t i = 0; i < c->n_logprobs; i++) {
            const lms_token_logprob *lp = &c->logprobs[i];
            if (lp->bytes) VALGRIND_MAKE_MEM_DEFINED(lp->bytes, lp->n_bytes);
            if (lp->top) {
                VALGRIND_MAKE_MEM_DEFINED(lp->top, lp->n_top * sizeof *lp->top);
                for (size_t j = 0; j < lp->n_top; j++)
                    if (lp->top[j].bytes) VALGRIND_MAKE_MEM_DEFINED(lp->top[j].bytes, lp->top[j].n_bytes);
            }
        }
    }
}
#else
static void lms_vouch(const lms_chunk *c) { (void)c; }
#endif

// Set in a child after fork(): the Go runtime's threads did not survive the
// fork, so entering it would deadlock.
// Hidden, not static: the entry points of other files (pull.c) check it too.
__attribute__((visibility("hidden"))) volatile int lms_forked = 0;

static void lms_on_fork_child(void) { lms_forked = 1; }

__attribute__((constructor)) static void lms_register_fork_guard(void) {
    pthread_atfork(NULL, NULL, lms_on_fork_child);
}

#define LMS_GUARD() do { if (lms_forked) return LMS_ERR_FORKED; } while (0)

// The guard for entry points defined in the other shim files.
__attribute__((visibility("hidden"))) int lms_shim_forked(void) { return lms_forked; }

__attribute__((visibility("hidden"))) int lms_call_handler(lms_chunk_handler h, const lms_chunk *c, void *user) {
    lms_vouch(c);
    return h(c, user);
}

int32_t lms_abi_version(void) { return LMS_ABI_VERSION; }

const char *lms_strerror(int status) {
    switch (status) {
    case LMS_OK: return "ok";
    case LMS_EMPTY: return "no chunk pending";
    case LMS_DONE: return "stream finished";
    case LMS_INTERRUPTED: return "consumer interrupted the stream";
    case LMS_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LMS_ERR_INVALID_HANDLE: return "invalid handle";
    case LMS_ERR_BAD_JSON: return "malformed JSON";
    case LMS_ERR_INVALID_REQUEST: return "invalid request";
    case LMS_ERR_MODEL: return "model error";
    case LMS_ERR_PROMPT_TOO_LONG: return "prompt too long";
    case LMS_ERR_CAPACITY: return "capacity exceeded";
    case LMS_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case LMS_ERR_FORKED: return "called in a forked child process";
    case LMS_ERR_BACKEND: return "backend error";
    case LMS_ERR_INTERNAL: return "internal error";
    case LMS_ERR_SHUTDOWN: return "runtime shut down";
    case LMS_ERR_CLOSED: return "channel closed";
    case LMS_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}

const char *lms_finish_reason_name(int reason) {
    switch (reason) {
    case LMS_FINISH_NOT_FINISHED: return "not_finished";
    case LMS_FINISH_END_ID: return "end_id";
    case LMS_FINISH_LENGTH: return "length";
    case LMS_FINISH_CANCELLED: return "cancelled";
    case LMS_FINISH_ERROR: return "error";
    case LMS_FINISH_STOP_WORDS: return "stop_words";
    }
    return "unknown";
}

void lms_chunk_free(lms_chunk *chunk) { free(chunk); }

int lms_configure_process(const char *settings_json, char *err, size_t err_size) {
    LMS_GUARD();
    return lmsgo_configure_process((char *)settings_json, err, err_size);
}

int lms_runtime_create(const char *config_json, lms_runtime *out, char *err, size_t err_size) {
    LMS_GUARD();
    return lmsgo_runtime_create((char *)config_json, out, err, err_size);
}

__attribute__((visibility("hidden"))) int lms_call_progress(lms_progress_handler h, const char *stage, double fraction,
                                                            void *user) {
    return h(stage, fraction, user);
}

int lms_runtime_create_with_progress(const char *config_json, lms_progress_handler progress, void *user,
                                     lms_runtime *out, char *err, size_t err_size) {
    LMS_GUARD();
    return lmsgo_runtime_create_with_progress((char *)config_json, progress, user, out, err, err_size);
}

int lms_runtime_destroy(lms_runtime rt) {
    LMS_GUARD();
    return lmsgo_runtime_destroy(rt);
}

int lms_runtime_stats(lms_runtime rt, char *buf, size_t size, size_t *len) {
    LMS_GUARD();
    return lmsgo_runtime_stats(rt, buf, size, len);
}

int lms_channel_create(lms_channel *out) {
    LMS_GUARD();
    return lmsgo_channel_create(out);
}

int lms_channel_set_interval(lms_channel ch, int32_t n) {
    LMS_GUARD();
    return lmsgo_channel_set_interval(ch, n);
}

int lms_channel_set_skip_special(lms_channel ch, int skip) {
    LMS_GUARD();
    return lmsgo_channel_set_skip_special(ch, skip);
}

int lms_channel_set_queue(lms_channel ch, int32_t limit, int policy) {
    LMS_GUARD();
    return lmsgo_channel_set_queue(ch, limit, policy);
}

int lms_submit(lms_runtime rt, const char *request_json, const lms_channel *channels, size_t n,
               char *err, size_t err_size) {
    LMS_GUARD();
    return lmsgo_submit(rt, (char *)request_json, (lms_channel *)channels, n, err, err_size);
}

// lms_vouch_out vouches for the chunk an entry point stored in *out. Only
// on success: a failed call may leave *out as the caller had it, and
// whatever the caller left undefined there stays so.
static int lms_vouch_out(int rc, lms_chunk **out) {
#ifdef LMS_MEMCHECK
    if (RUNNING_ON_VALGRIND && out != NULL && rc == LMS_OK) {
        VALGRIND_MAKE_MEM_DEFINED(out, sizeof *out);
        lms_vouch(*out);
    }
#else
    (void)out;
#endif
    return rc;
}

int lms_complete(lms_runtime rt, const char *request_json, lms_chunk **out, char *err, size_t err_size) {
    LMS_GUARD();
    return lms_vouch_out(lmsgo_complete(rt, (char *)request_json, out, err, err_size), out);
}

int lms_channel_try_pop(lms_channel ch, lms_chunk **out) {
    LMS_GUARD();
    return lms_vouch_out(lmsgo_channel_wait_pop(ch, 0, out), out);
}

int lms_channel_wait_pop(lms_channel ch, int32_t timeout_ms, lms_chunk **out) {
    LMS_GUARD();
    return lms_vouch_out(lmsgo_channel_wait_pop(ch, timeout_ms, out), out);
}

int lms_channel_pop_batch(lms_channel ch, lms_chunk *chunks, size_t max_chunks, void *buf,
                          size_t buf_size, int32_t timeout_ms, size_t *n_out) {
    LMS_GUARD();
    int rc = lmsgo_channel_pop_batch(ch, chunks, max_chunks, buf, buf_size, timeout_ms, n_out);
#ifdef LMS_MEMCHECK
    // *n_out is written on every path past the argument checks (the
    // count, or the size a chunk needs).
    if (RUNNING_ON_VALGRIND && n_out != NULL && rc != LMS_ERR_INVALID_ARGUMENT) {
        VALGRIND_MAKE_MEM_DEFINED(n_out, sizeof *n_out);
        if (rc == LMS_OK)
            for (size_t i = 0; i < *n_out && i < max_chunks; i++) lms_vouch(&chunks[i]);
    }
#endif
    return rc;
}

int lms_channel_consume(lms_channel ch, lms_chunk_handler handler, void *user) {
    LMS_GUARD();
    return lmsgo_channel_consume(ch, handler, user);
}

int lms_channel_cancel(lms_channel ch) {
    LMS_GUARD();
    return lmsgo_channel_cancel(ch);
}

int lms_channel_fd(lms_channel ch, int *fd) {
    LMS_GUARD();
    return lmsgo_channel_fd(ch, fd);
}

int lms_channel_state(lms_channel ch, int *finished, int *reason, size_t *pending) {
    LMS_GUARD();
    return lmsgo_channel_state(ch, finished, reason, pending);
}

int lms_channel_release(lms_channel ch) {
    LMS_GUARD();
    return lmsgo_channel_release(ch);
}

int lms_mux_create(lms_mux *out) {
    LMS_GUARD();
    return lmsgo_mux_create(out);
}

int lms_mux_add(lms_mux mux, lms_channel ch) {
    LMS_GUARD();
    return lmsgo_mux_add(mux, ch);
}

int lms_mux_remove(lms_mux mux, lms_channel ch) {
    LMS_GUARD();
    return lmsgo_mux_remove(mux, ch);
}

int lms_mux_fd(lms_mux mux, int *fd) {
    LMS_GUARD();
    return lmsgo_mux_fd(mux, fd);
}

int lms_mux_ready(lms_mux mux, int32_t timeout_ms, lms_channel *out, size_t max, size_t *n) {
    LMS_GUARD();
    return lmsgo_mux_ready(mux, timeout_ms, out, max, n);
}

int lms_mux_destroy(lms_mux mux) {
    LMS_GUARD();
    return lmsgo_mux_destroy(mux);
}
