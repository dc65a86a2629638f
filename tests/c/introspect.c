/* The "Introspection" section of lmstream.h on the default model:
** tokenize / count / detokenize round trips, buffer-size protocol, model
** metadata, chat rendering, and the errors each call documents. Also the
** regression for invalid UTF-8 in request JSON (issue 11): it is
** LMS_ERR_BAD_JSON naming the byte, never a silent U+FFFD. And the
** logprobs a chunk carries (ABI 2), through both ways of reading chunks.
** And usage.cached_tokens (ABI 4): a prompt's first send prefills it all,
** the same prompt again reuses the cache's prefix.
**
**   introspect MODEL.gguf */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lmstream.h"

static int failures;

#define CHECK(cond, ...) do { \
    if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                   fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void test_tokens(lms_runtime rt) {
    const char *text = "Hello, café 😀";
    char err[256];
    size_t n = 0;
    int rc = lms_count_tokens(rt, text, strlen(text), 0, &n, err, sizeof err);
    CHECK(rc == LMS_OK && n > 2, "count: rc %d n %zu (%s)", rc, n, err);

    /* Measure with no buffer, then fill. */
    size_t need = 0;
    rc = lms_tokenize(rt, text, strlen(text), 0, NULL, 0, &need, err, sizeof err);
    CHECK(rc == LMS_ERR_BUFFER_TOO_SMALL && need == n, "measure: rc %d need %zu", rc, need);
    int32_t ids[64];
    size_t got = 0;
    rc = lms_tokenize(rt, text, strlen(text), 0, ids, 64, &got, err, sizeof err);
    CHECK(rc == LMS_OK && got == n, "tokenize: rc %d got %zu (%s)", rc, got, err);

    char buf[128];
    size_t len = 0;
    rc = lms_detokenize(rt, ids, got, 0, buf, sizeof buf, &len, err, sizeof err);
    CHECK(rc == LMS_OK && len == strlen(text) && strcmp(buf, text) == 0,
          "round trip: rc %d '%s' (%s)", rc, buf, err);
    /* Too small: nothing written but the length. */
    char tiny[4] = "xyz";
    rc = lms_detokenize(rt, ids, got, 0, tiny, sizeof tiny, &len, err, sizeof err);
    CHECK(rc == LMS_ERR_BUFFER_TOO_SMALL && len == strlen(text) && strcmp(tiny, "xyz") == 0,
          "detokenize too small: rc %d len %zu", rc, len);

    /* Special tokens: parsed only with the flag; skipped on request. */
    const char *sp = "<|im_start|>";
    rc = lms_tokenize(rt, sp, strlen(sp), LMS_TOKENIZE_PARSE_SPECIAL, ids, 64, &got, err, sizeof err);
    CHECK(rc == LMS_OK && got == 1 && ids[0] == 1, "parse special: rc %d got %zu id %d", rc, got, ids[0]);
    rc = lms_count_tokens(rt, sp, strlen(sp), 0, &n, err, sizeof err);
    CHECK(rc == LMS_OK && n > 1, "literal special: %zu tokens", n);
    rc = lms_detokenize(rt, ids, 1, LMS_DETOKENIZE_SKIP_SPECIAL, buf, sizeof buf, &len, err, sizeof err);
    CHECK(rc == LMS_OK && len == 0, "skip special: rc %d len %zu", rc, len);

    /* Errors. */
    int32_t bad[2] = {5, 1 << 30};
    rc = lms_detokenize(rt, bad, 2, 0, buf, sizeof buf, &len, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_ARGUMENT && strstr(err, "index 1"), "bad id: rc %d (%s)", rc, err);
    rc = lms_tokenize(rt, text, strlen(text), 4, ids, 64, &got, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_ARGUMENT, "bad flags: rc %d", rc);
    rc = lms_tokenize(rt, NULL, 3, 0, ids, 64, &got, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_ARGUMENT, "NULL text: rc %d", rc);
    rc = lms_count_tokens(rt, "", 0, 0, &n, err, sizeof err);
    CHECK(rc == LMS_OK && n == 0, "empty text: rc %d n %zu", rc, n);
}

