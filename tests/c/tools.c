/* Tool calls through the C door (issue 47), on a model whose template
** renders tools (Qwen2.5-Coder, Hermes-style <tool_call>): a request with
** a get_weather tool and "tool_choice": "required" read with
** lms_channel_wait_pop, with lms_channel_pop_batch and with lms_complete;
** every chunk carries the parsed reply (has_reply 1), its tool-call deltas
** assemble by index into one get_weather call whose arguments are a JSON
** object with "city", the content is empty and the raw text keeps the
** call. A chat without tools has no reply (has_reply 0, content "",
** tool_calls NULL); malformed "tools" fail at submit naming the field; and
** lms_render_chat shows the tools in the prompt.
**
**   tools MODEL.gguf */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lmstream.h"

static int failures;

#define CHECK(cond, ...) do { \
    if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                   fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

#define WAIT_MS 60000
#define ASK "\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather like in Paris today?\"}]"
#define WEATHER "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"," \
    "\"description\":\"Get the current weather in a city\",\"parameters\":{\"type\":\"object\"," \
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"type\":\"string\"," \
    "\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\",\"unit\"]}}}"
#define WITH_TOOLS "{" ASK ",\"tools\":[" WEATHER "]}"
#define REQUIRED "{" ASK ",\"tools\":[" WEATHER "],\"tool_choice\":\"required\",\"max_tokens\":60}"

/* ---- An answer assembled from its chunks -------------------------------- */

#define MAX_CALLS 8

typedef struct {
    char id[64], name[64], args[1024];
    size_t args_len;
} call;

typedef struct {
    char text[4096], content[4096];
    size_t text_len, content_len;
    call calls[MAX_CALLS];
    int n_calls;
    int chunks, replies, finished, reason;
} answer;

static void append(char *dst, size_t *len, size_t cap, const char *src, size_t n) {
    CHECK(*len + n < cap, "answer overflows its %zu-byte buffer", cap);
    if (*len + n >= cap) return;
    memcpy(dst + *len, src, n);
    *len += n;
    dst[*len] = 0;
}

/* Adds a chunk: its text, its content, and its tool-call deltas by index
** (a call's first delta brings its id and name, later ones only more of
** its arguments, as OpenAI streams them). */
static void take(answer *a, const lms_chunk *c) {
    a->chunks++;
    a->replies += c->has_reply != 0;
    append(a->text, &a->text_len, sizeof a->text, c->text, c->text_len);
    CHECK(c->content != NULL && c->content[c->content_len] == 0, "content is not a NUL-terminated string");
    CHECK(c->reasoning != NULL && c->reasoning_len == 0, "reasoning from a model that does not think");
    append(a->content, &a->content_len, sizeof a->content, c->content, c->content_len);
    CHECK((c->tool_calls == NULL) == (c->n_tool_calls == 0), "tool_calls %p with n_tool_calls %zu",
          (const void *)c->tool_calls, c->n_tool_calls);
    for (size_t i = 0; i < c->n_tool_calls; i++) {
        const lms_tool_call_delta *d = &c->tool_calls[i];
        CHECK(d->index >= 0 && d->index < MAX_CALLS, "delta index %d", d->index);
        if (d->index < 0 || d->index >= MAX_CALLS) continue;
        call *k = &a->calls[d->index];
        if (d->id[0]) {
            CHECK(d->index == a->n_calls, "call %d begins after %d calls", d->index, a->n_calls);
            CHECK(d->name[0] != 0, "call %d's first delta has an id but no name", d->index);
            snprintf(k->id, sizeof k->id, "%s", d->id);
            snprintf(k->name, sizeof k->name, "%s", d->name);
            if (d->index == a->n_calls) a->n_calls++;
        } else {
            CHECK(d->index < a->n_calls && d->name[0] == 0, "delta of call %d before its id and name", d->index);
        }
        CHECK(d->arguments[d->arguments_len] == 0 && strlen(d->arguments) == d->arguments_len,
              "arguments of call %d are not %zu bytes and a NUL", d->index, d->arguments_len);
        append(k->args, &k->args_len, sizeof k->args, d->arguments, d->arguments_len);
    }
    if (c->finished) {
        a->finished++;
        a->reason = c->reason;
    }
}

/* A JSON object, checked without a JSON library: it opens with { and
** closes with }, and its braces balance outside strings. */
static int is_object(const char *s) {
    while (*s == ' ' || *s == '\n') s++;
    if (*s != '{') return 0;
    int depth = 0, in_string = 0;
    for (; *s; s++) {
        if (in_string) {
            if (*s == '\\' && s[1]) s++;
            else if (*s == '"') in_string = 0;
        } else if (*s == '"') {
            in_string = 1;
        } else if (*s == '{') {
            depth++;
        } else if (*s == '}' && --depth == 0) {
            for (s++; *s == ' ' || *s == '\n'; s++) {}
            return *s == 0;
        }
    }
    return 0;
}

