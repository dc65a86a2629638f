/*
 * lmstream_nif.c — the BEAM face of liblmstream.
 *
 * Design (DESIGN.md §3 "Readiness, not threads", §5 Elixir):
 *
 *   - liblmstream.so is dlopen()ed at NIF load time from a helper pthread
 *     whose CPU mask is every CPU: the Go runtime sizes GOMAXPROCS from, and
 *     its threads inherit, the mask of the loading thread, and the BEAM may
 *     have bound the calling scheduler to one CPU. The library is opened with
 *     RTLD_NODELETE and this NIF is linked with -z nodelete: neither is ever
 *     unmapped while resources (streams) may still call into them.
 *
 *   - A runtime and a channel each live in a NIF resource. Waiting is
 *     enif_select(READ) on the channel's descriptor: the process that armed
 *     the select gets {select, Chan, Ref, ready_input} and then drains with a
 *     short normal NIF call (lms_channel_pop_batch, timeout 0). There is no
 *     dirty scheduler and no thread per stream. Only runtime creation and
 *     explicit destruction (which may load a model or wait one engine
 *     iteration) run on dirty I/O schedulers.
 *
 *   - The process that arms a channel is monitored (enif_monitor_process);
 *     when it exits the channel is deselected and released, which cancels the
 *     request. The descriptor is closed by lms_channel_release only from the
 *     resource's stop callback (or directly when the descriptor was never
 *     handed to enif_select), so the poller never watches a closed or reused
 *     descriptor.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <erl_nif.h>

#include "lmstream.h"

/* ---- The library, resolved with dlsym ------------------------------- */

typedef struct {
    int32_t (*abi_version)(void);
    const char *(*strerror_)(int);
    int (*configure_process)(const char *, char *, size_t);
    int (*runtime_create)(const char *, lms_runtime *, char *, size_t);
    int (*runtime_create_with_progress)(const char *, lms_progress_handler, void *, lms_runtime *, char *, size_t);
    int (*runtime_destroy)(lms_runtime);
    int (*runtime_stats)(lms_runtime, char *, size_t, size_t *);
    int (*channel_create)(lms_channel *);
    int (*channel_set_interval)(lms_channel, int32_t);
    int (*channel_set_skip_special)(lms_channel, int);
    int (*channel_set_queue)(lms_channel, int32_t, int);
    int (*submit)(lms_runtime, const char *, const lms_channel *, size_t, char *, size_t);
    int (*channel_pop_batch)(lms_channel, lms_chunk *, size_t, void *, size_t, int32_t, size_t *);
    int (*channel_cancel)(lms_channel);
    int (*channel_fd)(lms_channel, int *);
    int (*channel_state)(lms_channel, int *, int *, size_t *);
    int (*channel_release)(lms_channel);
    int (*model_pull)(const char *, lms_pull_progress_fn, void *, char *, size_t);
    int (*model_path)(const char *, char *, size_t, size_t *);
    /* Introspection: optional, so that this NIF still loads a library
     * built before the section existed (the calls then say so). */
    int (*tokenize)(lms_runtime, const char *, size_t, int, int32_t *, size_t, size_t *, char *, size_t);
    int (*count_tokens)(lms_runtime, const char *, size_t, int, size_t *, char *, size_t);
    int (*detokenize)(lms_runtime, const int32_t *, size_t, int, char *, size_t, size_t *, char *, size_t);
    int (*model_info)(lms_runtime, char *, size_t, size_t *);
    int (*render_chat)(lms_runtime, const char *, char *, size_t, size_t *, char *, size_t);
} lms_api;

static lms_api api;
static int api_loaded;
static char api_error[1024];
static char api_path[4096];
static int api_cpus;
static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;

/* Live-object counters, for leak checks in the test suite. */
static long live_runtimes, live_channels, unreleased_channels;

#define ATOMIC_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)

typedef struct {
    char path[4096];
    void *handle;
    int cpus;
    char err[1024];
} load_job;

static void *load_thread(void *arg) {
    load_job *j = arg;
    /* Every online CPU; the kernel intersects it with the cpuset we are
     * allowed. Fall back to the process' (main thread's) mask. */
    cpu_set_t set;
    CPU_ZERO(&set);
    long n = sysconf(_SC_NPROCESSORS_CONF);
    if (n < 1) n = 1;
    if (n > CPU_SETSIZE) n = CPU_SETSIZE;
    for (long i = 0; i < n; i++) CPU_SET(i, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        CPU_ZERO(&set);
        if (sched_getaffinity(getpid(), sizeof set, &set) == 0)
            pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    CPU_ZERO(&set);
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0) j->cpus = CPU_COUNT(&set);
    dlerror();
    j->handle = dlopen(j->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!j->handle) {
        const char *e = dlerror();
        snprintf(j->err, sizeof j->err, "dlopen %s: %s", j->path, e ? e : "unknown error");
    }
    return NULL;
}

static int resolve(void *h, const char *name, void **dst) {
    dlerror();
    *dst = dlsym(h, name);
    if (!*dst) {
        snprintf(api_error, sizeof api_error, "%s: symbol %s not found", api_path, name);
        return 0;
    }
    return 1;
}

/* Loads the library once per OS process (a NIF upgrade finds it loaded). */
static void load_library(const char *path) {
    pthread_mutex_lock(&api_mu);
    if (api_loaded) {
        pthread_mutex_unlock(&api_mu);
        return;
    }
    load_job *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(api_error, sizeof api_error, "out of memory");
        pthread_mutex_unlock(&api_mu);
        return;
    }
    snprintf(j->path, sizeof j->path, "%s", path);
    snprintf(api_path, sizeof api_path, "%s", path);
    pthread_t t;
    int rc = pthread_create(&t, NULL, load_thread, j);
    if (rc != 0) {
        snprintf(api_error, sizeof api_error, "pthread_create: %s", strerror(rc));
        free(j);
        pthread_mutex_unlock(&api_mu);
        return;
    }
    pthread_join(t, NULL);
    api_cpus = j->cpus;
    if (!j->handle) {
        snprintf(api_error, sizeof api_error, "%s", j->err);
        free(j);
        pthread_mutex_unlock(&api_mu);
        return;
    }
    void *h = j->handle;
    free(j);
    lms_api a;
    memset(&a, 0, sizeof a);
#define R(field, name) if (!resolve(h, name, (void **)&a.field)) goto fail
    R(abi_version, "lms_abi_version");
    R(strerror_, "lms_strerror");
    R(configure_process, "lms_configure_process");
    R(runtime_create, "lms_runtime_create");
    R(runtime_create_with_progress, "lms_runtime_create_with_progress");
    R(runtime_destroy, "lms_runtime_destroy");
    R(runtime_stats, "lms_runtime_stats");
    R(channel_create, "lms_channel_create");
    R(channel_set_interval, "lms_channel_set_interval");
    R(channel_set_skip_special, "lms_channel_set_skip_special");
    R(channel_set_queue, "lms_channel_set_queue");
    R(submit, "lms_submit");
    R(channel_pop_batch, "lms_channel_pop_batch");
    R(channel_cancel, "lms_channel_cancel");
    R(channel_fd, "lms_channel_fd");
    R(channel_state, "lms_channel_state");
    R(channel_release, "lms_channel_release");
    R(model_pull, "lms_model_pull");
    R(model_path, "lms_model_path");
