# Tool calls (README, "Tool calls and reasoning"): the model calls a function
# with arguments that follow its schema; run from the repository root.
import json

import lmstream

weather = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ask = [{"role": "user", "content": "What is the weather like in Paris?"}]
with lmstream.Runtime(model_path="models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf") as rt:
    r = rt.create_chat_completion(ask, tools=[weather], tool_choice="required", max_tokens=60)
    message = r["choices"][0]["message"]  # OpenAI's: content None, tool_calls, finish_reason "tool_calls"
    for call in message["tool_calls"]:
        print(call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]))