/* The forced answer: replies on every chunk, one get_weather call with
** arguments naming a city, nothing said besides, the call in the text. */
static void check_call(const answer *a, const char *how) {
    CHECK(a->finished == 1, "%s: %d terminal chunks", how, a->finished);
    CHECK(a->reason == LMS_FINISH_END_ID, "%s: finished by %s", how, lms_finish_reason_name(a->reason));
    CHECK(a->replies == a->chunks, "%s: %d of %d chunks have a reply", how, a->replies, a->chunks);
    CHECK(a->n_calls == 1, "%s: %d calls in '%s'", how, a->n_calls, a->text);
    if (a->n_calls < 1) return;
    const call *k = &a->calls[0];
    CHECK(strncmp(k->id, "call_", 5) == 0, "%s: call id '%s'", how, k->id);
    CHECK(strcmp(k->name, "get_weather") == 0, "%s: call of '%s'", how, k->name);
    CHECK(is_object(k->args) && strstr(k->args, "\"city\""), "%s: arguments '%s'", how, k->args);
    CHECK(a->content_len == 0, "%s: content '%s' beside the call", how, a->content);
    CHECK(strstr(a->text, "<tool_call>") && strstr(a->text, "get_weather") && strstr(a->text, "\"city\""),
          "%s: the raw text does not hold the call: '%s'", how, a->text);
}

/* ---- The tests ------------------------------------------------------------ */

/* Submits req on a new channel; 0 (and no channel left) on failure. */
static int submit(lms_runtime rt, const char *req, lms_channel *ch) {
    char err[512] = "";
    CHECK(lms_channel_create(ch) == LMS_OK, "channel");
    int rc = lms_submit(rt, req, ch, 1, err, sizeof err);
    CHECK(rc == LMS_OK, "submit: %s (%s)", lms_strerror(rc), err);
    if (rc != LMS_OK) lms_channel_release(*ch);
    return rc == LMS_OK;
}

static void read_wait_pop(lms_channel ch, answer *a) {
    for (;;) {
        lms_chunk *c = NULL;
        int rc = lms_channel_wait_pop(ch, WAIT_MS, &c);
        CHECK(rc == LMS_OK, "wait_pop: %s", lms_strerror(rc));
        if (rc != LMS_OK) return;
        take(a, c);
        int last = c->finished;
        lms_chunk_free(c);
        if (last) return;
    }
}

/* pop_batch lays chunks and their calls out in the caller's buffer; it
** starts off alignment here, as a caller's byte buffer may. */
static void read_pop_batch(lms_channel ch, answer *a) {
    static char buf[1 << 16];
    lms_chunk chunks[4];
    for (;;) {
        size_t n = 0;
        int rc = lms_channel_pop_batch(ch, chunks, 4, buf + 3, sizeof buf - 3, WAIT_MS, &n);
        CHECK(rc == LMS_OK, "pop_batch: %s", lms_strerror(rc));
        if (rc != LMS_OK) return;
        for (size_t i = 0; i < n; i++) {
            CHECK(((uintptr_t)chunks[i].tool_calls & 7) == 0, "tool_calls misaligned");
            take(a, &chunks[i]);
            if (chunks[i].finished) return;
        }
    }
}

static void test_required_call(lms_runtime rt) {
    static answer streamed, batched, whole;
    lms_channel ch;
    if (!submit(rt, REQUIRED, &ch)) return;
    read_wait_pop(ch, &streamed);
    lms_channel_release(ch);
    check_call(&streamed, "wait_pop");

    if (!submit(rt, REQUIRED, &ch)) return;
    read_pop_batch(ch, &batched);
    lms_channel_release(ch);
    check_call(&batched, "pop_batch");

    lms_chunk *all = NULL;
    char err[512] = "";
    int rc = lms_complete(rt, REQUIRED, &all, err, sizeof err);
    CHECK(rc == LMS_OK && all, "complete: %s (%s)", lms_strerror(rc), err);
    if (rc != LMS_OK) return;
    take(&whole, all);
    lms_chunk_free(all);
    check_call(&whole, "complete");

    /* Greedy: the three ways read the same call. */
    if (streamed.n_calls == 1 && batched.n_calls == 1 && whole.n_calls == 1) {
        printf("tools: %s %s(%s) in %d chunks\n", streamed.calls[0].id, streamed.calls[0].name,
               streamed.calls[0].args, streamed.chunks);
        CHECK(strcmp(streamed.calls[0].args, batched.calls[0].args) == 0 &&
              strcmp(streamed.calls[0].args, whole.calls[0].args) == 0,
              "arguments differ: '%s', '%s', '%s'", streamed.calls[0].args, batched.calls[0].args,
              whole.calls[0].args);
    }
}