#undef R
    *(void **)&a.tokenize = dlsym(h, "lms_tokenize");
    *(void **)&a.count_tokens = dlsym(h, "lms_count_tokens");
    *(void **)&a.detokenize = dlsym(h, "lms_detokenize");
    *(void **)&a.model_info = dlsym(h, "lms_model_info");
    *(void **)&a.render_chat = dlsym(h, "lms_render_chat");
    int32_t abi = a.abi_version();
    if (abi != LMS_ABI_VERSION) {
        snprintf(api_error, sizeof api_error,
                 "%s has ABI version %d, this NIF was built for %d", api_path, (int)abi, LMS_ABI_VERSION);
        goto fail;
    }
    api = a;
    api_error[0] = 0;
    __atomic_store_n(&api_loaded, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&api_mu);
    return;
fail:
    /* RTLD_NODELETE: the Go runtime stays; we just do not use it. */
    pthread_mutex_unlock(&api_mu);
}

/* ---- Atoms ----------------------------------------------------------- */

static ERL_NIF_TERM a_ok, a_error, a_true, a_false, a_nil, a_undefined, a_empty, a_done,
    a_closed, a_not_loaded, a_struct, a_chunk_mod, a_token_ids, a_text, a_finished, a_reason,
    a_usage, a_err, a_batch_index, a_ref, a_prompt_tokens, a_generated_tokens, a_ttft_ms,
    a_tpot_ms, a_draft_proposed, a_draft_accepted, a_verify_passes, a_cached_tokens, a_path, a_abi, a_cpus,
    a_logprobs, a_token_id, a_logprob, a_bytes, a_top_logprobs, a_reply, a_content, a_reasoning,
    a_tool_calls, a_index, a_id, a_name, a_arguments;
static ERL_NIF_TERM a_reasons[6];
#define N_CODES 15
static ERL_NIF_TERM a_codes[N_CODES]; /* index -code, 0..14 */

static void make_atoms(ErlNifEnv *env) {
#define A(v, s) v = enif_make_atom(env, s)
    A(a_ok, "ok"); A(a_error, "error"); A(a_true, "true"); A(a_false, "false");
    A(a_nil, "nil"); A(a_undefined, "undefined"); A(a_empty, "empty"); A(a_done, "done");
    A(a_closed, "closed"); A(a_not_loaded, "library_not_loaded");
    A(a_struct, "__struct__"); A(a_chunk_mod, "Elixir.Lmstream.Chunk");
    A(a_token_ids, "token_ids"); A(a_text, "text"); A(a_finished, "finished");
    A(a_reason, "reason"); A(a_usage, "usage"); A(a_err, "error"); A(a_batch_index, "batch_index");
    A(a_ref, "ref");
    A(a_prompt_tokens, "prompt_tokens"); A(a_generated_tokens, "generated_tokens");
    A(a_ttft_ms, "ttft_ms"); A(a_tpot_ms, "tpot_ms");
    A(a_draft_proposed, "draft_tokens_proposed"); A(a_draft_accepted, "draft_tokens_accepted");
    A(a_verify_passes, "verify_passes"); A(a_cached_tokens, "cached_tokens"); A(a_path, "path"); A(a_abi, "abi_version"); A(a_cpus, "loader_cpus");
    A(a_logprobs, "logprobs"); A(a_token_id, "token_id"); A(a_logprob, "logprob"); A(a_bytes, "bytes");
    A(a_top_logprobs, "top_logprobs");
    A(a_reply, "reply"); A(a_content, "content"); A(a_reasoning, "reasoning"); A(a_tool_calls, "tool_calls");
    A(a_index, "index"); A(a_id, "id"); A(a_name, "name"); A(a_arguments, "arguments");
    A(a_reasons[0], "not_finished"); A(a_reasons[1], "end_id"); A(a_reasons[2], "length");
    A(a_reasons[3], "cancelled"); A(a_reasons[4], "error"); A(a_reasons[5], "stop_words");
    A(a_codes[0], "ok"); A(a_codes[1], "invalid_argument"); A(a_codes[2], "invalid_handle");
    A(a_codes[3], "bad_json"); A(a_codes[4], "invalid_request"); A(a_codes[5], "model");
    A(a_codes[6], "prompt_too_long"); A(a_codes[7], "capacity"); A(a_codes[8], "buffer_too_small");
    A(a_codes[9], "forked"); A(a_codes[10], "backend"); A(a_codes[11], "internal");
    A(a_codes[12], "shutdown"); A(a_codes[13], "closed"); A(a_codes[14], "state");
#undef A
}

static ERL_NIF_TERM code_term(ErlNifEnv *env, int code) {
    if (code <= 0 && -code < N_CODES) return a_codes[-code];
    return enif_make_int(env, code);
}

static ERL_NIF_TERM reason_term(ErlNifEnv *env, int reason) {
    if (reason >= 0 && reason < 6) return a_reasons[reason];
    return enif_make_int(env, reason);
}

static ERL_NIF_TERM make_binary(ErlNifEnv *env, const char *s, size_t n) {
    ERL_NIF_TERM t;
    unsigned char *p = enif_make_new_binary(env, n, &t);
    if (n) memcpy(p, s, n);
    return t;
}

static ERL_NIF_TERM err1(ErlNifEnv *env, int code) {
    return enif_make_tuple2(env, a_error, code_term(env, code));
}

static ERL_NIF_TERM err_msg(ErlNifEnv *env, int code, const char *msg) {
    return enif_make_tuple3(env, a_error, code_term(env, code), make_binary(env, msg, strlen(msg)));
}

/* ---- Resources ------------------------------------------------------- */

typedef struct {
    lms_runtime h;
    int destroyed; /* atomic: set once by whoever destroys */
} rt_res;

typedef struct {
    lms_channel h;
    int fd;
    ErlNifMutex *mu;
    int submitted;
    int finished;   /* the terminal chunk was popped */
    int registered; /* the descriptor was handed to enif_select (READ) */
    int stopping;   /* deselect/release started; no select from now on */
    int released;   /* lms_channel_release was called */
    int monitoring;
    ErlNifMonitor mon;
    ErlNifPid owner;
} ch_res;

static ErlNifResourceType *rt_type, *ch_type;

static void *destroy_thread(void *arg) {
    lms_runtime h = (lms_runtime)(uintptr_t)arg;
    api.runtime_destroy(h);
    return NULL;
}

