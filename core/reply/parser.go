package reply

import (
	"slices"
	"strings"

	"github.com/lmstream/lmstream/streaming"
)

// Options say what one request wants parsed.
type Options struct {
	// Tools: parse tool calls (the request has tools and tool_choice is
	// not "none"). Without it every call's text is content.
	Tools bool
	// Reasoning: return thinking as Reply.Reasoning; false: it stays
	// inline in Content, markers and all.
	Reasoning bool
	// Prompt is the rendered prompt. Its end says whether the answer
	// starts inside a think block (DeepSeek-R1's and Qwen3's thinking
	// generation prompts open it), after a closed empty one (Qwen3 with
	// enable_thinking=false), or for harmony which message is open.
	Prompt string
	// ForcedPrefix is text appended to the prompt to force a call (e.g.
	// "<tool_call>\n" or "[TOOL_CALLS]"): the parser reads the answer as
	// if it began with it. Should the call fail, it is part of the call's
	// verbatim text in Content.
	ForcedPrefix string
	// MaxCalls is 1 when parallel_tool_calls is false: later calls' text
	// goes to Content. 0: no limit.
	MaxCalls int
	// ToolNames are the request's functions: a call naming another is
	// not a call (its text is content). Empty: any name.
	ToolNames []string
}

// New returns the parser of one stream (one batch item; not shared).
func New(f Format, o Options) streaming.ReplyParser {
	if f == Harmony {
		return newHarmony(o)
	}
	p := &parser{f: f, o: o, syn: syntaxOf(f)}
	p.wants = wantedMarkers(f, o)
	if o.Tools && p.syn != nil {
		p.openers = p.syn.openers()
	}
	p.phase = phaseContent
	if o.Reasoning {
		p.phase = p.promptThinkState(strings.TrimSuffix(o.Prompt, o.ForcedPrefix))
	}
	if o.ForcedPrefix != "" {
		// The forced text follows any thinking the prompt allowed for.
		if p.phase != phaseContent {
			p.phase, p.trimLead = phaseContent, true
		}
		p.pend = append(p.pend, o.ForcedPrefix...)
	}
	return p
}

// A syntax reads one family's calls for the driver (parser).
type syntax interface {
	// openers are the markers that begin a call in content.
	openers() []string
	// settle reads a call unit that opener began; body is what follows
	// the opener so far. It returns how much of body the unit spans and
	// its parts, or n < 0 while the unit's end is not yet known. With
	// final set the answer has ended and it must settle (n >= 0). A
	// syntax may keep scan state between calls on a growing body; it
	// resets it when it settles.
	settle(opener string, body []byte, final bool) (n int, parts []part)
}

// leader is a syntax whose call may also begin without a marker at the
// start of the reply (Llama 3's bare JSON).
type leader interface {
	// leads reports, for the start of the reply (blanks skipped), whether
	// it begins a call; decided is false while it cannot yet tell.
	leads(start []byte) (isCall, decided bool)
}

func syntaxOf(f Format) syntax {
	switch f {
	case Hermes:
		return &hermes{}
	case Qwen3Coder:
		return &qwen3Coder{open: toolCallOpen, close: toolCallClose}
	case SeedOSS:
		return &qwen3Coder{open: seedCallOpen, close: seedCallClose}
	case Llama3:
		return &llama3{}
	case Mistral:
		return &mistral{}
	case Granite:
		return &granite{}
	case DeepSeek:
		return &deepseek{}
	}
	return nil
}

type phase int

const (
	phaseThinkStart phase = iota // reasoning may start here: look for an opener
	phaseThink                   // inside a think block
	phaseContent                 // content, watching for call openers
	phaseCall                    // inside a call unit
)

