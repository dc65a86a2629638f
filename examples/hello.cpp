#include <iostream>
#include "lmstream.hpp"

int main() try {
    lmstream::Runtime rt(R"({"model_path": "models/SmolLM2-135M-Instruct.Q4_1.gguf"})");
    lmstream::Channel ch;
    rt.submit(R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 64})", ch);
    while (auto c = ch.wait_pop()) {  // empty after the terminal chunk
        std::cout << c->text << std::flush;
        if (c->reason == LMS_FINISH_ERROR) throw lmstream::Error(c->error_code, "stream", c->error_message);
    }
    std::cout << '\n';
    // Or ch.consume([](const lmstream::Chunk &c) { ... }), or ch.pop_batch(vec).
} catch (const lmstream::Error &e) {  // every failed call throws; code() is the LMS_ERR_*
    std::cerr << e.what() << '\n';
    return 1;
}