static void rt_dtor(ErlNifEnv *env, void *obj) {
    (void)env;
    rt_res *r = obj;
    ATOMIC_ADD(&live_runtimes, -1);
    if (__atomic_exchange_n(&r->destroyed, 1, __ATOMIC_SEQ_CST)) return;
    /* lms_runtime_destroy waits for the engine loop (one iteration) and for
     * every stream's terminal chunk: never on a scheduler thread. */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, destroy_thread, (void *)(uintptr_t)r->h) != 0)
        api.runtime_destroy(r->h); /* last resort: block here */
    pthread_attr_destroy(&attr);
}

static void release_now(ch_res *c) {
    enif_mutex_lock(c->mu);
    int do_release = !c->released;
    c->released = 1;
    c->stopping = 1;
    enif_mutex_unlock(c->mu);
    if (do_release) {
        api.channel_release(c->h); /* cancels the request, closes the fd */
        ATOMIC_ADD(&unreleased_channels, -1);
    }
}

/* Deselects the descriptor and releases the channel (cancelling its request
 * if it still runs). Safe to call more than once, from any context that has
 * an env. Must be called without c->mu held: the stop callback may run
 * inside enif_select. */
static void shutdown_channel(ErlNifEnv *env, ch_res *c, int demonitor) {
    enif_mutex_lock(c->mu);
    if (c->stopping || c->released) {
        enif_mutex_unlock(c->mu);
        return;
    }
    c->stopping = 1;
    int need_stop = c->registered;
    int had_mon = c->monitoring && demonitor;
    ErlNifMonitor mon = c->mon;
    if (demonitor) c->monitoring = 0;
    enif_mutex_unlock(c->mu);
    if (had_mon) enif_demonitor_process(env, c, &mon);
    if (need_stop) {
        int rc = enif_select(env, (ErlNifEvent)c->fd, ERL_NIF_SELECT_STOP, c, NULL, a_undefined);
        if (rc < 0) release_now(c); /* should not happen; do not leak the request */
        /* else the stop callback releases, now or once the poller let go */
    } else {
        release_now(c);
    }
}

static void ch_stop(ErlNifEnv *env, void *obj, ErlNifEvent fd, int is_direct_call) {
    (void)env; (void)fd; (void)is_direct_call;
    release_now((ch_res *)obj);
}

static void ch_down(ErlNifEnv *env, void *obj, ErlNifPid *pid, ErlNifMonitor *mon) {
    (void)pid;
    ch_res *c = obj;
    enif_mutex_lock(c->mu);
    int ours = c->monitoring && enif_compare_monitors(mon, &c->mon) == 0;
    if (ours) c->monitoring = 0;
    enif_mutex_unlock(c->mu);
    if (ours) shutdown_channel(env, c, 0);
}

static void ch_dtor(ErlNifEnv *env, void *obj) {
    (void)env;
    ch_res *c = obj;
    /* A descriptor still in the pollset keeps the resource alive, so here
     * it is either never selected or already stopped. */
    if (!c->released && c->h) {
        c->released = 1;
        api.channel_release(c->h);
        ATOMIC_ADD(&unreleased_channels, -1);
    }
    if (c->mu) enif_mutex_destroy(c->mu);
    ATOMIC_ADD(&live_channels, -1);
}

static int open_types(ErlNifEnv *env, ErlNifResourceFlags flags) {
    ErlNifResourceTypeInit rti = {.dtor = rt_dtor};
    ErlNifResourceTypeInit cti = {.dtor = ch_dtor, .stop = ch_stop, .down = ch_down};
    ErlNifResourceFlags tried;
    ErlNifResourceType *r = enif_open_resource_type_x(env, "lmstream_runtime", &rti, flags, &tried);
    ErlNifResourceType *c = enif_open_resource_type_x(env, "lmstream_channel", &cti, flags, &tried);
    if (!r || !c) return 0;
    rt_type = r;
    ch_type = c;
    return 1;
}

/* load_info: the library path as a binary or charlist. */
static void load_from_info(ErlNifEnv *env, ERL_NIF_TERM info) {
    char path[4096];
    ErlNifBinary bin;
    if (enif_inspect_binary(env, info, &bin) && bin.size < sizeof path) {
        memcpy(path, bin.data, bin.size);
        path[bin.size] = 0;
    } else if (enif_get_string(env, info, path, sizeof path, ERL_NIF_LATIN1) <= 0) {
        snprintf(api_error, sizeof api_error, "no library path given to the NIF");
        return;
    }
    load_library(path);
}

static int nif_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
    make_atoms(env);
    if (!open_types(env, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER)) return 1;
    load_from_info(env, info);
    *priv = NULL;
    return 0; /* a missing library is reported by every call, not a load failure */
}

static int nif_upgrade(ErlNifEnv *env, void **priv, void **old_priv, ERL_NIF_TERM info) {
    (void)old_priv;
    make_atoms(env);
    if (!open_types(env, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER)) return 1;
    load_from_info(env, info); /* no-op when this image already has it */
    *priv = NULL;
    return 0;
}

static void nif_unload(ErlNifEnv *env, void *priv) {
    (void)env; (void)priv; /* linked -z nodelete; the Go library is never unloaded */
}

#define REQUIRE_LIB(env) \
    if (!__atomic_load_n(&api_loaded, __ATOMIC_SEQ_CST)) \
        return err_msg(env, LMS_ERR_STATE, api_error[0] ? api_error : "liblmstream is not loaded")

/* ---- Library info ------------------------------------------------------ */

static ERL_NIF_TERM nif_library_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc; (void)argv;
    if (!__atomic_load_n(&api_loaded, __ATOMIC_SEQ_CST)) {
        const char *m = api_error[0] ? api_error : "liblmstream is not loaded";
        return enif_make_tuple2(env, a_error, make_binary(env, m, strlen(m)));
    }
    ERL_NIF_TERM keys[3] = {a_path, a_abi, a_cpus};
    ERL_NIF_TERM vals[3] = {make_binary(env, api_path, strlen(api_path)),
                            enif_make_int(env, api.abi_version()), enif_make_int(env, api_cpus)};
    ERL_NIF_TERM m;
    enif_make_map_from_arrays(env, keys, vals, 3, &m);
    return enif_make_tuple2(env, a_ok, m);
}

static ERL_NIF_TERM nif_resource_counts(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc; (void)argv;
    return enif_make_tuple3(env, enif_make_long(env, ATOMIC_LOAD(&live_runtimes)),
                            enif_make_long(env, ATOMIC_LOAD(&live_channels)),
                            enif_make_long(env, ATOMIC_LOAD(&unreleased_channels)));
}

static ERL_NIF_TERM nif_strerror(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    int code;
    if (!enif_get_int(env, argv[0], &code)) return enif_make_badarg(env);
    REQUIRE_LIB(env);
    const char *s = api.strerror_(code);
    return make_binary(env, s, strlen(s));
}

