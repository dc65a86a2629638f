// Package reply parses a chat model's streamed answer into what chat APIs
// return apart: content, reasoning and tool calls, in the syntax of the
// model's family (Format; Detect picks it from the chat template).
//
// A parser (New) is a streaming.ReplyParser: the stream writes it the
// released text and Takes what completed. The rules every format keeps:
//
//   - Nothing is lost: each byte written ends in Content, Reasoning or a
//     call. Markers are syntax and dropped, and so are the blanks next to
//     syntax (after a reasoning block, before and between calls).
//   - Text that may still become a marker is held until it is known, and
//     released at the end. Other content streams at once.
//   - A call is emitted whole, once its text is complete and parses, as
//     one delta (index, id, name, the arguments' JSON object text). A call
//     that never completes, does not parse, names a function the request
//     lacks or is over MaxCalls is content, verbatim with its markers.
//   - Reasoning is recognised at the start of the answer (or from the
//     prompt's end, which may have opened or closed the think block).
//
// Parsing is iterative and bounded: a parser holds at most the answer, and
// scans a growing call for its end without rescanning.
package reply
