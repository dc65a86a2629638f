package engine

import (
	"fmt"

	"github.com/lmstream/lmstream/core/grammar"
)

// A lazy constraint leaves the answer free until it begins a tool call and
// constrains the call from there (tool_choice "auto" with strict tools):
// the text a model writes before a call, or instead of one, is its own.
// What begins a call is the trigger's: an opener written anywhere (Hermes
// "<tool_call>"), or a lead the reply starts with (a bare JSON call's
// "{"). Once it fires, the grammar of the calls applies to the end of the
// answer, as it does to a forced call's.
//
// The trigger's progress is a watch, two small integers, so that every
// node of a drafted tree carries its own (pruneTrees) and verification
// masks each node as plain decoding would have at that point: speculation
// stays lossless under a lazy constraint as under a grammar.
type trigger struct {
	// opener, when not "", fires wherever the output comes to end with it;
	// openerNext is the opener's matching automaton (openerNext[k][c]: the
	// opener's bytes matched after byte c when k were; len(opener):
	// fired), and afterOpener the calls' grammar state after the opener.
	opener      string
	openerNext  [][256]int16
	afterOpener grammar.State

	// leads fire when the reply, after leading blanks, begins with their
	// text; leadNext is their automaton over the leads' proper prefixes
	// (state 0: nothing but blanks yet), its entries the next state, -1
	// when the reply cannot begin with a lead any more, or -2-i when lead
	// i is complete.
	leads    []lead
	leadNext [][256]int16
}

// lead is a reply's opening that begins a call, and the calls' grammar
// state after it.
type lead struct {
	text  string
	after grammar.State
}

// watch is where the trigger stands in free output: the opener's bytes
// matched at its end, and the lead state (-1: past the reply's start).
type watch struct{ k, lead int16 }

// maxTriggerText bounds the opener and the leads (so the automata's states
// fit their int16s with room to spare).
const maxTriggerText = 64

// newTrigger makes the automata of an opener (optional: "") and leads.
func newTrigger(opener string, afterOpener grammar.State, leads []lead) (*trigger, error) {
	t := &trigger{opener: opener, afterOpener: afterOpener, leads: leads}
	if len(opener) > maxTriggerText {
		return nil, fmt.Errorf("call opener %q is longer than %d bytes", opener, maxTriggerText)
	}
	if opener != "" {
		if afterOpener.Dead() {
			return nil, fmt.Errorf("the calls' grammar does not begin with %q", opener)
		}
		// The opener's prefix automaton (Knuth–Morris–Pratt as a table):
		// a byte that breaks a partial match falls back to the longest
		// prefix still matched, as the state x one byte behind would.
		t.openerNext = make([][256]int16, len(opener))
		t.openerNext[0][opener[0]] = 1
		x := 0
		for k := 1; k < len(opener); k++ {
			t.openerNext[k] = t.openerNext[x]
			t.openerNext[k][opener[k]] = int16(k + 1)
			x = int(t.openerNext[x][opener[k]])
		}
	}
	// The leads' automaton: a state per distinct proper prefix.
	ids := map[string]int16{"": 0}
	texts := []string{""}
	for i, l := range leads {
		switch {
		case l.text == "" || len(l.text) > maxTriggerText:
			return nil, fmt.Errorf("lead %d: %q is empty or longer than %d bytes", i, l.text, maxTriggerText)
		case isBlank(l.text[0]):
			return nil, fmt.Errorf("lead %q begins with a blank, which the reply's leading blanks would swallow", l.text)
		case l.after.Dead():
			return nil, fmt.Errorf("the calls' grammar does not begin with %q", l.text)
		}
		for n := 1; n < len(l.text); n++ {
			if _, ok := ids[l.text[:n]]; !ok {
				ids[l.text[:n]] = int16(len(texts))
				texts = append(texts, l.text[:n])
			}
		}
	}
	if len(leads) > 0 {
		t.leadNext = make([][256]int16, len(texts))
		for id, s := range texts {
			for c := range 256 {
				next := s + string([]byte{byte(c)})
				n, ok := ids[next]
				if !ok {
					n = -1
				}
				for i, l := range leads {
					if l.text == next {
						n = int16(-2 - i)
						break
					}
				}
				if id == 0 && isBlank(byte(c)) {
					n = 0
				}
				t.leadNext[id][c] = n
			}
		}
	}
	return t, nil
}

// start is the watch before any output.
func (t *trigger) start() watch {
	if len(t.leads) == 0 {
		return watch{lead: -1}
	}
	return watch{}
}

// scan follows the watch w through piece, and when the trigger fires
// within it returns the grammar's state after the rest of the piece (dead
// when that rest leaves the grammar) and true.
func (t *trigger) scan(w watch, piece []byte) (watch, grammar.State, bool) {
	for i, c := range piece {
		if w.lead >= 0 {
			n := t.leadNext[w.lead][c]
			if n <= -2 {
				return watch{}, t.leads[-2-n].after.Advance(piece[i+1:]), true
			}
			w.lead = n
		}
		if t.opener != "" {
			k := t.openerNext[w.k][c]
			if int(k) == len(t.opener) {
				return watch{}, t.afterOpener.Advance(piece[i+1:]), true
			}
			w.k = k
		}
	}
	return w, grammar.State{}, false
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