/* A NUL-terminated copy of an iolist/binary argument. */
static char *cstring_arg(ErlNifEnv *env, ERL_NIF_TERM t) {
    ErlNifBinary bin;
    if (!enif_inspect_iolist_as_binary(env, t, &bin)) return NULL;
    if (memchr(bin.data, 0, bin.size)) return NULL;
    char *s = enif_alloc(bin.size + 1);
    if (!s) return NULL;
    memcpy(s, bin.data, bin.size);
    s[bin.size] = 0;
    return s;
}

static ERL_NIF_TERM nif_configure_process(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    char *json = cstring_arg(env, argv[0]);
    if (!json) return enif_make_badarg(env);
    char err[1024] = {0};
    int rc = api.configure_process(json, err, sizeof err);
    enif_free(json);
    if (rc < 0) return err_msg(env, rc, err[0] ? err : api.strerror_(rc));
    return a_ok;
}

/* ---- Runtimes -------------------------------------------------------- */

/* The result of a creation: {:ok, runtime resource} or an error tuple. */
static ERL_NIF_TERM runtime_created(ErlNifEnv *env, int rc, lms_runtime h, const char *err) {
    if (rc != LMS_OK) return err_msg(env, rc < 0 ? rc : LMS_ERR_INTERNAL, err[0] ? err : api.strerror_(rc));
    rt_res *r = enif_alloc_resource(rt_type, sizeof *r);
    if (!r) {
        api.runtime_destroy(h);
        return err_msg(env, LMS_ERR_INTERNAL, "out of memory");
    }
    r->h = h;
    r->destroyed = 0;
    ATOMIC_ADD(&live_runtimes, 1);
    ERL_NIF_TERM t = enif_make_resource(env, r);
    enif_release_resource(r);
    return enif_make_tuple2(env, a_ok, t);
}

static ERL_NIF_TERM nif_runtime_create(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    char *json = cstring_arg(env, argv[0]);
    if (!json) return enif_make_badarg(env);
    char err[2048] = {0};
    lms_runtime h = 0;
    int rc = api.runtime_create(json, &h, err, sizeof err);
    enif_free(json);
    return runtime_created(env, rc, h, err);
}

/* Load progress goes to a process as {:lmstream_load_progress, tag, stage,
** fraction}. The library calls the handler on the thread running this NIF
** (a dirty scheduler, managed by ERTS), so sending with the NIF's env is
** allowed. The message env is reused: a successful send invalidates it
** (a failed one leaves its terms), so it is cleared after every send. (It was cleared only when
** a send failed; with the hundreds of reports packing the weights now
** makes, a fraction arrived as a stale term, a reference or an atom.) */
typedef struct {
    ErlNifEnv *caller;
    ErlNifEnv *msg;
    ErlNifPid to;
    ERL_NIF_TERM tag; /* in caller, valid for the NIF call */
} load_progress;

static int send_load_progress(const char *stage, double fraction, void *user) {
    load_progress *p = user;
    ERL_NIF_TERM m = enif_make_tuple4(p->msg, enif_make_atom(p->msg, "lmstream_load_progress"),
                                      enif_make_copy(p->msg, p->tag), enif_make_atom(p->msg, stage),
                                      enif_make_double(p->msg, fraction));
    enif_send(p->caller, &p->to, p->msg, m);
    enif_clear_env(p->msg);
    return 0;
}

/* runtime_create_progress(json, pid, tag): runtime_create, reporting load
** progress to pid. */
static ERL_NIF_TERM nif_runtime_create_progress(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    load_progress p = {.caller = env, .tag = argv[2]};
    if (!enif_get_local_pid(env, argv[1], &p.to)) return enif_make_badarg(env);
    char *json = cstring_arg(env, argv[0]);
    if (!json) return enif_make_badarg(env);
    p.msg = enif_alloc_env();
    if (!p.msg) {
        enif_free(json);
        return err_msg(env, LMS_ERR_INTERNAL, "out of memory");
    }
    char err[2048] = {0};
    lms_runtime h = 0;
    int rc = api.runtime_create_with_progress(json, send_load_progress, &p, &h, err, sizeof err);
    enif_free(json);
    enif_free_env(p.msg);
    return runtime_created(env, rc, h, err);
}

static ERL_NIF_TERM nif_runtime_destroy(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    rt_res *r;
    if (!enif_get_resource(env, argv[0], rt_type, (void **)&r)) return enif_make_badarg(env);
    if (__atomic_exchange_n(&r->destroyed, 1, __ATOMIC_SEQ_CST)) return err1(env, LMS_ERR_INVALID_HANDLE);
    int rc = api.runtime_destroy(r->h);
    return rc < 0 ? err1(env, rc) : a_ok;
}

static ERL_NIF_TERM nif_runtime_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    rt_res *r;
    if (!enif_get_resource(env, argv[0], rt_type, (void **)&r)) return enif_make_badarg(env);
    if (__atomic_load_n(&r->destroyed, __ATOMIC_SEQ_CST)) return err1(env, LMS_ERR_INVALID_HANDLE);
    char small[1024];
    size_t len = 0;
    int rc = api.runtime_stats(r->h, small, sizeof small, &len);
    if (rc == LMS_ERR_BUFFER_TOO_SMALL) {
        char *big = enif_alloc(len + 1);
        if (!big) return err1(env, LMS_ERR_INTERNAL);
        rc = api.runtime_stats(r->h, big, len + 1, &len);
        ERL_NIF_TERM out = rc < 0 ? err1(env, rc) : enif_make_tuple2(env, a_ok, make_binary(env, big, len));
        enif_free(big);
        return out;
    }
    if (rc < 0) return err1(env, rc);
    return enif_make_tuple2(env, a_ok, make_binary(env, small, len));
}

/* ---- Channels -------------------------------------------------------- */

/* channel_open(Interval, SkipSpecial, QueueLimit, Policy) */
static ERL_NIF_TERM nif_channel_open(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    int interval, limit, policy;
    if (!enif_get_int(env, argv[0], &interval) || !enif_get_int(env, argv[2], &limit) ||
        !enif_get_int(env, argv[3], &policy))
        return enif_make_badarg(env);
    int skip;
    if (enif_is_identical(argv[1], a_true)) skip = 1;
    else if (enif_is_identical(argv[1], a_false)) skip = 0;
    else return enif_make_badarg(env);
    REQUIRE_LIB(env);
    lms_channel h = 0;
    int rc = api.channel_create(&h);
    if (rc < 0) return err1(env, rc);
    int fd = -1;
    if ((rc = api.channel_set_interval(h, interval)) < 0 ||
        (rc = api.channel_set_skip_special(h, skip)) < 0 ||
        (rc = api.channel_set_queue(h, limit, policy)) < 0 ||
        (rc = api.channel_fd(h, &fd)) < 0) {
        api.channel_release(h);
        return err1(env, rc);
    }
    ch_res *c = enif_alloc_resource(ch_type, sizeof *c);
    if (!c) {
        api.channel_release(h);
        return err1(env, LMS_ERR_INTERNAL);
    }
    memset(c, 0, sizeof *c);
    c->h = h;
    c->fd = fd;
    c->mu = enif_mutex_create("lmstream_channel");
    ATOMIC_ADD(&live_channels, 1);
    ATOMIC_ADD(&unreleased_channels, 1);
    ERL_NIF_TERM t = enif_make_resource(env, c);
    enif_release_resource(c);
    return enif_make_tuple2(env, a_ok, t);
}

