package reply

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lmstream/lmstream/streaming"
)

// A replyCase is one answer and what a parser must make of it.
type replyCase struct {
	name      string
	f         Format
	o         Options
	in        string
	content   string
	reasoning string
	calls     [][2]string // name, arguments
	ids       []string    // the model's own ids, where it wrote them
}

var tools = []string{"get_weather", "get_time", "brave_search"}

// opts are a tool request's usual options, with changes.
func opts(change func(*Options)) Options {
	o := Options{Tools: true, Reasoning: true, ToolNames: tools}
	if change != nil {
		change(&o)
	}
	return o
}

func maxOne(o *Options) { o.MaxCalls = 1 }

const (
	hermesParis      = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	hermesTime       = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>"
	coderParis       = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
	coderTime        = "<tool_call>\n<function=get_time>\n<parameter=tz>\nCET\n</parameter>\n</function>\n</tool_call>"
	llamaParis       = `{"name": "get_weather", "parameters": {"city": "Paris"}}`
	llamaTime        = `{"name": "get_time", "parameters": {"tz": "CET"}}`
	dsParis          = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>"
	dsTime           = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"CET\"}\n```<｜tool▁call▁end｜>"
	harmonyCallParis = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"
)

var (
	paris  = [2]string{"get_weather", `{"city": "Paris"}`}
	parisC = [2]string{"get_weather", `{"city":"Paris"}`}
	time_  = [2]string{"get_time", `{"tz": "CET"}`}
	timeC  = [2]string{"get_time", `{"tz":"CET"}`}
)