static void test_info(lms_runtime rt) {
    size_t need = 0;
    int rc = lms_model_info(rt, NULL, 0, &need);
    CHECK(rc == LMS_ERR_BUFFER_TOO_SMALL && need > 100, "info measure: rc %d need %zu", rc, need);
    char *buf = malloc(need + 1);
    size_t len = 0;
    rc = lms_model_info(rt, buf, need + 1, &len);
    CHECK(rc == LMS_OK && len == need && strlen(buf) == len, "info: rc %d", rc);
    CHECK(strstr(buf, "\"architecture\":\"llama\"") && strstr(buf, "\"vocab_size\":49152") &&
          strstr(buf, "\"context_length\":8192") && strstr(buf, "\"chat_renderer\":\"jinja\"") &&
          strstr(buf, "\"eos\":{\"id\":2,\"text\":\"\\u003c|im_end|\\u003e\""),
          "info content: %.300s", buf);
    free(buf);
}

static void test_render(lms_runtime rt) {
    char buf[1024], err[256];
    size_t len = 0;
    int rc = lms_render_chat(rt, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\"},"
                                 "{\"role\":\"user\",\"content\":\"Hi\"}]}",
                             buf, sizeof buf, &len, err, sizeof err);
    const char *want = "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\n";
    CHECK(rc == LMS_OK && strcmp(buf, want) == 0 && len == strlen(want), "render: rc %d '%s' (%s)", rc, buf, err);
    rc = lms_render_chat(rt, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"add_generation_prompt\":false}",
                         buf, sizeof buf, &len, err, sizeof err);
    CHECK(rc == LMS_OK && strstr(buf, "<|im_start|>assistant") == NULL && strstr(buf, "Hi<|im_end|>\n"),
          "no generation prompt: rc %d '%s'", rc, buf);
    rc = lms_render_chat(rt, "{\"messages\":[]}", buf, sizeof buf, &len, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_REQUEST, "empty messages: rc %d (%s)", rc, err);
    rc = lms_render_chat(rt, "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}",
                         buf, sizeof buf, &len, err, sizeof err);
    CHECK(rc == LMS_ERR_BAD_JSON && strstr(err, "0xe9"), "render invalid UTF-8: rc %d (%s)", rc, err);
}

/* Issue 11: `stream "$(printf 'caf\xe9')"` sent the byte on and got U+FFFD. */
static void test_invalid_utf8(lms_runtime rt) {
    lms_channel ch;
    char err[256] = "";
    CHECK(lms_channel_create(&ch) == LMS_OK, "channel");
    const char *req = "{\"prompt\":\"caf\xe9\",\"max_tokens\":4}";
    int rc = lms_submit(rt, req, &ch, 1, err, sizeof err);
    CHECK(rc == LMS_ERR_BAD_JSON, "submit invalid UTF-8: rc %d (%s)", rc, err);
    CHECK(strstr(err, "invalid UTF-8 byte 0xe9") && strstr(err, "byte 14"), "message names the byte: %s", err);
    lms_channel_release(ch);
}

/* Checks one answer's logprobs, greedy: one per id, each the most likely
** token at its place, alternatives in order, pieces that spell the ids. */
static void check_logprobs(lms_runtime rt, const int32_t *ids, const lms_token_logprob *lps, size_t n, size_t top) {
    char pieces[4096] = "", text[4096];
    size_t used = 0, len = 0;
    for (size_t i = 0; i < n; i++) {
        const lms_token_logprob *lp = &lps[i];
        CHECK(lp->token_id == ids[i], "logprob %zu is for token %d, not %d", i, lp->token_id, ids[i]);
        CHECK(lp->logprob <= 0, "logprob %zu is %g", i, lp->logprob);
        CHECK(lp->n_top == top, "token %zu has %zu alternatives", i, lp->n_top);
        if (lp->n_top > 0) {
            CHECK(lp->top[0].token_id == lp->token_id && lp->top[0].logprob == lp->logprob,
                  "greedy token %zu is not the likeliest", i);
        }
        for (size_t k = 1; k < lp->n_top; k++) {
            CHECK(lp->top[k].logprob <= lp->top[k - 1].logprob, "token %zu: alternatives out of order", i);
        }
        CHECK(used + lp->n_bytes < sizeof pieces, "pieces overflow");
        memcpy(pieces + used, lp->bytes, lp->n_bytes);
        used += lp->n_bytes;
    }
    char err[256];
    int rc = lms_detokenize(rt, ids, n, 0, text, sizeof text, &len, err, sizeof err);
    CHECK(rc == LMS_OK && len == used && memcmp(text, pieces, used) == 0, "pieces do not spell the tokens");
}