/* submit(Runtime, RequestJSON, [Channel]) */
static ERL_NIF_TERM nif_submit(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    rt_res *r;
    unsigned n;
    if (!enif_get_resource(env, argv[0], rt_type, (void **)&r) || !enif_get_list_length(env, argv[2], &n) ||
        n == 0 || n > 65536)
        return enif_make_badarg(env);
    lms_channel stack_hs[16];
    ch_res *stack_cs[16];
    lms_channel *hs = n <= 16 ? stack_hs : enif_alloc(n * sizeof *hs);
    ch_res **cs = n <= 16 ? stack_cs : enif_alloc(n * sizeof *cs);
    ERL_NIF_TERM out;
    char *json = NULL;
    ERL_NIF_TERM head, tail = argv[2];
    for (unsigned i = 0; i < n; i++) {
        enif_get_list_cell(env, tail, &head, &tail);
        if (!enif_get_resource(env, head, ch_type, (void **)&cs[i])) {
            out = enif_make_badarg(env);
            goto done;
        }
        hs[i] = cs[i]->h;
    }
    json = cstring_arg(env, argv[1]);
    if (!json) {
        out = enif_make_badarg(env);
        goto done;
    }
    if (__atomic_load_n(&r->destroyed, __ATOMIC_SEQ_CST)) {
        out = err_msg(env, LMS_ERR_INVALID_HANDLE, "the runtime was closed");
        goto done;
    }
    char err[2048] = {0};
    int rc = api.submit(r->h, json, hs, n, err, sizeof err);
    if (rc < 0) {
        out = err_msg(env, rc, err[0] ? err : api.strerror_(rc));
        goto done;
    }
    for (unsigned i = 0; i < n; i++) {
        enif_mutex_lock(cs[i]->mu);
        cs[i]->submitted = 1;
        enif_mutex_unlock(cs[i]->mu);
    }
    out = a_ok;
done:
    if (json) enif_free(json);
    if (hs != stack_hs) enif_free(hs);
    if (cs != stack_cs) enif_free(cs);
    return out;
}

/* With c->mu held: monitor the calling process (once, or again when another
 * process takes the stream over) and register the descriptor for READ.
 * Holding c->mu means no stop can slip in between the state check and the
 * registration (a READ select never calls our callbacks). 0 or an error. */
static int arm_locked(ErlNifEnv *env, ch_res *c, ERL_NIF_TERM ref) {
    ErlNifPid self;
    if (!enif_self(env, &self)) return LMS_ERR_INVALID_ARGUMENT;
    if (!c->monitoring || enif_compare_pids(&c->owner, &self) != 0) {
        ErlNifMonitor old = c->mon;
        int had = c->monitoring;
        if (enif_monitor_process(env, c, &self, &c->mon) == 0) {
            c->monitoring = 1;
            c->owner = self;
            if (had) enif_demonitor_process(env, c, &old);
        }
    }
    int rc = enif_select(env, (ErlNifEvent)c->fd, ERL_NIF_SELECT_READ, c, NULL, ref);
    if (rc < 0) return LMS_ERR_INTERNAL;
    c->registered = 1;
    return 0;
}

/* arm(Channel, Ref): enif_select for READ; the caller gets
 * {select, Channel, Ref, ready_input} once the descriptor is readable, and
 * is monitored: its exit releases the channel. */
static ERL_NIF_TERM nif_arm(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    ch_res *c;
    if (!enif_get_resource(env, argv[0], ch_type, (void **)&c)) return enif_make_badarg(env);
    if (!enif_is_ref(env, argv[1]) && !enif_is_identical(argv[1], a_undefined)) return enif_make_badarg(env);
    enif_mutex_lock(c->mu);
    if (c->stopping || c->released) {
        enif_mutex_unlock(c->mu);
        return err1(env, LMS_ERR_INVALID_HANDLE);
    }
    if (c->finished) {
        enif_mutex_unlock(c->mu);
        return a_done;
    }
    int rc = arm_locked(env, c, argv[1]);
    enif_mutex_unlock(c->mu);
    return rc < 0 ? err1(env, rc) : a_ok;
}

static __thread char *tl_buf;
static __thread size_t tl_buf_size;
#define DRAIN_MAX 256
#define DRAIN_BUF (128 * 1024)

static ERL_NIF_TERM usage_term(ErlNifEnv *env, const lms_usage *u) {
    ERL_NIF_TERM k[8] = {a_prompt_tokens, a_generated_tokens, a_ttft_ms, a_tpot_ms,
                         a_draft_proposed, a_draft_accepted, a_verify_passes, a_cached_tokens};
    ERL_NIF_TERM v[8] = {enif_make_int64(env, u->prompt_tokens), enif_make_int64(env, u->generated_tokens),
                         enif_make_double(env, u->ttft_ms), enif_make_double(env, u->tpot_ms),
                         enif_make_int64(env, u->draft_tokens_proposed),
                         enif_make_int64(env, u->draft_tokens_accepted), enif_make_int64(env, u->verify_passes),
                         enif_make_int64(env, u->cached_tokens)};
    ERL_NIF_TERM m;
    enif_make_map_from_arrays(env, k, v, 8, &m);
    return m;
}

/* %{token_id, logprob, bytes} (and top_logprobs: [...] for a generated
** token): the piece is a binary, maybe part of a character. */
static ERL_NIF_TERM logprob_term(ErlNifEnv *env, int32_t id, double lp, const char *bytes, size_t n,
                                 const ERL_NIF_TERM *top) {
    ERL_NIF_TERM k[4] = {a_token_id, a_logprob, a_bytes, a_top_logprobs};
    ERL_NIF_TERM v[4] = {enif_make_int(env, id), enif_make_double(env, lp), make_binary(env, bytes, n),
                         top ? *top : a_nil};
    ERL_NIF_TERM m;
    enif_make_map_from_arrays(env, k, v, top ? 4 : 3, &m);
    return m;
}

static ERL_NIF_TERM logprobs_term(ErlNifEnv *env, const lms_chunk *ch) {
    if (ch->n_logprobs == 0 || ch->logprobs == NULL) return a_nil;
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (size_t i = ch->n_logprobs; i-- > 0;) {
        const lms_token_logprob *lp = &ch->logprobs[i];
        ERL_NIF_TERM top = enif_make_list(env, 0);
        for (size_t k = lp->n_top; k-- > 0;) {
            const lms_logprob *t = &lp->top[k];
            top = enif_make_list_cell(env, logprob_term(env, t->token_id, t->logprob, t->bytes, t->n_bytes, NULL), top);
        }
        list = enif_make_list_cell(env, logprob_term(env, lp->token_id, lp->logprob, lp->bytes, lp->n_bytes, &top), list);
    }
    return list;
}

