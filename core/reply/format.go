package reply

import "strings"

// Format is the reply syntax of a model family: how its answers mark
// reasoning and tool calls.
type Format string

// The formats a parser exists for. The comments show one call.
const (
	// None: plain content (reasoning markers are still honoured when
	// Options.Reasoning is set).
	None Format = ""
	// Hermes: <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>
	// (Qwen2.5, Qwen3, Hermes 2/3, Granite 4, ...).
	Hermes Format = "hermes"
	// Qwen3Coder: <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
	// (Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5).
	Qwen3Coder Format = "qwen3_coder"
	// Llama3: a reply that is only {"name": .., "parameters": {..}}
	// (';'-separated for several), optionally after <|python_tag|>, which
	// may also introduce a built-in tool's name.call(k=v, ...).
	Llama3 Format = "llama3"
	// Mistral: [TOOL_CALLS][{"name":..,"arguments":{..}}, ...] and the
	// newer [TOOL_CALLS]NAME[ARGS]{..} (with [CALL_ID]id before [ARGS]).
	Mistral Format = "mistral"
	// Harmony: gpt-oss's channels, <|channel|>analysis<|message|>..<|end|>,
	// final, and commentary to=functions.NAME ... <|message|>{..}<|call|>.
	Harmony Format = "harmony"
	// Granite: <|tool_call|>[{"name":..,"arguments":{..}}] (Granite 3.x).
	Granite Format = "granite"
	// DeepSeek: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
	// ```json {..} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (R1, V3) and
	// V3.1's NAME<｜tool▁sep｜>{..}.
	DeepSeek Format = "deepseek"
	// SeedOSS: Qwen3Coder's <function=NAME> inside <seed:tool_call>...</seed:tool_call>
	// (ByteDance Seed-OSS, which thinks in <seed:think>).
	SeedOSS Format = "seed_oss"
)

// Markers, spelled once.
const (
	toolCallOpen     = "<tool_call>"
	toolCallClose    = "</tool_call>"
	seedCallOpen     = "<seed:tool_call>"
	seedCallClose    = "</seed:tool_call>"
	pythonTag        = "<|python_tag|>"
	mistralCalls     = "[TOOL_CALLS]"
	mistralArgs      = "[ARGS]"
	mistralCallID    = "[CALL_ID]"
	graniteCall      = "<|tool_call|>"
	dsCallsBegin     = "<｜tool▁calls▁begin｜>"
	dsCallsEnd       = "<｜tool▁calls▁end｜>"
	dsCallBegin      = "<｜tool▁call▁begin｜>"
	dsCallEnd        = "<｜tool▁call▁end｜>"
	dsSep            = "<｜tool▁sep｜>"
	harmonyStart     = "<|start|>"
	harmonyChannel   = "<|channel|>"
	harmonyMessage   = "<|message|>"
	harmonyEnd       = "<|end|>"
	harmonyCall      = "<|call|>"
	harmonyReturn    = "<|return|>"
	harmonyConstrain = "<|constrain|>"
)

// CallOpeners are the markers the format opens a call with (for a lazy
// grammar that starts constraining once one is generated). Llama3's bare
// JSON call has no marker: only <|python_tag|> is listed.
func (f Format) CallOpeners() []string {
	switch f {
	case Hermes, Qwen3Coder:
		return []string{toolCallOpen}
	case SeedOSS:
		return []string{seedCallOpen}
	case Llama3:
		return []string{pythonTag}
	case Mistral:
		return []string{mistralCalls}
	case Harmony:
		return []string{" to=functions."}
	case Granite:
		return []string{graniteCall}
	case DeepSeek:
		return []string{dsCallsBegin, dsCallBegin}
	}
	return nil
}

// Detect chooses the format from a chat template's text by markers only
// that family's templates contain, and reports whether the template has
// thinking markers this package separates (see thinkPairs, and harmony's
// analysis channel). Families with a tool syntax no parser here reads
// (GLM's <arg_key>, Kimi, MiniMax, Command-R, ...) are None.
func Detect(chatTemplate string) (f Format, thinks bool) {
	has := func(s string) bool { return strings.Contains(chatTemplate, s) }
	for _, p := range thinkPairs {
		if has(p.open) || has(p.close) {
			thinks = true
		}
	}
	switch {
	case has(harmonyChannel) && has(harmonyMessage):
		return Harmony, true
	case has("tool▁calls▁begin"):
		return DeepSeek, thinks
	case has(mistralCalls):
		return Mistral, thinks
	case has(graniteCall):
		return Granite, thinks
	case has(seedCallOpen) && has("<function="):
		return SeedOSS, thinks
	case has(toolCallOpen) && has("<function=") && !has("<seed:"):
		return Qwen3Coder, thinks
	case has(toolCallOpen) && !has("<function=") && !has("<arg_key>") && !has("<tool_calls>") && !has("ns_token"):
		// <tool_calls> (Apriel) wraps a JSON list; <arg_key> is GLM's
		// key/value form; ns_token prefixes MiniMax's XML calls.
		return Hermes, thinks
	case has(pythonTag) && !has("<function="), has(`"parameters": dictionary of argument name`):
		// Functionary v3.1 has <|python_tag|> too, but calls with <function=.
		return Llama3, thinks
	}
	return None, thinks
}
