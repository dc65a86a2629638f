defmodule Lmstream.ToolsTest do
  # Tool calls through the binding, on Qwen2.5-Coder 0.5B (its template
  # renders Hermes-style tools): a tool's map encodes into the request, a
  # required call comes back parsed in the chunks' `reply` maps, and an
  # assistant turn's tool_calls (arguments as a map) and the tool's answer
  # render into the prompt.
  use ExUnit.Case, async: false

  alias Lmstream.Chunk

  @model Path.expand("../../../models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", __DIR__)
  # LMSTREAM_REQUIRE_MODELS=1 (make test fetched the models): absent is a failure.
  require_models = System.get_env("LMSTREAM_REQUIRE_MODELS") == "1"

  @skip if require_models or File.exists?(@model),
          do: false,
          else: "model file absent: #{@model} (make model MODEL=qwen2.5-coder-0.5b)"

  if @skip, do: IO.puts("\nLmstream.ToolsTest skipped: #{@skip}")

  @weather %{
    type: "function",
    function: %{
      name: "get_weather",
      description: "Get the current weather in a city",
      parameters: %{
        type: "object",
        properties: %{
          city: %{type: "string", description: "The city's name"},
          unit: %{type: "string", enum: ["celsius", "fahrenheit"]}
        },
        required: ["city", "unit"]
      }
    }
  }
  @ask [%{role: "user", content: "What is the weather like in Paris today?"}]

  setup_all do
    if @skip do
      :ok
    else
      {:ok, rt} = Lmstream.load(@model, max_slots: 2, context_length: 1024)
      on_exit(fn -> Lmstream.close(rt) end)
      {:ok, rt: rt}
    end
  end

  test "join_replies assembles a call's deltas by index" do
    d = fn i, id, name, args -> %{index: i, id: id, name: name, arguments: args} end

    chunks = [
      %Chunk{
        reply: %{
          content: "Let me ",
          reasoning: "hm",
          tool_calls: [d.(0, "call_a", "f", ~s({"city": ))]
        }
      },
      %Chunk{reply: nil},
      %Chunk{
        reply: %{
          content: "check.",
          reasoning: "",
          tool_calls: [d.(1, "call_b", "g", "{}"), d.(0, "", "", ~s("Paris"}))]
        }
      }
    ]

    assert Chunk.join_replies(chunks) == %{
             content: "Let me check.",
             reasoning: "hm",
             tool_calls: [d.(0, "call_a", "f", ~s({"city": "Paris"})), d.(1, "call_b", "g", "{}")]
           }

    assert Chunk.join_replies([%Chunk{}]) == nil
  end

  @tag skip: @skip
  test "a required call comes back parsed in the chunks", %{rt: rt} do
    chunks =
      rt
      |> Lmstream.stream(@ask,
        tools: [@weather],
        tool_choice: "required",
        max_tokens: 60,
        temperature: 0
      )
      |> Enum.to_list()

    assert Enum.all?(chunks, &is_map(&1.reply)), inspect(Enum.map(chunks, & &1.reply))
    assert List.last(chunks).reason == :end_id

    assert %{tool_calls: [call]} = Chunk.join_replies(chunks)
    assert call.index == 0 and call.name == "get_weather"
    assert String.starts_with?(call.id, "call_")
    args = Lmstream.JSON.decode!(call.arguments)
    assert is_binary(args["city"]) and args["unit"] in ["celsius", "fahrenheit"]
    # The raw text still holds the whole output, markers and all.
    text = Enum.map_join(chunks, & &1.text)
    assert text =~ "get_weather"

    # A keyword-list tool and a named tool_choice encode as the same objects.
    kw_tool = [
      type: "function",
      function: [name: "get_weather", parameters: @weather.function.parameters]
    ]

    named =
      rt
      |> Lmstream.stream(@ask,
        tools: [kw_tool],
        tool_choice: %{type: "function", function: %{name: "get_weather"}},
        max_tokens: 60,
        temperature: 0
      )
      |> Enum.to_list()

    assert %{tool_calls: [%{name: "get_weather"}]} = Chunk.join_replies(named)
  end

  @tag skip: @skip
  test "a bad tool is an invalid request", %{rt: rt} do
    assert {:error, {:invalid_request, msg}} =
             Lmstream.generate(rt, @ask,
               tools: [%{type: "function", function: %{}}],
               max_tokens: 4
             )

    assert msg =~ "tools"
  end

  @tag skip: @skip
  test "render_chat shows the prompt a tool request is given", %{rt: rt} do
    {:ok, plain} = Lmstream.render_chat(rt, @ask)
    {:ok, with_tools} = Lmstream.render_chat(rt, @ask, tools: [@weather])
    # Qwen's template lists the tools in its system turn.
    assert with_tools =~ "<tools>" and with_tools =~ ~s("get_weather")
    refute plain =~ "<tools>"
    assert {:ok, ^plain} = Lmstream.render_chat(rt, @ask, tools: [@weather], tool_choice: "none")

    assert {:error, {:invalid_request, msg}} =
             Lmstream.render_chat(rt, @ask, tools: [%{type: "function", function: %{}}])

    assert msg =~ "tools"
    assert_raise ArgumentError, fn -> Lmstream.render_chat(rt, @ask, max_tokens: 3) end
  end

  @tag skip: @skip
  test "an assistant turn's calls and the tool's answer render", %{rt: rt} do
    msgs =
      @ask ++
        [
          %{
            role: "assistant",
            content: "",
            tool_calls: [
              %{
                id: "call_1",
                type: "function",
                function: %{name: "get_weather", arguments: %{city: "Lyon"}}
              }
            ]
          },
          %{role: "tool", tool_call_id: "call_1", name: "get_weather", content: "17 degrees"}
        ]

    {:ok, prompt} = Lmstream.render_chat(rt, msgs)
    assert prompt =~ "Lyon" and prompt =~ "17 degrees"
    assert {:ok, _text, _usage} = Lmstream.generate(rt, msgs, max_tokens: 2)
  end
end