/* A binary of a string the library gave, "" for a NULL one. */
static ERL_NIF_TERM span_binary(ErlNifEnv *env, const char *s, size_t n) { return make_binary(env, s, s ? n : 0); }
static ERL_NIF_TERM cstr_binary(ErlNifEnv *env, const char *s) { return span_binary(env, s, s ? strlen(s) : 0); }

/* nil, or %{content, reasoning, tool_calls: [%{index, id, name, arguments}]}
** for a request that parses its reply (see lms_chunk.has_reply). */
static ERL_NIF_TERM reply_term(ErlNifEnv *env, const lms_chunk *ch) {
    if (!ch->has_reply) return a_nil;
    ERL_NIF_TERM calls = enif_make_list(env, 0);
    for (size_t i = ch->tool_calls ? ch->n_tool_calls : 0; i-- > 0;) {
        const lms_tool_call_delta *d = &ch->tool_calls[i];
        ERL_NIF_TERM k[4] = {a_index, a_id, a_name, a_arguments};
        ERL_NIF_TERM v[4] = {enif_make_int(env, d->index), cstr_binary(env, d->id), cstr_binary(env, d->name),
                             span_binary(env, d->arguments, d->arguments_len)};
        ERL_NIF_TERM m;
        enif_make_map_from_arrays(env, k, v, 4, &m);
        calls = enif_make_list_cell(env, m, calls);
    }
    ERL_NIF_TERM k[3] = {a_content, a_reasoning, a_tool_calls};
    ERL_NIF_TERM v[3] = {span_binary(env, ch->content, ch->content_len),
                         span_binary(env, ch->reasoning, ch->reasoning_len), calls};
    ERL_NIF_TERM m;
    enif_make_map_from_arrays(env, k, v, 3, &m);
    return m;
}

static ERL_NIF_TERM chunk_term(ErlNifEnv *env, const lms_chunk *ch, ERL_NIF_TERM ref) {
    ERL_NIF_TERM ids_stack[64];
    ERL_NIF_TERM *ids = ch->n_token_ids <= 64 ? ids_stack : enif_alloc(ch->n_token_ids * sizeof *ids);
    for (size_t i = 0; i < ch->n_token_ids; i++) ids[i] = enif_make_int(env, ch->token_ids[i]);
    ERL_NIF_TERM idlist = enif_make_list_from_array(env, ids, (unsigned)ch->n_token_ids);
    if (ids != ids_stack) enif_free(ids);
    ERL_NIF_TERM error = a_nil, usage = a_nil, reason = a_nil;
    if (ch->finished) {
        reason = reason_term(env, ch->reason);
        usage = usage_term(env, &ch->usage);
        if (ch->reason == LMS_FINISH_ERROR) {
            const char *m = ch->error_message ? ch->error_message : "";
            error = enif_make_tuple2(env, code_term(env, ch->error_code), make_binary(env, m, strlen(m)));
        }
    }
    ERL_NIF_TERM k[11] = {a_struct, a_token_ids, a_text, a_finished, a_reason, a_usage, a_err, a_batch_index, a_ref,
                          a_logprobs, a_reply};
    ERL_NIF_TERM v[11] = {a_chunk_mod, idlist, make_binary(env, ch->text, ch->text_len),
                          ch->finished ? a_true : a_false, reason, usage, error,
                          enif_make_int(env, ch->batch_index), ref, logprobs_term(env, ch), reply_term(env, ch)};
    ERL_NIF_TERM m;
    enif_make_map_from_arrays(env, k, v, 11, &m);
    return m;
}

/* drain(Channel, Max): pops what is pending, without waiting.
 * {ok, [Chunk], Finished} | empty | done | {error, Code}
 * pull(Channel, Max, Ref): the same, but instead of empty it arms the
 * select (as arm/2) and returns armed: one NIF call per wake-up. */
static ERL_NIF_TERM nif_drain(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    ch_res *c;
    int max;
    if (!enif_get_resource(env, argv[0], ch_type, (void **)&c) || !enif_get_int(env, argv[1], &max) || max < 1)
        return enif_make_badarg(env);
    /* pull/3: arm in the same call when nothing is pending. */
    int arm_if_empty = argc == 3;
    if (arm_if_empty && !enif_is_ref(env, argv[2]) && !enif_is_identical(argv[2], a_undefined))
        return enif_make_badarg(env);
    if (max > DRAIN_MAX) max = DRAIN_MAX;
    if (!tl_buf) {
        tl_buf = malloc(DRAIN_BUF);
        if (!tl_buf) return err1(env, LMS_ERR_INTERNAL);
        tl_buf_size = DRAIN_BUF;
    }
    lms_chunk chunks[DRAIN_MAX];
    enif_mutex_lock(c->mu);
    if (c->finished) {
        enif_mutex_unlock(c->mu);
        return a_done;
    }
    if (c->stopping || c->released) {
        enif_mutex_unlock(c->mu);
        return err1(env, LMS_ERR_INVALID_HANDLE);
    }
    size_t n = 0;
    char *buf = tl_buf;
    size_t bufsize = tl_buf_size;
    char *big = NULL;
    int rc = api.channel_pop_batch(c->h, chunks, (size_t)max, buf, bufsize, 0, &n);
    /* One chunk larger than the buffer (a long coalesced run): n is the
     * size it needs. It may grow again before the next call (the engine
     * keeps merging into it), so retry with headroom. */
    for (int tries = 0; rc == LMS_ERR_BUFFER_TOO_SMALL && tries < 8; tries++) {
        size_t need = n + n / 2 + 4096;
        if (big) enif_free(big);
        big = enif_alloc(need);
        if (!big) {
            enif_mutex_unlock(c->mu);
            return err1(env, LMS_ERR_INTERNAL);
        }
        rc = api.channel_pop_batch(c->h, chunks, 1, big, need, 0, &n);
    }
    ERL_NIF_TERM out;
    int finished = 0;
    if (rc == LMS_OK) {
        ERL_NIF_TERM ref = enif_make_resource(env, c);
        ERL_NIF_TERM terms_stack[DRAIN_MAX];
        for (size_t i = 0; i < n; i++) {
            terms_stack[i] = chunk_term(env, &chunks[i], ref);
            if (chunks[i].finished) finished = 1;
        }
        out = enif_make_tuple3(env, a_ok, enif_make_list_from_array(env, terms_stack, (unsigned)n),
                               finished ? a_true : a_false);
    } else if (rc == LMS_EMPTY) {
        out = a_empty;
        if (arm_if_empty) {
            int arc = arm_locked(env, c, argv[2]);
            out = arc < 0 ? err1(env, arc) : enif_make_atom(env, "armed");
        }
    } else if (rc == LMS_DONE) {
        finished = 1;
        out = a_done;
    } else {
        out = err1(env, rc);
    }
    if (finished) c->finished = 1;
    enif_mutex_unlock(c->mu);
    if (big) enif_free(big);
    /* The stream is over: deselect, release the channel, stop monitoring. */
    if (finished) shutdown_channel(env, c, 1);
    return out;
}

