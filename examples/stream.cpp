/*
** stream.cpp — stream a generation through liblmstream from C++, with the
** RAII wrapper lmstream.hpp. The same program as stream.c:
**
**   stream [--replay] [--model PATH] [PROMPT]
**
** Waits on the channel's readiness descriptor with poll() and drains it with
** Channel::pop_batch, the way an event loop would, printing text as it
** arrives. --replay runs the scripted test backend instead of a model. The
** runtime and the channel release themselves on every way out of main,
** including a thrown lmstream::Error.
*/
#include <poll.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "lmstream.hpp"

static const char answer[] =
    "Hello from lmstream! This answer is replayed one byte per token, "
    "so multi-byte characters such as \xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x98\x80 arrive split "
    "across tokens and are still printed whole.\n";

/* A replay runtime whose vocabulary is the 256 single bytes plus an end token. */
static std::string replay_config() {
    std::string cfg = "{\"backend\":\"replay\",\"eos_id\":256,\"vocab\":[";
    char hex[8];
    for (int b = 0; b < 256; b++) {
        std::snprintf(hex, sizeof hex, "\"%02x\",", b);
        cfg += hex;
    }
    return cfg + "\"\"],\"special_ids\":[256]}";
}

static std::string replay_request() {
    std::string req = "{\"prompt\":\"demo\",\"delay_ms\":15,\"script\":[";
    for (const char *p = answer; *p; p++) {
        if (p != answer) req += ',';
        req += '[' + std::to_string(static_cast<unsigned char>(*p)) + ']';
    }
    return req + "]}";
}

/* s as a JSON string literal. */
static std::string json_string(const std::string &s) {
    std::string out = "\"";
    char esc[8];
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out += esc;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + '"';
}

int main(int argc, char **argv) {
    bool replay = false;
    std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    std::string prompt = "What is the capital of France?";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--replay") replay = true;
        else if (a == "--model" && i + 1 < argc) model = argv[++i];
        else prompt = a;
    }
    if (!lmstream::abi_compatible()) {
        std::cerr << "liblmstream ABI " << lms_abi_version() << ", header " << LMS_ABI_VERSION << "\n";
        return 1;
    }

    try {
        std::string cfg, req;
        if (replay) {
            cfg = replay_config();
            req = replay_request();
        } else {
            cfg = "{\"model_path\":" + json_string(model) + "}";
            req = "{\"messages\":[{\"role\":\"user\",\"content\":" + json_string(prompt) +
                  "}],\"max_tokens\":200}";
        }
        lmstream::Runtime rt(cfg);
        lmstream::Channel ch;
        rt.submit(req, ch);

        struct pollfd pfd = {ch.fd(), POLLIN, 0};
        std::vector<lmstream::Chunk> chunks;
        while (!ch.done()) {
            poll(&pfd, 1, -1);
            if (ch.pop_batch(chunks) != lmstream::Status::ok) continue;
            for (const lmstream::Chunk &c : chunks) {
                std::cout << c.text << std::flush;
                if (c.finished) {
                    std::fprintf(stderr, "\n[%s%s%s] %lld tokens, first after %.1f ms, then %.1f ms/token\n",
                                 c.reason_name(), c.error_code ? ": " : "", c.error_message.c_str(),
                                 static_cast<long long>(c.usage.generated_tokens), c.usage.ttft_ms,
                                 c.usage.tpot_ms);
                }
            }
        }
    } catch (const lmstream::Error &e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
    return 0;
}
