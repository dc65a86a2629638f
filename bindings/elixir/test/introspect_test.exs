defmodule Lmstream.IntrospectTest do
  # Introspection on the default model: tokenize / count / detokenize, the
  # metadata, chat rendering (and that a message list is fed exactly that,
  # while a string prompt is raw text), the chat_template override.
  use ExUnit.Case, async: false

  @model Path.expand("../../../models/SmolLM2-135M-Instruct.Q4_1.gguf", __DIR__)
  @skip if File.exists?(@model), do: false, else: "model file absent: #{@model} (make model)"

  if @skip, do: IO.puts("\nLmstream.IntrospectTest skipped: #{@skip}")

  setup_all do
    if @skip do
      :ok
    else
      {:ok, rt} = Lmstream.load(@model, max_slots: 2, context_length: 512)
      on_exit(fn -> Lmstream.close(rt) end)
      {:ok, rt: rt}
    end
  end

  @tag skip: @skip
  test "tokenize and detokenize round trip", %{rt: rt} do
    for text <- ["Hello, world!", "café naïve 中文 😀\n\tend", "<|im_start|>user\nHi<|im_end|>"] do
      {:ok, ids} = Lmstream.tokenize(rt, text)
      assert ids != [] and Enum.all?(ids, &is_integer/1)
      assert {:ok, ^text} = Lmstream.detokenize(rt, ids)
      n = length(ids)
      assert {:ok, ^n} = Lmstream.count_tokens(rt, text)
    end

    assert {:ok, [1]} = Lmstream.tokenize(rt, "<|im_start|>")
    {:ok, literal} = Lmstream.tokenize(rt, "<|im_start|>", parse_special: false)
    assert length(literal) > 1
    assert {:ok, ""} = Lmstream.detokenize(rt, [1], skip_special: true)
    assert {:ok, []} = Lmstream.tokenize(rt, "")
    assert {:error, {:invalid_argument, msg}} = Lmstream.detokenize(rt, [5, 49152])
    assert msg =~ "index 1"
    assert_raise ArgumentError, fn -> Lmstream.detokenize(rt, [-1]) end
    assert_raise ArgumentError, fn -> Lmstream.tokenize(rt, "x", add_special: 1) end
  end

  @tag skip: @skip
  test "model info", %{rt: rt} do
    {:ok, info} = Lmstream.model_info(rt)
    assert info.architecture == "llama"
    assert info.context_length == 8192
    assert info.runtime_context_length == 512
    assert info.vocab_size == 49152
    assert info.bos == %{id: 1, text: "<|im_start|>", end_of_generation: false}
    assert info.eos == %{id: 2, text: "<|im_end|>", end_of_generation: true}
    assert %{id: 0, text: "<|endoftext|>", end_of_generation: true} in info.special_tokens
    assert info.chat_template =~ "<|im_start|>"
    assert info.chat_renderer == "jinja"
  end

  @tag skip: @skip
  test "messages are rendered with the template; a string prompt is raw", %{rt: rt} do
    msgs = [%{role: "system", content: "Be terse."}, [role: "user", content: "Hi"]]
    {:ok, text} = Lmstream.render_chat(rt, msgs)

    assert text ==
             "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" <>
               "<|im_start|>assistant\n"

    {:ok, no_gen} = Lmstream.render_chat(rt, msgs, add_generation_prompt: false)
    refute String.ends_with?(no_gen, "assistant\n")

    {:ok, by_msgs, u1} = Lmstream.generate(rt, msgs, max_tokens: 8)
    {:ok, by_text, _} = Lmstream.generate(rt, text, max_tokens: 8)
    assert by_msgs == by_text
    assert {:ok, u1.prompt_tokens} == Lmstream.count_tokens(rt, text)

    {:ok, _, u2} = Lmstream.generate(rt, "Hi", max_tokens: 1)
    assert {:ok, u2.prompt_tokens} == Lmstream.count_tokens(rt, "Hi")
    assert_raise ArgumentError, fn -> Lmstream.render_chat(rt, []) end
  end

  @tag skip: @skip
  test "a repeated prompt reports cached tokens" do
    # A fresh runtime of one slot: the first send prefills the whole prompt,
    # the same one again finds it in the slot's KV but for the last token.
    {:ok, rt} = Lmstream.load(@model, max_slots: 1, context_length: 256, spec_budget: 8)
    msgs = [%{role: "user", content: "Name three colours of the rainbow."}]
    {:ok, _, first} = Lmstream.generate(rt, msgs, max_tokens: 3)
    {:ok, _, again} = Lmstream.generate(rt, msgs, max_tokens: 3)
    Lmstream.close(rt)
    assert first.cached_tokens == 0 and first.prompt_tokens > 1
    assert again.prompt_tokens == first.prompt_tokens
    assert again.cached_tokens > 0 and again.cached_tokens < again.prompt_tokens
  end

  @tag skip: @skip
  test "a chat_template override renders messages" do
    tmpl = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    {:ok, rt} = Lmstream.load(@model, max_slots: 1, context_length: 256, chat_template: tmpl)
    assert {:ok, %{chat_template: ^tmpl}} = Lmstream.model_info(rt)
    assert {:ok, "[user] Hi\n"} = Lmstream.render_chat(rt, [%{role: "user", content: "Hi"}])
    Lmstream.close(rt)
    assert {:error, {:invalid_handle, _}} = Lmstream.model_info(rt)

    assert {:error, {:invalid_request, msg}} = Lmstream.load(@model, chat_template: "{% for %}")
    assert msg =~ "chat_template"
  end

  test "a backend without a tokenizer says so" do
    {:ok, rt} = Lmstream.replay(vocab: ["3c2f733e", "48"], eos_id: 0)
    assert {:error, {:state, _}} = Lmstream.count_tokens(rt, "x")
    assert {:error, {:state, _}} = Lmstream.model_info(rt)
  end

  test "invalid UTF-8 in request JSON is bad_json with its offset" do
    {:ok, rt} = Lmstream.replay(vocab: ["3c2f733e", "48"], eos_id: 0)

    assert {:error, {:bad_json, msg}} =
             Lmstream.generate(
               rt,
               {:raw_json, <<"{\"prompt\":\"caf", 0xE9, "\",\"script\":[]}">>}
             )

    assert msg =~ "at byte 14: invalid UTF-8 byte 0xe9"
    # Built from terms, a binary that is not UTF-8 is refused before any
    # JSON exists, naming where.
    e = assert_raise ArgumentError, fn -> Lmstream.stream(rt, <<"caf", 0xE9>>, script: []) end
    assert e.message =~ "byte 0xe9 at offset 3"
  end
end