static ERL_NIF_TERM nif_cancel(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    ch_res *c;
    if (!enif_get_resource(env, argv[0], ch_type, (void **)&c)) return enif_make_badarg(env);
    enif_mutex_lock(c->mu);
    int gone = c->released;
    int rc = gone ? LMS_ERR_INVALID_HANDLE : api.channel_cancel(c->h);
    enif_mutex_unlock(c->mu);
    return rc < 0 ? err1(env, rc) : a_ok;
}

/* close(Channel): deselect and release now (cancels a running request). */
static ERL_NIF_TERM nif_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    ch_res *c;
    if (!enif_get_resource(env, argv[0], ch_type, (void **)&c)) return enif_make_badarg(env);
    shutdown_channel(env, c, 1);
    return a_ok;
}

/* state(Channel) -> {ok, Finished, Reason, Pending} | {error, Code} */
static ERL_NIF_TERM nif_state(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    ch_res *c;
    if (!enif_get_resource(env, argv[0], ch_type, (void **)&c)) return enif_make_badarg(env);
    enif_mutex_lock(c->mu);
    int fin = 0, reason = 0;
    size_t pending = 0;
    int rc = c->released ? LMS_ERR_INVALID_HANDLE : api.channel_state(c->h, &fin, &reason, &pending);
    enif_mutex_unlock(c->mu);
    if (rc < 0) return err1(env, rc);
    return enif_make_tuple4(env, a_ok, fin ? a_true : a_false, reason_term(env, reason),
                            enif_make_uint64(env, pending));
}

/* ---- Models by name --------------------------------------------------- */

/* Where a pull's progress goes: {Ref, {:pull_progress, Phase, File, Part,
 * Parts, DoneBytes, TotalBytes}} to Pid. The pull runs on a dirty I/O
 * scheduler (it blocks for the whole download) and lms_model_pull calls the
 * callback on that same thread, so the NIF's env may send. */
typedef struct {
    ErlNifEnv *env;
    ErlNifPid pid;
    ERL_NIF_TERM ref;
} pull_target;

static int pull_progress(const lms_pull_progress *p, void *user) {
    pull_target *t = user;
    /* Nobody left to tell: stop the pull (LMS_INTERRUPTED; what was
     * downloaded is kept for the next pull). */
    if (!enif_is_process_alive(t->env, &t->pid)) return 1;
    static const char *phases[] = {"waiting", "downloading", "assembling", "verifying", "done"};
    ErlNifEnv *m = enif_alloc_env();
    if (!m) return 0;
    const char *phase = p->phase >= 0 && p->phase < 5 ? phases[p->phase] : "unknown";
    const char *file = p->file ? p->file : "";
    ERL_NIF_TERM items[7] = {
        enif_make_atom(m, "pull_progress"), enif_make_atom(m, phase), make_binary(m, file, strlen(file)),
        enif_make_int(m, p->part), enif_make_int(m, p->parts),
        enif_make_int64(m, p->done_bytes), enif_make_int64(m, p->total_bytes)};
    ERL_NIF_TERM msg = enif_make_tuple2(m, enif_make_copy(m, t->ref), enif_make_tuple_from_array(m, items, 7));
    enif_send(t->env, &t->pid, m, msg);
    enif_free_env(m);
    return 0;
}

/* model_path(Name) -> {:ok, Path} | {:missing, Path} | {:error, Code, Msg} */
static ERL_NIF_TERM nif_model_path(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    char *name = cstring_arg(env, argv[0]);
    if (!name) return enif_make_badarg(env);
    char buf[4096];
    size_t n = 0;
    int rc = api.model_path(name, buf, sizeof buf, &n);
    enif_free(name);
    if (rc == LMS_OK) return enif_make_tuple2(env, a_ok, make_binary(env, buf, n));
    if (rc == LMS_EMPTY) return enif_make_tuple2(env, enif_make_atom(env, "missing"), make_binary(env, buf, n));
    return err_msg(env, rc, api.strerror_(rc));
}

/* model_pull(Name, Pid, Ref) -> :ok | {:error, Code, Msg}, on a dirty I/O
 * scheduler. */
static ERL_NIF_TERM nif_model_pull(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    pull_target t = {.env = env, .ref = argv[2]};
    if (!enif_get_local_pid(env, argv[1], &t.pid)) return enif_make_badarg(env);
    char *name = cstring_arg(env, argv[0]);
    if (!name) return enif_make_badarg(env);
    char err[1024] = {0};
    int rc = api.model_pull(name, pull_progress, &t, err, sizeof err);
    enif_free(name);
    if (rc != LMS_OK) return err_msg(env, rc, err[0] ? err : api.strerror_(rc));
    return a_ok;
}

/* ---- Introspection --------------------------------------------------- */

