package reply

import (
	"bytes"
	"slices"
	"strings"

	"github.com/lmstream/lmstream/streaming"
)

// harmonyParser reads gpt-oss's harmony messages:
//
//	<|start|>assistant<|channel|>analysis<|message|>THINKING<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>
//	<|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
//
// A message's header runs to <|message|>; its body to <|end|>, <|call|>,
// <|return|> or the next <|start|>. <|call|> and <|return|> are end
// tokens the stream does not write, so a call still open when the answer
// ends is settled as complete.
type harmonyParser struct {
	o     Options
	wants []string
	pend  []byte

	inBody bool
	// Header state: the header's start that the prompt wrote (parsed, not
	// written) and the written text the message began with.
	hdrPrompt string
	startRaw  string
	// Body state: the open message.
	kind      msgKind
	recipient string
	// scanFrom: where to resume looking for the end of a held call body.
	scanFrom int

	calls int
	out   streaming.Reply
}

type msgKind int

const (
	msgContent   msgKind = iota // final, commentary preambles, anything else
	msgReasoning                // analysis
	msgCall                     // addressed to a tool
	msgVerbatim                 // shown as written, markers and all
)

var (
	harmonyHeaderEnds = []string{harmonyMessage, harmonyStart, harmonyEnd, harmonyCall, harmonyReturn}
	harmonyBodyEnds   = []string{harmonyEnd, harmonyCall, harmonyReturn, harmonyStart}
)

// maxHeader bounds a message header: text that long without <|message|>
// is not a header.
const maxHeader = 1024

func newHarmony(o Options) *harmonyParser {
	h := &harmonyParser{o: o, wants: []string{
		harmonyStart, harmonyChannel, harmonyMessage, harmonyEnd, harmonyCall, harmonyReturn, harmonyConstrain,
	}}
	prompt := strings.TrimSuffix(o.Prompt, o.ForcedPrefix)
	if i := strings.LastIndex(prompt, harmonyStart); i >= 0 {
		tail := prompt[i+len(harmonyStart):]
		if hdr, _, ok := strings.Cut(tail, harmonyMessage); ok {
			h.open(hdr)
		} else {
			h.hdrPrompt = tail
		}
	}
	h.pend = append(h.pend, o.ForcedPrefix...)
	return h
}

func (h *harmonyParser) Wants(piece []byte) bool { return slices.Contains(h.wants, string(piece)) }

func (h *harmonyParser) Write(text []byte) {
	h.pend = append(h.pend, text...)
	h.step(false)
}

func (h *harmonyParser) Take(final bool) streaming.Reply {
	if final {
		h.step(true)
	}
	r := h.out
	h.out = streaming.Reply{}
	return r
}

func (h *harmonyParser) step(final bool) {
	for {
		var more bool
		if h.inBody {
			more = h.stepBody(final)
		} else {
			more = h.stepHeader(final)
		}
		if !more {
			return
		}
	}
}

// open starts the body of a message with header hdr.
func (h *harmonyParser) open(hdr string) {
	channel, recipient := parseHeader(hdr)
	h.inBody, h.recipient, h.hdrPrompt = true, recipient, ""
	switch {
	case recipient != "" && h.o.Tools:
		h.kind = msgCall
	case recipient != "":
		h.kind = msgVerbatim
	case channel == "analysis" && h.o.Reasoning:
		h.kind = msgReasoning
	case channel == "analysis":
		h.kind = msgVerbatim
	default:
		h.kind = msgContent
	}
	if h.kind == msgVerbatim {
		h.out.Content += h.startRaw
	}
}

// splitHeader separates a header from text before it that is not one
// (a model that wrote plain words and then a channel): before
// <|channel|> a header holds only the role and the recipient.
func splitHeader(written string) (stray, hdr string) {
	at := strings.Index(written, harmonyChannel)
	if at < 0 {
		at = len(written)
	}
	for _, w := range strings.Fields(written[:at]) {
		if w != "assistant" && !strings.HasPrefix(w, "to=") {
			return written[:at], written[at:]
		}
	}
	return "", written
}

