// Package jinja is a Jinja interpreter made for chat templates: the Jinja
// text a model file ships (GGUF tokenizer.chat_template) or a user
// configures, rendered as Hugging Face transformers' apply_chat_template
// renders it with Python's jinja2 (a sandbox that refuses to mutate lists
// and dicts, trim_blocks and lstrip_blocks on, loop controls, a tojson
// filter that is json.dumps, raise_exception and strftime_now).
//
// A template is code from an untrusted file, and the host is a long-lived
// process, so the interpreter is built to be unable to hurt it:
//
//   - Parse bounds the template's size and the nesting of its syntax tree
//     before it recurses (parser.go), so no template overflows the Go
//     stack, which is a fatal error rather than a recoverable panic.
//   - A render is synchronous and carries a budget (budget.go) that lives
//     in the interpreter, never in the template's namespace: a step count
//     that every node, loop pass and unit of data scanned draws on, a
//     recursion depth, a byte size for the output and for any one value,
//     and a total of bytes allocated. Every operation that creates a value
//     computes the value's size first and asks the budget before it
//     allocates, so no single operation can exhaust memory.
//   - The render checks its context.Context as it spends steps, so a
//     cancelled or timed-out render returns at once and leaves nothing
//     running.
//   - A template has only itself: {% include %}, {% import %},
//     {% from %} and {% extends %} are refused when parsing.
//
// What a render can touch is the values it is given (Value, FromGo,
// FromJSON) and the globals of apply_chat_template; the errors it returns
// are *SyntaxError (at Parse), *RaiseError (the template's own
// raise_exception), *LimitError (a budget ran out, or the context ended)
// and *Error (anything jinja2 would raise at run time).
package jinja
