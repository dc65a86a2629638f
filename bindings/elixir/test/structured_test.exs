defmodule Lmstream.StructuredTest do
  # Structured output through the binding: `response_format:` and
  # `grammar:` reach the library as request fields (nested maps and
  # keyword lists encoded as JSON objects), the output follows them, and a
  # schema or grammar the library refuses comes back as an error naming
  # the construct.
  use ExUnit.Case, async: false

  @model Path.expand("../../../models/SmolLM2-135M-Instruct.Q4_1.gguf", __DIR__)
  @skip if File.exists?(@model), do: false, else: "model file absent: #{@model} (make model)"

  if @skip, do: IO.puts("\nLmstream.StructuredTest skipped: #{@skip}")

  setup_all do
    if @skip do
      :ok
    else
      {:ok, rt} = Lmstream.load(@model, max_slots: 2, context_length: 512)
      on_exit(fn -> Lmstream.close(rt) end)
      {:ok, rt: rt}
    end
  end

  @chat [%{role: "user", content: "Describe a user of a web site as JSON."}]

  @tag skip: @skip
  test "a json_schema response_format validates", %{rt: rt} do
    schema = %{
      type: "object",
      properties: %{
        name: %{type: "string", maxLength: 16},
        age: %{type: "integer"},
        role: %{enum: ["admin", "user", "guest"]},
        tags: %{type: "array", items: %{type: "string", maxLength: 8}, maxItems: 2}
      },
      required: ["name", "age", "role"]
    }

    for extra <- [[], [temperature: 0.8, seed: 3]] do
      {:ok, text, usage} =
        Lmstream.generate(
          rt,
          @chat,
          [
            max_tokens: 200,
            response_format: %{type: "json_schema", json_schema: %{name: "user", schema: schema}}
          ] ++ extra
        )

      assert usage.finish_reason == :end_id, "cut short: #{inspect(text)}"
      doc = Lmstream.JSON.decode!(text)
      assert %{"name" => name, "age" => age, "role" => role} = doc
      assert is_binary(name) and String.length(name) <= 16
      assert is_integer(age)
      assert role in ["admin", "user", "guest"]
      assert Map.keys(doc) -- ["name", "age", "role", "tags"] == []

      if tags = doc["tags"] do
        assert is_list(tags) and length(tags) <= 2 and Enum.all?(tags, &is_binary/1)
      end
    end
  end

  @tag skip: @skip
  test "a keyword-list json_object response_format gives an object", %{rt: rt} do
    {:ok, text, usage} =
      Lmstream.generate(rt, @chat, max_tokens: 120, response_format: [type: "json_object"])

    if usage.finish_reason == :end_id do
      assert is_map(Lmstream.JSON.decode!(text))
    else
      # Cut at max_tokens: still a prefix of an object.
      assert String.starts_with?(String.trim_leading(text), "{")
    end
  end

  @tag skip: @skip
  test "a GBNF grammar constrains the stream", %{rt: rt} do
    chat = [%{role: "user", content: "Is the sky green? Answer yes or no."}]

    grammar = ~S"""
    root ::= answer "."
    answer ::= "yes" | "no"
    """

    chunks = rt |> Lmstream.stream(chat, max_tokens: 10, grammar: grammar) |> Enum.to_list()
    text = Enum.map_join(chunks, & &1.text)
    assert text in ["yes.", "no."]
    assert List.last(chunks).reason == :end_id
  end

  @tag skip: @skip
  test "refused schemas and grammars name the construct", %{rt: rt} do
    assert {:error, {:invalid_request, msg}} =
             Lmstream.generate(rt, @chat, grammar: "root ::= undefined_rule")

    assert msg =~ "undefined_rule"

    assert {:error, {:invalid_request, msg}} =
             Lmstream.generate(rt, @chat,
               response_format: %{
                 type: "json_schema",
                 json_schema: %{name: "x", schema: %{type: "nope"}}
               }
             )

    assert msg =~ "nope"

    assert {:error, {:invalid_request, _}} =
             Lmstream.generate(rt, @chat,
               grammar: "root ::= \"a\"",
               response_format: %{type: "json_object"}
             )
  end
end