// parseHeader finds a header's channel and recipient (to=...), which may
// stand before or after <|channel|>.
func parseHeader(hdr string) (channel, recipient string) {
	word := func(s string) string {
		if i := strings.IndexAny(s, " \t\n<"); i >= 0 {
			return s[:i]
		}
		return s
	}
	if _, after, ok := strings.Cut(hdr, harmonyChannel); ok {
		channel = word(strings.TrimLeft(after, " "))
	}
	if i := strings.Index(hdr, "to="); i >= 0 && (i == 0 || hdr[i-1] == ' ' || hdr[i-1] == '>') {
		recipient = word(hdr[i+len("to="):])
	}
	return channel, recipient
}

// junk shows text that is no message as content.
func (h *harmonyParser) junk(text string) {
	h.out.Content += text
	h.startRaw, h.hdrPrompt = "", ""
}

func (h *harmonyParser) stepHeader(final bool) bool {
	at, which, hold := findFirst(h.pend, 0, harmonyHeaderEnds)
	if x := max(at, hold); x > maxHeader {
		// No header is that long: its first maxHeader+1 bytes are text
		// outside any message. (Cut in pieces of that size so that every
		// way of writing the text cuts it alike.)
		h.junk(h.startRaw + string(h.pend[:maxHeader+1]))
		h.pend = h.pend[maxHeader+1:]
		return true
	}
	switch {
	case which == harmonyMessage:
		stray, hdr := splitHeader(string(h.pend[:at]))
		if stray != "" {
			h.junk(h.startRaw + stray)
		}
		h.startRaw += hdr + which
		h.pend = h.pend[at+len(which):]
		h.open(h.hdrPrompt + hdr)
		return true
	case which == harmonyStart:
		h.junk(h.startRaw + string(h.pend[:at]))
		h.startRaw = which
		h.pend = h.pend[at+len(which):]
		return true
	case at >= 0:
		// A message end with no message: not harmony.
		h.junk(h.startRaw + string(h.pend[:at+len(which)]))
		h.pend = h.pend[at+len(which):]
		return true
	case final:
		h.junk(h.startRaw + string(h.pend))
		h.pend = h.pend[:0]
	}
	return false
}

func (h *harmonyParser) stepBody(final bool) bool {
	at, which, hold := findFirst(h.pend, h.scanFrom, harmonyBodyEnds)
	if at < 0 && !final {
		if h.kind != msgCall {
			h.emit(h.pend[:hold])
			h.pend = h.pend[hold:]
		} else {
			h.scanFrom = hold // a long call is scanned once
		}
		return false
	}
	h.scanFrom = 0
	end := ""
	if at < 0 {
		at = len(h.pend)
	} else if which != harmonyStart {
		end = which
	}
	body := h.pend[:at]
	switch h.kind {
	case msgCall:
		h.settleCall(body, end)
	case msgVerbatim:
		h.emit(body)
		h.out.Content += end
	default:
		h.emit(body)
	}
	h.pend = h.pend[at+len(which):]
	h.inBody, h.startRaw = false, ""
	if which == harmonyStart {
		h.startRaw = which
	}
	return true
}

func (h *harmonyParser) emit(text []byte) {
	if h.kind == msgReasoning {
		h.out.Reasoning += string(text)
	} else {
		h.out.Content += string(text)
	}
}

// settleCall emits a tool message as a call, or shows it as written.
func (h *harmonyParser) settleCall(body []byte, end string) {
	name := strings.TrimPrefix(h.recipient, "functions.")
	args := bytes.TrimSpace(body)
	ok := name != "" && isObject(args) &&
		(h.o.MaxCalls <= 0 || h.calls < h.o.MaxCalls) &&
		(len(h.o.ToolNames) == 0 || slices.Contains(h.o.ToolNames, name))
	if !ok {
		h.out.Content += h.startRaw + string(body) + end
		return
	}
	h.out.ToolCalls = append(h.out.ToolCalls, streaming.ToolCallDelta{
		Index: int32(h.calls), ID: newID(Harmony), Name: name, Arguments: string(args),
	})
	h.calls++
}
