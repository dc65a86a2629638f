/*
** stream.c — stream a generation through liblmstream from C.
**
**   stream [--replay] [--model PATH] [--backend cpu|cuda] [PROMPT]
**   stream --help
**
** Waits on the channel's readiness descriptor with poll() and drains it with
** lms_channel_pop_batch, the way an event loop would, printing text as it
** arrives. --replay runs the scripted test backend instead of a model: it
** "generates" a fixed answer byte by byte, splitting multi-byte characters
** across tokens, so you can watch the stream stay well-formed UTF-8.
*/
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmstream.h"

static const char *answer =
    "Hello from lmstream! This answer is replayed one byte per token, "
    "so multi-byte characters such as \xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x98\x80 arrive split "
    "across tokens and are still printed whole.\n";

/* A replay runtime whose vocabulary is the 256 single bytes plus an end token. */
static int create_replay(lms_runtime *rt, char *err, size_t err_size) {
    char *cfg = malloc(256 * 5 + 256);
    char *p = cfg + sprintf(cfg, "{\"backend\":\"replay\",\"eos_id\":256,\"vocab\":[");
    for (int b = 0; b < 256; b++) p += sprintf(p, "\"%02x\",", b);
    sprintf(p, "\"\"],\"special_ids\":[256]}");
    int rc = lms_runtime_create(cfg, rt, err, err_size);
    free(cfg);
    return rc;
}

static char *replay_request(void) {
    size_t n = strlen(answer);
    char *req = malloc(n * 6 + 128);
    char *p = req + sprintf(req, "{\"prompt\":\"demo\",\"delay_ms\":15,\"script\":[");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%s[%u]", i ? "," : "", (unsigned char)answer[i]);
    sprintf(p, "]}");
    return req;
}

/* JSON-escapes s into a new string. */
static char *json_string(const char *s) {
    char *out = malloc(strlen(s) * 6 + 3), *p = out;
    *p++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *p++ = '\\'; *p++ = (char)c; }
        else if (c < 0x20) p += sprintf(p, "\\u%04x", c);
        else *p++ = (char)c;
    }
    *p++ = '"';
    *p = 0;
    return out;
}

#define DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static void usage(FILE *f) {
    fprintf(f,
            "usage: stream [--model PATH] [--backend cpu|cuda] [PROMPT]\n"
            "       stream --replay\n"
            "\n"
            "Streams a chat answer to PROMPT from a GGUF model through liblmstream,\n"
            "printing the text as it arrives and a usage line at the end.\n"
            "\n"
            "  --model PATH  the model (default " DEFAULT_MODEL ";\n"
            "                `make model` at the repository root fetches it)\n"
            "  --backend B   run the model on the CPU (cpu, the default) or an NVIDIA\n"
            "                GPU (cuda: needs its driver and NVRTC, found at run time)\n"
            "  --replay      stream a scripted answer from the test backend, no model\n"
            "  -h, --help    show this help\n");
}

/* Load progress on a terminal: one line redrawn in place. Elsewhere (a
** log, a test) it would only be noise, so nothing is shown. */
static int show_progress(const char *stage, double fraction, void *user) {
    (void)user;
    int width = 30, filled = (int)(fraction * width + 0.5);
    fprintf(stderr, "\rloading model %-12s [", stage);
    for (int i = 0; i < width; i++) fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%", (int)(fraction * 100 + 0.5));
    if (!strcmp(stage, "ready")) fputc('\n', stderr);
    fflush(stderr);
    return 0;
}