// parser is the ReplyParser of every format but harmony: reasoning at the
// start, then content with calls in it.
type parser struct {
	f       Format
	o       Options
	syn     syntax
	openers []string
	wants   []string

	pend  []byte // written, not yet settled
	phase phase
	think thinkPair // in phaseThink: the block's markers

	// trimLead drops the blanks that start the next content (after
	// reasoning or a call: they separate syntax).
	trimLead bool
	// started: the reply has had non-blank content or a call (Llama 3's
	// bare JSON call must begin the reply).
	started bool
	// In phaseCall: the blanks before the opener (dropped when the unit
	// holds a call), the opener and where the body starts in pend.
	held      string
	opener    string
	bodyStart int

	calls int // emitted so far: the next call's index
	out   streaming.Reply
}

func (p *parser) Wants(piece []byte) bool { return slices.Contains(p.wants, string(piece)) }

func (p *parser) Write(text []byte) {
	p.pend = append(p.pend, text...)
	p.step(false)
}

func (p *parser) Take(final bool) streaming.Reply {
	if final {
		p.step(true)
	}
	r := p.out
	p.out = streaming.Reply{}
	return r
}

// promptThinkState is where the answer starts, by the prompt's end: inside
// a think block it opened, after an empty one it closed, or undecided.
func (p *parser) promptThinkState(prompt string) phase {
	end := strings.TrimRight(prompt, " \n\r\t")
	for _, tp := range thinkPairs {
		if strings.HasSuffix(end, tp.open) {
			p.think = tp
			return phaseThink
		}
		if strings.HasSuffix(end, tp.close) {
			p.trimLead = true
			return phaseContent
		}
	}
	return phaseThinkStart
}

// step settles what pend allows, looping while a phase hands over to the
// next.
func (p *parser) step(final bool) {
	for {
		var more bool
		switch p.phase {
		case phaseThinkStart:
			more = p.stepThinkStart(final)
		case phaseThink:
			more = p.stepThink(final)
		case phaseContent:
			more = p.stepContent(final)
		case phaseCall:
			more = p.stepCall(final)
		}
		if !more {
			return
		}
	}
}

func (p *parser) stepThinkStart(final bool) bool {
	i := skipBlanks(p.pend, 0)
	if i > maxHeldBlanks {
		p.phase = phaseContent // reasoning starts the answer, not a page down
		return true
	}
	for _, tp := range thinkPairs {
		if strings.HasPrefix(string(p.pend[i:]), tp.open) {
			p.think = tp
			p.pend = p.pend[i+len(tp.open):]
			p.phase = phaseThink
			return true
		}
	}
	if !final && (i == len(p.pend) || isPrefixOfAny(p.pend[i:], thinkOpeners())) {
		return false
	}
	p.phase = phaseContent
	return true
}

func thinkOpeners() []string {
	o := make([]string, len(thinkPairs))
	for i, tp := range thinkPairs {
		o[i] = tp.open
	}
	return o
}

func (p *parser) stepThink(final bool) bool {
	at, _, hold := findFirst(p.pend, 0, []string{p.think.close})
	if at >= 0 {
		p.out.Reasoning += string(p.pend[:at])
		p.pend = p.pend[at+len(p.think.close):]
		p.phase, p.trimLead = phaseContent, true
		return true
	}
	if final {
		hold = len(p.pend)
	}
	p.out.Reasoning += string(p.pend[:hold])
	p.pend = p.pend[hold:]
	return false
}

// content emits text as content, dropping the blanks that follow syntax.
func (p *parser) content(text []byte) {
	if p.trimLead {
		text = text[skipBlanks(text, 0):]
		if len(text) == 0 {
			return
		}
		p.trimLead = false
	}
	if len(text) > 0 {
		p.started = true
	}
	p.out.Content += string(text)
}

