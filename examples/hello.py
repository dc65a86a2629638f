import lmstream

with lmstream.Runtime(model_path="models/SmolLM2-135M-Instruct.Q4_1.gguf") as rt:
    for chunk in rt.generate(messages=[{"role": "user", "content": "Hi!"}], max_tokens=64):
        print(chunk.text, end="", flush=True)
    print()
    # async for chunk in rt.generate(...) works the same inside asyncio.