/* A chat without tools from a model that does not think: no reply. */
static void test_no_tools(lms_runtime rt) {
    static answer a;
    lms_channel ch;
    if (!submit(rt, "{" ASK ",\"max_tokens\":6}", &ch)) return;
    for (int last = 0; !last;) {
        lms_chunk *c = NULL;
        int rc = lms_channel_wait_pop(ch, WAIT_MS, &c);
        CHECK(rc == LMS_OK, "wait_pop: %s", lms_strerror(rc));
        if (rc != LMS_OK) break;
        CHECK(c->has_reply == 0 && c->content && c->content[0] == 0 && c->content_len == 0 &&
              c->reasoning && c->reasoning[0] == 0 && c->tool_calls == NULL && c->n_tool_calls == 0,
              "a chunk without tools has a reply: has_reply %d, content '%s', %zu calls",
              c->has_reply, c->content, c->n_tool_calls);
        take(&a, c);
        last = c->finished;
        lms_chunk_free(c);
    }
    lms_channel_release(ch);
    CHECK(a.text_len > 0 && a.reason == LMS_FINISH_LENGTH, "no-tools answer '%s' (%s)", a.text,
          lms_finish_reason_name(a.reason));
}

/* Malformed tools are refused at submit, naming the field, and leave the
** channel unattached: it still takes a request. */
static void test_bad_tools(lms_runtime rt) {
    static const char *bad[] = {
        "{" ASK ",\"tools\":{\"type\":\"function\"}}",
        "{" ASK ",\"tools\":[{\"type\":\"function\"}]}",
        "{" ASK ",\"tools\":[{\"type\":\"retrieval\",\"function\":{\"name\":\"f\"}}]}",
        "{" ASK ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":7}}]}",
        "{" ASK ",\"tools\":[" WEATHER "," WEATHER "]}",
        "{\"prompt\":\"x\",\"tools\":[" WEATHER "]}",
    };
    lms_channel ch;
    CHECK(lms_channel_create(&ch) == LMS_OK, "channel");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "";
        int rc = lms_submit(rt, bad[i], &ch, 1, err, sizeof err);
        CHECK(rc == LMS_ERR_INVALID_REQUEST && strstr(err, "\"tools\""), "bad tools %zu: %s (%s)", i,
              lms_strerror(rc), err);
    }
    char err[512] = "";
    int rc = lms_submit(rt, "{\"prompt\":\"x\",\"max_tokens\":1}", &ch, 1, err, sizeof err);
    CHECK(rc == LMS_OK, "the channel was attached by a refused request: %s (%s)", lms_strerror(rc), err);
    lms_chunk *c = NULL;
    rc = lms_channel_wait_pop(ch, WAIT_MS, &c);
    CHECK(rc == LMS_OK && c->finished, "after the refusals: %s", lms_strerror(rc));
    lms_chunk_free(c);
    lms_channel_release(ch);
}

/* lms_render_chat takes the request's tools: the prompt lists them. */
static void test_render(lms_runtime rt) {
    static char plain[8192], tools[8192];
    char err[512] = "";
    size_t len = 0;
    int rc = lms_render_chat(rt, "{" ASK "}", plain, sizeof plain, &len, err, sizeof err);
    CHECK(rc == LMS_OK, "render: %s (%s)", lms_strerror(rc), err);
    rc = lms_render_chat(rt, WITH_TOOLS, tools, sizeof tools, &len, err, sizeof err);
    CHECK(rc == LMS_OK, "render with tools: %s (%s)", lms_strerror(rc), err);
    CHECK(strstr(tools, "<tools>") && strstr(tools, "get_weather") && strcmp(plain, tools) != 0 &&
          !strstr(plain, "<tools>"), "the tools are not in the prompt: '%s'", tools);
    rc = lms_render_chat(rt, "{" ASK ",\"tools\":[{\"type\":\"function\"}]}", tools, sizeof tools, &len, err,
                         sizeof err);
    CHECK(rc == LMS_ERR_INVALID_REQUEST && strstr(err, "\"tools\""), "render bad tools: %s (%s)",
          lms_strerror(rc), err);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tools MODEL.gguf (a model whose template renders tools)\n");
        return 2;
    }
    if (lms_abi_version() != LMS_ABI_VERSION) {
        fprintf(stderr, "tools: library ABI %d, header %d\n", lms_abi_version(), LMS_ABI_VERSION);
        return 1;
    }
    char cfg[1024], err[512];
    snprintf(cfg, sizeof cfg, "{\"model_path\":\"%s\",\"max_slots\":1,\"context_length\":512,\"spec_budget\":12}",
             argv[1]);
    lms_runtime rt;
    int rc = lms_runtime_create(cfg, &rt, err, sizeof err);
    if (rc != LMS_OK) {
        fprintf(stderr, "tools: cannot load %s: %s (%s)\n", argv[1], lms_strerror(rc), err);
        return 1;
    }
    test_required_call(rt);
    test_no_tools(rt);
    test_bad_tools(rt);
    test_render(rt);
    lms_runtime_destroy(rt);
    if (failures) {
        fprintf(stderr, "tools: %d failures\n", failures);
        return 1;
    }
    printf("tools: ok\n");
    return 0;
}