func (p *parser) stepContent(final bool) bool {
	if len(p.openers) == 0 {
		p.content(p.pend)
		p.pend = p.pend[:0]
		return false
	}
	if !p.started {
		if l, ok := p.syn.(leader); ok {
			i := skipBlanks(p.pend, 0)
			isCall, decided := l.leads(p.pend[i:])
			if i > maxHeldBlanks {
				isCall, decided = false, true
			}
			if !decided && !final {
				return false
			}
			if isCall {
				p.enterCall(i, i, "")
				return true
			}
		}
	}
	at, which, hold := findFirst(p.pend, 0, p.openers)
	if at >= 0 {
		b := heldBlanks(p.pend[:at])
		p.content(p.pend[:b])
		p.enterCall(b, at, which)
		return true
	}
	if final {
		p.content(p.pend)
		p.pend = p.pend[:0]
		return false
	}
	// Blanks before a possible opener are held: they belong to the call.
	b := heldBlanks(p.pend[:hold])
	p.content(p.pend[:b])
	p.pend = p.pend[b:]
	return false
}

// maxHeldBlanks bounds the blanks held as possible syntax (before a call
// or at the start of the answer): a longer run is content, so that a
// model that writes pages of newlines is not rescanned on every write.
const maxHeldBlanks = 256

// heldBlanks is where the blanks that end b and may belong to a call
// opener after them start: the run's last maxHeldBlanks bytes at most.
func heldBlanks(b []byte) int {
	return max(blankTail(b), len(b)-maxHeldBlanks)
}

// enterCall starts a call unit whose opener is at pend[at:], with the
// blanks before it from pend[blanks:].
func (p *parser) enterCall(blanks, at int, opener string) {
	p.held = string(p.pend[blanks:at])
	p.opener = opener
	p.pend = p.pend[at:]
	p.bodyStart = len(opener)
	p.phase = phaseCall
}

func (p *parser) stepCall(final bool) bool {
	body := p.pend[p.bodyStart:]
	n, parts := p.syn.settle(p.opener, body, final)
	if n < 0 {
		return false
	}
	unit := p.pend[:p.bodyStart+n]
	var junk strings.Builder
	valid := 0
	for _, pt := range parts {
		if pt.call != nil && p.accept(pt.call) {
			valid++
			continue
		}
		junk.WriteString(pt.raw)
	}
	if valid == 0 {
		// Not a call: the user sees what the model wrote.
		p.content([]byte(p.held))
		p.content(unit)
	} else {
		p.content([]byte(junk.String()))
		p.trimLead, p.started = true, true
	}
	p.pend = p.pend[len(unit):]
	p.held, p.opener, p.phase = "", "", phaseContent
	return true
}

// accept emits c if the request allows it.
func (p *parser) accept(c *call) bool {
	if p.o.MaxCalls > 0 && p.calls >= p.o.MaxCalls {
		return false
	}
	if c.name == "" || len(p.o.ToolNames) > 0 && !slices.Contains(p.o.ToolNames, c.name) {
		return false
	}
	if !isObject([]byte(c.args)) {
		return false
	}
	id := c.id
	if id == "" {
		id = newID(p.f)
	}
	p.out.ToolCalls = append(p.out.ToolCalls, streaming.ToolCallDelta{
		Index: int32(p.calls), ID: id, Name: c.name, Arguments: c.args,
	})
	p.calls++
	return true
}

// wantedMarkers are the special-token pieces the parser reads: the
// format's call markers when tools are parsed, reasoning markers when
// reasoning is.
func wantedMarkers(f Format, o Options) []string {
	var w []string
	if o.Reasoning {
		for _, tp := range thinkPairs {
			w = append(w, tp.open, tp.close)
		}
	}
	if !o.Tools {
		return w
	}
	switch f {
	case Hermes, Qwen3Coder:
		w = append(w, toolCallOpen, toolCallClose)
	case SeedOSS:
		w = append(w, seedCallOpen, seedCallClose)
	case Llama3:
		w = append(w, pythonTag)
	case Mistral:
		w = append(w, mistralCalls, mistralArgs, mistralCallID)
	case Granite:
		w = append(w, graniteCall)
	case DeepSeek:
		w = append(w, dsCallsBegin, dsCallsEnd, dsCallBegin, dsCallEnd, dsSep)
	}
	return w
}