var replyCases = []replyCase{
	// Hermes.
	{name: "content", f: Hermes, o: opts(nil), in: "The weather in Paris is mild, 1 < 2 and <tool> is not a marker.\n",
		content: "The weather in Paris is mild, 1 < 2 and <tool> is not a marker.\n"},
	{name: "one call", f: Hermes, o: opts(nil), in: hermesParis, calls: [][2]string{paris}},
	{name: "text then call", f: Hermes, o: opts(nil), in: "Let me check.\n\n" + hermesParis + "\n",
		content: "Let me check.", calls: [][2]string{paris}},
	{name: "two calls", f: Hermes, o: opts(nil), in: hermesParis + "\n" + hermesTime, calls: [][2]string{paris, time_}},
	{name: "reasoning then call", f: Hermes, o: opts(nil), in: "<think>\nThe user wants weather.\n</think>\n\n" + hermesParis,
		reasoning: "\nThe user wants weather.\n", calls: [][2]string{paris}},
	{name: "malformed", f: Hermes, o: opts(nil), in: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>",
		content: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>"},
	{name: "unknown function", f: Hermes, o: opts(nil), in: "Sure.\n<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
		content: "Sure.\n<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>"},
	{name: "max one call", f: Hermes, o: opts(maxOne), in: hermesParis + "\n" + hermesTime,
		content: hermesTime, calls: [][2]string{paris}},
	{name: "unclosed", f: Hermes, o: opts(nil), in: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
		content: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"},
	{name: "bare call", f: Hermes, o: opts(nil), in: "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n",
		calls: [][2]string{paris}},
	{name: "bare unknown function", f: Hermes, o: opts(nil), in: `{"name": "rm_rf", "arguments": {}}`,
		content: `{"name": "rm_rf", "arguments": {}}`},
	{name: "fenced bare call", f: Hermes, o: opts(nil), in: "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": \"Paris\"}\n}\n```",
		calls: [][2]string{paris}},
	{name: "fenced JSON answer", f: Hermes, o: opts(nil), in: "```json\n{\"a\": 1}\n```", content: "```json\n{\"a\": 1}\n```"},
	{name: "unclosed fence", f: Hermes, o: opts(nil), in: "```json\n{\"name\": \"get_weather\", \"arguments\": {}}",
		content: "```json\n{\"name\": \"get_weather\", \"arguments\": {}}"},
	{name: "code answer", f: Hermes, o: opts(nil), in: "```python\nprint(1)\n```", content: "```python\nprint(1)\n```"},
	{name: "bare JSON answer", f: Hermes, o: opts(nil), in: `{"name": "Bob", "age": 3}`, content: `{"name": "Bob", "age": 3}`},
	{name: "bare call then text", f: Hermes, o: opts(nil), in: `{"name": "get_weather", "arguments": {}} and more`,
		content: `{"name": "get_weather", "arguments": {}} and more`},
	{name: "content after call", f: Hermes, o: opts(nil), in: hermesParis + "\n\nDone.", content: "Done.", calls: [][2]string{paris}},
	{name: "quoted arguments", f: Hermes, o: opts(nil), in: "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>",
		calls: [][2]string{time_}},
	{name: "no tools", f: Hermes, o: opts(func(o *Options) { o.Tools = false }), in: "<think>x</think>" + hermesParis,
		reasoning: "x", content: hermesParis},
	{name: "no reasoning", f: Hermes, o: opts(func(o *Options) { o.Reasoning = false }), in: "<think>x</think>\nok",
		content: "<think>x</think>\nok"},
	{name: "unclosed reasoning", f: Hermes, o: opts(nil), in: "  <think>still thinking <tool_call>",
		reasoning: "still thinking <tool_call>"},
	{name: "forced prefix", f: Hermes, o: opts(func(o *Options) { o.ForcedPrefix = "<tool_call>\n" }),
		in: "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", calls: [][2]string{paris}},
	{name: "forced prefix refused", f: Hermes, o: opts(func(o *Options) { o.ForcedPrefix = "<tool_call>\n" }),
		in: "I won't.", content: "<tool_call>\nI won't."},
	{name: "qwen3 no thinking", f: Hermes, o: opts(func(o *Options) {
		o.Prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	}), in: "Hello! <think> is just text here.", content: "Hello! <think> is just text here."},
	{name: "qwen3 thinking prompt", f: Hermes, o: opts(func(o *Options) { o.Prompt = "<|im_start|>assistant\n<think>\n" }),
		in: "Hmm.\n</think>\n\n" + hermesParis, reasoning: "Hmm.\n", calls: [][2]string{paris}},

	{name: "pages of blanks", f: Hermes, o: opts(nil), in: strings.Repeat("\n", 1000) + hermesParis,
		content: strings.Repeat("\n", 1000-maxHeldBlanks), calls: [][2]string{paris}},

	// Qwen3-Coder.
	{name: "content", f: Qwen3Coder, o: opts(nil), in: "Paris is sunny <function= today.", content: "Paris is sunny <function= today."},
	{name: "one call", f: Qwen3Coder, o: opts(nil), in: coderParis, calls: [][2]string{{"get_weather", `{"city":"Paris","days":3}`}}},
	{name: "two calls", f: Qwen3Coder, o: opts(nil), in: "Checking both.\n" + coderParis + "\n" + coderTime,
		content: "Checking both.", calls: [][2]string{{"get_weather", `{"city":"Paris","days":3}`}, timeC}},
	{name: "reasoning then call", f: Qwen3Coder, o: opts(nil), in: "<think>plan</think>\n" + coderTime,
		reasoning: "plan", calls: [][2]string{timeC}},
	{name: "values", f: Qwen3Coder, o: opts(nil),
		in:    "<tool_call>\n<function=get_time>\n<parameter=code>\nprint(\"<b>\")\nx = 1\n</parameter>\n<parameter=opts>\n{\"a\": [1, true]}\n</parameter>\n<parameter=tz>\nCET\n</function>\n</tool_call>",
		calls: [][2]string{{"get_time", `{"code":"print(\"<b>\")\nx = 1","opts":{"a":[1,true]},"tz":"CET"}`}}},
	{name: "malformed", f: Qwen3Coder, o: opts(nil), in: "<tool_call>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
		content: "<tool_call>\n<parameter=city>\nParis\n</parameter>\n</tool_call>"},
	{name: "unknown function", f: Qwen3Coder, o: opts(nil), in: "<tool_call>\n<function=nope>\n</function>\n</tool_call>",
		content: "<tool_call>\n<function=nope>\n</function>\n</tool_call>"},
	{name: "max one call", f: Qwen3Coder, o: opts(maxOne), in: coderTime + "\n" + coderParis,
		content: coderParis, calls: [][2]string{timeC}},

	// Llama 3.
	{name: "content", f: Llama3, o: opts(nil), in: "Paris is the capital of France.", content: "Paris is the capital of France."},
	{name: "one call", f: Llama3, o: opts(nil), in: llamaParis, calls: [][2]string{paris}},
	{name: "two calls", f: Llama3, o: opts(nil), in: llamaParis + "; " + llamaTime, calls: [][2]string{paris, time_}},
	{name: "python tag json", f: Llama3, o: opts(nil), in: `<|python_tag|>{"type": "function", "name": "get_time", "parameters": {"tz": "CET"}}`,
		calls: [][2]string{time_}},
	{name: "built-in tool", f: Llama3, o: opts(nil), in: `<|python_tag|>brave_search.call(query="weather in Paris", n=3, safe=True)`,
		calls: [][2]string{{"brave_search", `{"query":"weather in Paris","n":3,"safe":true}`}}},
	{name: "late json", f: Llama3, o: opts(nil), in: strings.Repeat(" ", 300) + llamaParis, content: strings.Repeat(" ", 300) + llamaParis},
	{name: "json answer", f: Llama3, o: opts(nil), in: `{"name": "Bob", "age": 3}`, content: `{"name": "Bob", "age": 3}`},
	{name: "reasoning then call", f: Llama3, o: opts(nil), in: "<think>use the tool</think>\n\n" + llamaParis,
		reasoning: "use the tool", calls: [][2]string{paris}},
	{name: "malformed", f: Llama3, o: opts(nil), in: `{"name": "get_weather", "parameters": {"city": "Paris"}`,
		content: `{"name": "get_weather", "parameters": {"city": "Paris"}`},
	{name: "unknown function", f: Llama3, o: opts(nil), in: `{"name": "launch", "parameters": {}}`, content: `{"name": "launch", "parameters": {}}`},
	{name: "max one call", f: Llama3, o: opts(maxOne), in: llamaParis + "; " + llamaTime, content: llamaTime, calls: [][2]string{paris}},
	{name: "bad built-in", f: Llama3, o: opts(nil), in: `<|python_tag|>brave_search.call(query=os.system("x"))`,
		content: `<|python_tag|>brave_search.call(query=os.system("x"))`},

	// Mistral.
	{name: "content", f: Mistral, o: opts(nil), in: "It is [sunny] in Paris.", content: "It is [sunny] in Paris."},
	{name: "one call", f: Mistral, o: opts(nil), in: `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123XYZ"}]`,
		calls: [][2]string{paris}, ids: []string{"abc123XYZ"}},
	{name: "two calls", f: Mistral, o: opts(nil), in: `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "CET"}}]`,
		calls: [][2]string{paris, time_}},
	{name: "two named calls", f: Mistral, o: opts(nil), in: `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "CET"}`,
		calls: [][2]string{paris, time_}},
	{name: "call id", f: Mistral, o: opts(nil), in: `[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city":"Paris"}`,
		calls: [][2]string{parisC}, ids: []string{"a1b2c3d4e"}},
	{name: "reasoning then call", f: Mistral, o: opts(nil), in: `[THINK]Weather needed.[/THINK][TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`,
		reasoning: "Weather needed.", calls: [][2]string{paris}},
	{name: "malformed", f: Mistral, o: opts(nil), in: `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"`, content: `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"`},
	{name: "unknown function", f: Mistral, o: opts(nil), in: `[TOOL_CALLS]format_disk[ARGS]{}`, content: `[TOOL_CALLS]format_disk[ARGS]{}`},
	{name: "max one call", f: Mistral, o: opts(maxOne), in: `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "CET"}}]`,
		content: `{"name": "get_time", "arguments": {"tz": "CET"}}`, calls: [][2]string{paris}},
	{name: "forced prefix", f: Mistral, o: opts(func(o *Options) { o.ForcedPrefix = "[TOOL_CALLS]" }), in: `get_time[ARGS]{"tz":"CET"}`,
		calls: [][2]string{timeC}},
	{name: "not a name", f: Mistral, o: opts(nil), in: `[TOOL_CALLS] is what I would write.`, content: `[TOOL_CALLS] is what I would write.`},

	// Harmony.
	{name: "content", f: Harmony, o: opts(func(o *Options) { o.Prompt = "<|start|>user<|message|>hi<|end|><|start|>assistant" }),
		in: "<|channel|>final<|message|>Hello there.", content: "Hello there."},
	{name: "reasoning then answer", f: Harmony, o: opts(func(o *Options) { o.Prompt = "<|start|>assistant" }),
		in:        "<|channel|>analysis<|message|>User greets.<|end|><|start|>assistant<|channel|>final<|message|>Hi!<|return|>",
		reasoning: "User greets.", content: "Hi!"},
	{name: "reasoning then call", f: Harmony, o: opts(func(o *Options) { o.Prompt = "<|start|>assistant" }),
		in:        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
		reasoning: "Need weather.", calls: [][2]string{parisC}},
	{name: "two calls", f: Harmony, o: opts(nil),
		in:    harmonyCallParis + "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{\"tz\":\"CET\"}<|call|>",
		calls: [][2]string{parisC, timeC}},
	{name: "malformed", f: Harmony, o: opts(nil), in: "<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{city: Paris}<|call|>",
		content: "<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{city: Paris}<|call|>"},
	{name: "unknown function", f: Harmony, o: opts(nil), in: "<|start|>assistant<|channel|>commentary to=functions.sudo<|message|>{}<|call|>",
		content: "<|start|>assistant<|channel|>commentary to=functions.sudo<|message|>{}<|call|>"},
	{name: "max one call", f: Harmony, o: opts(maxOne), in: harmonyCallParis + harmonyCallParis,
		content: harmonyCallParis, calls: [][2]string{parisC}},
	{name: "no reasoning", f: Harmony, o: opts(func(o *Options) { o.Reasoning = false; o.Prompt = "<|start|>assistant" }),
		in:      "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>done",
		content: "<|channel|>analysis<|message|>think<|end|>done"},
	{name: "long call", f: Harmony, o: opts(nil), in: "<|start|>assistant<|channel|>commentary to=functions.get_time<|message|>{\"tz\":\"" + strings.Repeat("x", 3000) + "\"}<|call|>",
		calls: [][2]string{{"get_time", `{"tz":"` + strings.Repeat("x", 3000) + `"}`}}},
	{name: "not harmony", f: Harmony, o: opts(nil), in: "plain words", content: "plain words"},

	// Granite.
	{name: "content", f: Granite, o: opts(nil), in: "It's sunny.", content: "It's sunny."},
	{name: "one call", f: Granite, o: opts(nil), in: `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]`, calls: [][2]string{paris}},
	{name: "two calls", f: Granite, o: opts(nil), in: `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "CET"}}]`,
		calls: [][2]string{paris, time_}},
	{name: "reasoning then call", f: Granite, o: opts(nil), in: `<think>Look it up.</think><|tool_call|>[{"name": "get_time", "arguments": {"tz": "CET"}}]`,
		reasoning: "Look it up.", calls: [][2]string{time_}},
	{name: "malformed", f: Granite, o: opts(nil), in: `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"]]`,
		content: `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"]]`},
	{name: "unknown function", f: Granite, o: opts(nil), in: `<|tool_call|>[{"name": "x", "arguments": {}}]`, content: `<|tool_call|>[{"name": "x", "arguments": {}}]`},
	{name: "max one call", f: Granite, o: opts(maxOne), in: `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "CET"}}]`,
		content: `{"name": "get_time", "arguments": {"tz": "CET"}}`, calls: [][2]string{paris}},

	// DeepSeek.
	{name: "content", f: DeepSeek, o: opts(nil), in: "The answer is 4.", content: "The answer is 4."},
	{name: "one call", f: DeepSeek, o: opts(nil), in: "<｜tool▁calls▁begin｜>" + dsParis + "<｜tool▁calls▁end｜>", calls: [][2]string{paris}},
	{name: "two calls", f: DeepSeek, o: opts(nil), in: "Checking.\n<｜tool▁calls▁begin｜>" + dsParis + "\n" + dsTime + "<｜tool▁calls▁end｜>",
		content: "Checking.", calls: [][2]string{paris, time_}},
	{name: "v3.1 call", f: DeepSeek, o: opts(nil), in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"CET\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		calls: [][2]string{time_}},
	{name: "r1 reasoning then call", f: DeepSeek, o: opts(func(o *Options) { o.Prompt = "<｜User｜>weather?<｜Assistant｜><think>\n" }),
		in:        "The user wants the weather.\n</think>\n\n<｜tool▁calls▁begin｜>" + dsParis + "<｜tool▁calls▁end｜>",
		reasoning: "The user wants the weather.\n", calls: [][2]string{paris}},
	{name: "r1 answer", f: DeepSeek, o: opts(func(o *Options) { o.Prompt = "<｜User｜>2+2?<｜Assistant｜><think>\n" }),
		in: "Easy.\n</think>\n\nThe answer is 4.", reasoning: "Easy.\n", content: "The answer is 4."},
	{name: "malformed", f: DeepSeek, o: opts(nil), in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": Paris}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		content: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": Paris}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
	{name: "unknown function", f: DeepSeek, o: opts(nil), in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>nope\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		content: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>nope\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
	{name: "max one call", f: DeepSeek, o: opts(maxOne), in: "<｜tool▁calls▁begin｜>" + dsParis + dsTime + "<｜tool▁calls▁end｜>",
		content: dsTime, calls: [][2]string{paris}},
	{name: "unclosed section", f: DeepSeek, o: opts(nil), in: "<｜tool▁calls▁begin｜>" + dsParis, calls: [][2]string{paris}},

	// Seed-OSS.
	{name: "reasoning then call", f: SeedOSS, o: opts(nil),
		in:        "<seed:think>Need the time.</seed:think>\n<seed:tool_call>\n<function=get_time>\n<parameter=tz>CET</parameter>\n</function>\n</seed:tool_call>",
		reasoning: "Need the time.", calls: [][2]string{timeC}},
	{name: "unknown function", f: SeedOSS, o: opts(nil), in: "<seed:tool_call><function=x></function></seed:tool_call>",
		content: "<seed:tool_call><function=x></function></seed:tool_call>"},

	// None.
	{name: "content", f: None, o: opts(nil), in: "<tool_call>{}</tool_call>", content: "<tool_call>{}</tool_call>"},
	{name: "seed reasoning", f: None, o: opts(nil), in: "<seed:think>hmm</seed:think>\n\nAnswer.", reasoning: "hmm", content: "Answer."},
}

func TestReplyEverySplit(t *testing.T) {
	for _, c := range replyCases {
		t.Run(string(c.f)+"/"+c.name, func(t *testing.T) {
			want := streaming.Reply{Content: c.content, Reasoning: c.reasoning}
			for i, call := range c.calls {
				want.ToolCalls = append(want.ToolCalls, streaming.ToolCallDelta{Index: int32(i), Name: call[0], Arguments: call[1]})
			}
			for s, chunks := range splits(c.in, 50, 1) {
				got := checkCalls(t, c.f, feed(c.f, c.o, chunks), c.ids)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("split %d (%d pieces):\n got %+v\nwant %+v", s, len(chunks), got, want)
				}
			}
		})
	}
}

// A long answer outside harmony's messages is content however it is cut,
// and the header that follows it still opens its message.
func TestHarmonyLongJunk(t *testing.T) {
	long := strings.Repeat("word ", 500)
	in := long + "<|channel|>final<|message|>ok"
	o := opts(func(o *Options) { o.Prompt = "<|start|>assistant" })
	for s, chunks := range splits(in, 20, 7) {
		got := feed(Harmony, o, chunks)
		if got.Content != long+"ok" || got.Reasoning != "" || len(got.ToolCalls) != 0 {
			t.Fatalf("split %d: %+v", s, got)
		}
	}
}