static void test_logprobs(lms_runtime rt) {
    const char *req = "{\"prompt\":\"The capital of France is\",\"max_tokens\":12,"
                      "\"logprobs\":true,\"top_logprobs\":5}";
    char err[256] = "";
    lms_chunk *all = NULL;
    int rc = lms_complete(rt, req, &all, err, sizeof err);
    CHECK(rc == LMS_OK && all, "complete: rc %d (%s)", rc, err);
    if (rc != LMS_OK) return;
    CHECK(all->n_logprobs == all->n_token_ids && all->n_token_ids > 0, "complete: %zu logprobs for %zu ids",
          all->n_logprobs, all->n_token_ids);
    check_logprobs(rt, all->token_ids, all->logprobs, all->n_logprobs, 5);

    /* The same through pop_batch into a buffer that starts off alignment. */
    lms_channel ch;
    CHECK(lms_channel_create(&ch) == LMS_OK, "channel");
    rc = lms_submit(rt, req, &ch, 1, err, sizeof err);
    CHECK(rc == LMS_OK, "submit: rc %d (%s)", rc, err);
    static char buf[1 << 16];
    lms_chunk chunks[8];
    int32_t ids[64];
    lms_token_logprob lps[64];
    size_t n = 0, got = 0;
    for (int done = 0; !done && rc >= 0;) {
        rc = lms_channel_pop_batch(ch, chunks, 8, buf + 3, sizeof buf - 3, 10000, &got);
        for (size_t i = 0; rc == LMS_OK && i < got; i++) {
            const lms_chunk *c = &chunks[i];
            CHECK(c->n_logprobs == c->n_token_ids, "chunk: %zu logprobs for %zu ids", c->n_logprobs, c->n_token_ids);
            CHECK(((uintptr_t)c->logprobs & 7) == 0, "logprobs misaligned");
            for (size_t k = 0; k < c->n_token_ids && n < 64; k++, n++) {
                ids[n] = c->token_ids[k];
                lps[n] = c->logprobs[k];
            }
            /* Copied by value: their pointers go stale with the next
            ** pop, and only the values are compared below. */
            done = done || c->finished;
        }
    }
    CHECK(n == all->n_token_ids, "streamed %zu tokens, complete %zu", n, all->n_token_ids);
    for (size_t k = 0; k < n && k < all->n_token_ids; k++) {
        double d = lps[k].logprob - all->logprobs[k].logprob;
        CHECK(ids[k] == all->token_ids[k] && d < 1e-5 && d > -1e-5,
              "streamed logprob %zu differs from complete's", k);
    }
    lms_channel_release(ch);
    lms_chunk_free(all);

    /* Not asked for: none. */
    rc = lms_complete(rt, "{\"prompt\":\"Hi\",\"max_tokens\":2}", &all, err, sizeof err);
    CHECK(rc == LMS_OK && all->logprobs == NULL && all->n_logprobs == 0, "unasked logprobs: rc %d", rc);
    if (rc == LMS_OK) lms_chunk_free(all);
    rc = lms_complete(rt, "{\"prompt\":\"Hi\",\"top_logprobs\":2}", &all, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_REQUEST && strstr(err, "needs \"logprobs\": true"), "top without logprobs: rc %d (%s)", rc, err);

    /* The response budget: 64 batch items that may each fill what the
       256-token context leaves, with 1 + 20 log-probabilities a token, ask
       for more than LMS allows; refused as an invalid request, not run. */
    char big[1024];
    size_t at = (size_t)snprintf(big, sizeof big, "{\"prompts\":[");
    for (int k = 0; k < 64; k++) at += (size_t)snprintf(big + at, sizeof big - at, "%s\"Hi\"", k ? "," : "");
    snprintf(big + at, sizeof big - at, "],\"logprobs\":true,\"top_logprobs\":20}");
    lms_channel many[64];
    for (int k = 0; k < 64; k++) CHECK(lms_channel_create(&many[k]) == LMS_OK, "channel %d", k);
    rc = lms_submit(rt, big, many, 64, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_REQUEST && strstr(err, "too many log-probabilities"), "logprob budget: rc %d (%s)", rc, err);
    for (int k = 0; k < 64; k++) lms_channel_release(many[k]);
    /* One prompt, bounded by max_tokens instead. */
    rc = lms_complete(rt, "{\"prompt\":\"Hi\",\"logprobs\":true,\"top_logprobs\":20,\"max_tokens\":20000}", &all, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_REQUEST && strstr(err, "too many log-probabilities"), "logprob budget by max_tokens: rc %d (%s)", rc, err);
    if (rc == LMS_OK) lms_chunk_free(all);
}