int main(int argc, char **argv) {
    int replay = 0;
    const char *model = DEFAULT_MODEL;
    const char *backend = "cpu";
    const char *prompt = NULL;
    /* Every argument is checked before anything loads: a mistake costs no
    ** model load, and "--help" is never taken for a prompt. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--replay")) {
            replay = 1;
        } else if (!strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "stream: --model needs a path\n");
                usage(stderr);
                return 2;
            }
            model = argv[++i];
        } else if (!strcmp(argv[i], "--backend")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "stream: --backend needs a name (cpu or cuda)\n");
                return 2;
            }
            backend = argv[++i];
        } else if (!strcmp(argv[i], "--")) {
            if (i + 2 != argc || prompt) {
                fprintf(stderr, "stream: one prompt after --, quoted as one argument\n");
                return 2;
            }
            prompt = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "stream: unknown option %s (a prompt starting with '-' goes after --)\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (prompt) {
            fprintf(stderr, "stream: one prompt, quoted as one argument (got \"%s\" and \"%s\")\n", prompt, argv[i]);
            return 2;
        } else {
            prompt = argv[i];
        }
    }
    if (!prompt) prompt = "What is the capital of France?";
    struct stat st;
    if (!replay && stat(model, &st) != 0) {
        fprintf(stderr, "stream: no model at %s\n", model);
        if (!strcmp(model, DEFAULT_MODEL))
            fprintf(stderr, "Run `make model` at the repository root to fetch it, then run this from there.\n");
        else
            fprintf(stderr, "Pass the path of a .gguf file (`make model` fetches the default one into models/).\n");
        return 1;
    }
    if (lms_abi_version() != LMS_ABI_VERSION) {
        fprintf(stderr, "liblmstream ABI %d, header %d\n", lms_abi_version(), LMS_ABI_VERSION);
        return 1;
    }

    char err[1024];
    lms_runtime rt;
    char *req;
    int rc;
    if (replay) {
        rc = create_replay(&rt, err, sizeof err);
        req = replay_request();
    } else {
        char *m = json_string(model), *pr = json_string(prompt), *b = json_string(backend);
        char *cfg = malloc(strlen(m) + strlen(b) + 64);
        sprintf(cfg, "{\"backend\":%s,\"model_path\":%s}", b, m);
        free(b);
        rc = lms_runtime_create_with_progress(cfg, isatty(2) ? show_progress : NULL, NULL, &rt, err, sizeof err);
        req = malloc(strlen(pr) + 128);
        sprintf(req, "{\"messages\":[{\"role\":\"user\",\"content\":%s}],\"max_tokens\":200}", pr);
        free(cfg); free(m); free(pr);
    }
    if (rc != LMS_OK) {
        fprintf(stderr, "lms_runtime_create: %s: %s\n", lms_strerror(rc), err);
        return 1;
    }

    lms_channel ch;
    if ((rc = lms_channel_create(&ch)) != LMS_OK) {
        fprintf(stderr, "lms_channel_create: %s\n", lms_strerror(rc));
        return 1;
    }
    if ((rc = lms_submit(rt, req, &ch, 1, err, sizeof err)) != LMS_OK) {
        fprintf(stderr, "lms_submit: %s: %s\n", lms_strerror(rc), err);
        return 1;
    }
    free(req);

    int fd;
    if ((rc = lms_channel_fd(ch, &fd)) != LMS_OK) {
        fprintf(stderr, "lms_channel_fd: %s\n", lms_strerror(rc));
        return 1;
    }
    lms_chunk chunks[32];
    static char buf[1 << 16];
    int done = 0;
    while (!done) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        poll(&pfd, 1, -1);
        size_t n;
        rc = lms_channel_pop_batch(ch, chunks, 32, buf, sizeof buf, 0, &n);
        if (rc == LMS_EMPTY) continue;
        if (rc != LMS_OK) { fprintf(stderr, "pop: %s\n", lms_strerror(rc)); break; }
        for (size_t i = 0; i < n; i++) {
            fwrite(chunks[i].text, 1, chunks[i].text_len, stdout);
            fflush(stdout);
            if (chunks[i].finished) {
                const lms_usage *u = &chunks[i].usage;
                fprintf(stderr, "\n[%s%s%s] %lld tokens, first after %.1f ms, then %.1f ms/token\n",
                        lms_finish_reason_name(chunks[i].reason),
                        chunks[i].error_code ? ": " : "", chunks[i].error_message,
                        (long long)u->generated_tokens, u->ttft_ms, u->tpot_ms);
                done = 1;
            }
        }
    }
    lms_channel_release(ch);
    lms_runtime_destroy(rt);
    return 0;
}