#define REQUIRE_FN(env, fn) \
    if (!api.fn) return err_msg(env, LMS_ERR_STATE, "this liblmstream has no lms_" #fn " (an older library)")

/* The live runtime of argv[0], or NULL after a badarg/closed reply in *out. */
static rt_res *live_runtime(ErlNifEnv *env, ERL_NIF_TERM t, ERL_NIF_TERM *out) {
    rt_res *r;
    if (!enif_get_resource(env, t, rt_type, (void **)&r)) {
        *out = enif_make_badarg(env);
        return NULL;
    }
    if (__atomic_load_n(&r->destroyed, __ATOMIC_SEQ_CST)) {
        *out = err_msg(env, LMS_ERR_INVALID_HANDLE, "the runtime was closed");
        return NULL;
    }
    return r;
}

/* tokenize(Runtime, Text, Flags) -> {ok, [Id]}. Dirty CPU: tokenizing is
 * linear in the text, which may be large. */
static ERL_NIF_TERM nif_tokenize(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    REQUIRE_FN(env, tokenize);
    ERL_NIF_TERM out;
    rt_res *r = live_runtime(env, argv[0], &out);
    if (!r) return out;
    ErlNifBinary text;
    int flags;
    if (!enif_inspect_iolist_as_binary(env, argv[1], &text) || !enif_get_int(env, argv[2], &flags))
        return enif_make_badarg(env);
    char err[1024] = {0};
    size_t n = 0;
    int rc = api.tokenize(r->h, (const char *)text.data, text.size, flags, NULL, 0, &n, err, sizeof err);
    if (rc == LMS_OK) return enif_make_tuple2(env, a_ok, enif_make_list(env, 0));
    if (rc != LMS_ERR_BUFFER_TOO_SMALL) return err_msg(env, rc, err[0] ? err : api.strerror_(rc));
    int32_t *ids = enif_alloc(n * sizeof *ids);
    if (!ids) return err_msg(env, LMS_ERR_INTERNAL, "out of memory");
    size_t got = 0;
    rc = api.tokenize(r->h, (const char *)text.data, text.size, flags, ids, n, &got, err, sizeof err);
    if (rc < 0) {
        enif_free(ids);
        return err_msg(env, rc, err[0] ? err : api.strerror_(rc));
    }
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (size_t i = got; i > 0; i--) list = enif_make_list_cell(env, enif_make_int(env, ids[i - 1]), list);
    enif_free(ids);
    return enif_make_tuple2(env, a_ok, list);
}

/* count_tokens(Runtime, Text, Flags) -> {ok, N} */
static ERL_NIF_TERM nif_count_tokens(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    REQUIRE_FN(env, count_tokens);
    ERL_NIF_TERM out;
    rt_res *r = live_runtime(env, argv[0], &out);
    if (!r) return out;
    ErlNifBinary text;
    int flags;
    if (!enif_inspect_iolist_as_binary(env, argv[1], &text) || !enif_get_int(env, argv[2], &flags))
        return enif_make_badarg(env);
    char err[1024] = {0};
    size_t n = 0;
    int rc = api.count_tokens(r->h, (const char *)text.data, text.size, flags, &n, err, sizeof err);
    if (rc < 0) return err_msg(env, rc, err[0] ? err : api.strerror_(rc));
    return enif_make_tuple2(env, a_ok, enif_make_uint64(env, n));
}

/* Runs a buffer-protocol call (measure, then fill) into a new binary. */
typedef int (*fill_fn)(rt_res *r, const void *arg, char *buf, size_t size, size_t *len, char *err, size_t err_size);

static ERL_NIF_TERM fill_binary(ErlNifEnv *env, rt_res *r, const void *arg, fill_fn fn) {
    char small[4096], err[1024] = {0};
    size_t len = 0;
    int rc = fn(r, arg, small, sizeof small, &len, err, sizeof err);
    if (rc == LMS_OK) return enif_make_tuple2(env, a_ok, make_binary(env, small, len));
    if (rc != LMS_ERR_BUFFER_TOO_SMALL) return err_msg(env, rc, err[0] ? err : api.strerror_(rc));
    char *big = enif_alloc(len + 1);
    if (!big) return err_msg(env, LMS_ERR_INTERNAL, "out of memory");
    rc = fn(r, arg, big, len + 1, &len, err, sizeof err);
    ERL_NIF_TERM t = rc < 0 ? err_msg(env, rc, err[0] ? err : api.strerror_(rc))
                            : enif_make_tuple2(env, a_ok, make_binary(env, big, len));
    enif_free(big);
    return t;
}

typedef struct {
    const int32_t *ids;
    size_t n;
    int flags;
} detok_arg;

static int fill_detokenize(rt_res *r, const void *arg, char *buf, size_t size, size_t *len, char *err, size_t es) {
    const detok_arg *a = arg;
    return api.detokenize(r->h, a->ids, a->n, a->flags, buf, size, len, err, es);
}

static int fill_model_info(rt_res *r, const void *arg, char *buf, size_t size, size_t *len, char *err, size_t es) {
    (void)arg; (void)err; (void)es;
    return api.model_info(r->h, buf, size, len);
}

static int fill_render_chat(rt_res *r, const void *arg, char *buf, size_t size, size_t *len, char *err, size_t es) {
    return api.render_chat(r->h, arg, buf, size, len, err, es);
}

/* detokenize(Runtime, [Id], Flags) -> {ok, Bytes} */
static ERL_NIF_TERM nif_detokenize(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    REQUIRE_FN(env, detokenize);
    ERL_NIF_TERM out;
    rt_res *r = live_runtime(env, argv[0], &out);
    if (!r) return out;
    unsigned n;
    detok_arg a;
    if (!enif_get_list_length(env, argv[1], &n) || !enif_get_int(env, argv[2], &a.flags))
        return enif_make_badarg(env);
    int32_t *ids = enif_alloc((n ? n : 1) * sizeof *ids);
    if (!ids) return err_msg(env, LMS_ERR_INTERNAL, "out of memory");
    ERL_NIF_TERM head, tail = argv[1];
    for (unsigned i = 0; i < n; i++) {
        int v;
        enif_get_list_cell(env, tail, &head, &tail);
        if (!enif_get_int(env, head, &v)) {
            enif_free(ids);
            return enif_make_badarg(env);
        }
        ids[i] = v;
    }
    a.ids = ids;
    a.n = n;
    out = fill_binary(env, r, &a, fill_detokenize);
    enif_free(ids);
    return out;
}

/* model_info(Runtime) -> {ok, JSON} */
static ERL_NIF_TERM nif_model_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    REQUIRE_FN(env, model_info);
    ERL_NIF_TERM out;
    rt_res *r = live_runtime(env, argv[0], &out);
    if (!r) return out;
    return fill_binary(env, r, NULL, fill_model_info);
}

/* render_chat(Runtime, RequestJSON) -> {ok, Text}. Dirty CPU: a template
 * renders in time linear in the conversation. */
static ERL_NIF_TERM nif_render_chat(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
    (void)argc;
    REQUIRE_LIB(env);
    REQUIRE_FN(env, render_chat);
    ERL_NIF_TERM out;
    rt_res *r = live_runtime(env, argv[0], &out);
    if (!r) return out;
    char *json = cstring_arg(env, argv[1]);
    if (!json) return enif_make_badarg(env);
    out = fill_binary(env, r, json, fill_render_chat);
    enif_free(json);
    return out;
}

static ErlNifFunc funcs[] = {
    {"library_info", 0, nif_library_info, 0},
    {"resource_counts", 0, nif_resource_counts, 0},
    {"strerror", 1, nif_strerror, 0},
    {"configure_process", 1, nif_configure_process, 0},
    {"runtime_create", 1, nif_runtime_create, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"runtime_create_progress", 3, nif_runtime_create_progress, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"runtime_destroy", 1, nif_runtime_destroy, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"runtime_stats", 1, nif_runtime_stats, 0},
    {"channel_open", 4, nif_channel_open, 0},
    {"submit", 3, nif_submit, 0},
    {"arm", 2, nif_arm, 0},
    {"drain", 2, nif_drain, 0},
    {"pull", 3, nif_drain, 0},
    {"cancel", 1, nif_cancel, 0},
    {"close", 1, nif_close, 0},
    {"state", 1, nif_state, 0},
    {"model_path", 1, nif_model_path, 0},
    {"model_pull", 3, nif_model_pull, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"tokenize", 3, nif_tokenize, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"count_tokens", 3, nif_count_tokens, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"detokenize", 3, nif_detokenize, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"model_info", 1, nif_model_info, 0},
    {"render_chat", 2, nif_render_chat, ERL_NIF_DIRTY_JOB_CPU_BOUND},
};

ERL_NIF_INIT(Elixir.Lmstream.Nif, funcs, nif_load, NULL, nif_upgrade, nif_unload)
