{:ok, rt} = Lmstream.load("models/SmolLM2-135M-Instruct.Q4_1.gguf", max_slots: 4)

rt
|> Lmstream.stream([%{role: "user", content: "Hi!"}], max_tokens: 64)
|> Enum.each(&IO.write(&1.text))

# As messages: {ref, {:chunk, ids, text}} ..., then exactly one
# {ref, {:done, reason, usage}} or {ref, {:error, code, message}}.
{:ok, ref} = Lmstream.subscribe(rt, "Once upon a time", max_tokens: 32)

read = fn read ->
  receive do
    {^ref, {:chunk, _ids, text}} -> IO.write(text) && read.(read)
    {^ref, {:done, reason, _usage}} -> IO.puts("\n[#{reason}]")
    {^ref, {:error, code, message}} -> raise "error #{code}: #{message}"
  end
end

read.(read)