/* Runs first, on the runtime's one fresh slot: nothing is cached before the
** first send. The second send finds the first one's prompt in that slot's
** KV and prefills only its last token (which must be computed again for
** the logits). */
static void test_cached_tokens(lms_runtime rt) {
    const char *req = "{\"prompt\":\"Zebras graze on the wide plains of the Serengeti at dawn\","
                      "\"max_tokens\":3,\"temperature\":0}";
    char err[256];
    lms_chunk *first = NULL, *again = NULL;
    int rc = lms_complete(rt, req, &first, err, sizeof err);
    CHECK(rc == LMS_OK, "first send: rc %d (%s)", rc, err);
    rc = lms_complete(rt, req, &again, err, sizeof err);
    CHECK(rc == LMS_OK, "second send: rc %d (%s)", rc, err);
    if (first && again) {
        const lms_usage *u1 = &first->usage, *u2 = &again->usage;
        CHECK(u1->prompt_tokens > 5 && u1->cached_tokens == 0,
              "first send: %lld prompt tokens, %lld cached", (long long)u1->prompt_tokens, (long long)u1->cached_tokens);
        CHECK(u2->prompt_tokens == u1->prompt_tokens && u2->cached_tokens > 0 && u2->cached_tokens < u2->prompt_tokens,
              "second send: %lld prompt tokens, %lld cached", (long long)u2->prompt_tokens, (long long)u2->cached_tokens);
        /* The fields after usage moved in ABI 4: still where the header says. */
        CHECK(again->n_token_ids == (size_t)u2->generated_tokens && u2->generated_tokens > 0 && again->logprobs == NULL && again->n_logprobs == 0 && again->has_reply == 0,
              "fields after usage: %zu ids, logprobs %p/%zu, has_reply %d", again->n_token_ids,
              (const void *)again->logprobs, again->n_logprobs, again->has_reply);
    }
    lms_chunk_free(first);
    lms_chunk_free(again);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: introspect MODEL.gguf\n");
        return 2;
    }
    char cfg[1024], err[512];
    snprintf(cfg, sizeof cfg, "{\"model_path\":\"%s\",\"max_slots\":1,\"context_length\":256}", argv[1]);
    lms_runtime rt;
    int rc = lms_runtime_create(cfg, &rt, err, sizeof err);
    if (rc != LMS_OK) {
        fprintf(stderr, "introspect: cannot load %s: %s (%s)\n", argv[1], lms_strerror(rc), err);
        return 1;
    }
    test_cached_tokens(rt);
    test_tokens(rt);
    test_info(rt);
    test_render(rt);
    test_invalid_utf8(rt);
    test_logprobs(rt);
    lms_runtime_destroy(rt);

    /* A destroyed runtime's handle, and a backend with no tokenizer. */
    size_t n;
    rc = lms_count_tokens(rt, "x", 1, 0, &n, err, sizeof err);
    CHECK(rc == LMS_ERR_INVALID_HANDLE, "stale handle: rc %d", rc);
    rc = lms_runtime_create("{\"backend\":\"replay\",\"vocab\":[\"61\"],\"eos_id\":0}", &rt, err, sizeof err);
    CHECK(rc == LMS_OK, "replay: %s", err);
    rc = lms_count_tokens(rt, "a", 1, 0, &n, err, sizeof err);
    CHECK(rc == LMS_ERR_STATE, "replay tokenize: rc %d", rc);
    rc = lms_model_info(rt, NULL, 0, &n);
    CHECK(rc == LMS_ERR_STATE, "replay info: rc %d", rc);
    lms_runtime_destroy(rt);

    if (failures) {
        fprintf(stderr, "introspect: %d failures\n", failures);
        return 1;
    }
    printf("introspect: ok\n");
    return 0;
}
