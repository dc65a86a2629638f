# What a conversation becomes and how text tokenizes, from the runtime
# (README, "Prompt or messages"); run from the repository root.
import lmstream

chat = [{"role": "user", "content": "Hi"}]
with lmstream.Runtime(model_path="models/SmolLM2-135M-Instruct.Q4_1.gguf") as rt:
    print(rt.render_chat(chat))        # the exact prompt text messages become
    print(rt.count_tokens("Hello"), rt.tokenize("Hello"), rt.detokenize([19556]))
    print(rt.model_info()["vocab_size"])  # also architecture, context, special tokens, template
    for c in rt.create_chat_completion(chat, stream=True, max_tokens=32):  # OpenAI-shaped dicts
        print(c["choices"][0]["delta"].get("content", ""), end="")
