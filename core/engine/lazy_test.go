package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// lazyVocab is a vocabulary that spells Hermes' opener in pieces, whole,
// and glued to what follows it.
var lazyVocab = []string{"<unk>", "<s>", "</s>", "<|ctl|>",
	"<tool", "_call", ">", ">\n", ">{", "<tool_call>", "x<tool_call>\n{", "\n", "{", "}", " ", "Hi",
	`"name"`, ":", `"set"`, `"arguments"`, ",", `"level"`, "3", "7", "\n</tool_call>", "{\"name\": \"set\"", "<"}

func lazyTokenizer(t *testing.T) *tokenizer.Tokenizer {
	cfg := tokenizer.Config{Model: "llama", BOS: 1, EOS: 2, UNK: 0, PAD: -1}
	for i, s := range lazyVocab {
		cfg.Tokens = append(cfg.Tokens, []byte(s))
		cfg.Scores = append(cfg.Scores, -float32(i))
		ty := tokenizer.TypeNormal
		switch {
		case i == 0:
			ty = tokenizer.TypeUnknown
		case i <= 3:
			ty = tokenizer.TypeControl
		}
		cfg.Types = append(cfg.Types, int32(ty))
	}
	tok, err := tokenizer.New(cfg)
	require.NoError(t, err)
	return tok
}

// lazyHermes is a Hermes trigger over one strict tool whose "level" is 3
// or 7, as lazyCalls makes it.
func lazyHermes(t *testing.T, tok *tokenizer.Tokenizer) *constraint {
	tools := []grammar.Tool{{Name: "set", Parameters: []byte(`{"type":"object","properties":{"level":{"enum":[3,7]}},"required":["level"],"additionalProperties":false}`)}}
	shape := grammar.CallShape{Begin: "<tool_call>\n", End: "\n</tool_call>", Sep: "\n", NameKey: "name", ArgsKey: "arguments", MaxCalls: 1}
	g, err := grammar.ToolCalls(shape, tools)
	require.NoError(t, err)
	shape.Begin, shape.End = "", ""
	bare, err := grammar.ToolCalls(shape, tools)
	require.NoError(t, err)
	trig, err := newTrigger("<tool_call>", g.Start().Advance([]byte("<tool_call>")),
		[]lead{{text: "{", after: bare.Start().Advance([]byte("{"))}})
	require.NoError(t, err)
	pieces := make([][]byte, tok.Size())
	eog := make([]bool, tok.Size())
	for id := range int32(tok.Size()) {
		eog[id] = tok.EOG(id)
		if !tok.IsSpecial(id) {
			pieces[id] = tok.Piece(id)
		}
	}
	return newLazyConstraint(trig, grammar.NewTrie(pieces, eog), tok)
}

func ids(t *testing.T, tok *tokenizer.Tokenizer, pieces ...string) []int32 {
	var out []int32
	for _, p := range pieces {
		id := int32(slices.Index(lazyVocab, p))
		require.GreaterOrEqual(t, id, int32(0), p)
		out = append(out, id)
	}
	return out
}

// TestLazyTriggerSplitOpener: the opener written over three tokens fires
// on the one that completes it, and the grammar starts right after it;
// until then (and in the text before) every token is allowed.
func TestLazyTriggerSplitOpener(t *testing.T) {
	tok := lazyTokenizer(t)
	c := lazyHermes(t, tok)
	for _, id := range ids(t, tok, "Hi", " ", "<tool", "_call") {
		require.False(t, c.state.on)
		for other := range int32(tok.Size()) {
			if other != ids(t, tok, ">{")[0] {
				require.True(t, c.allows(c.state, other), "free output refused %q", tok.Piece(other))
			}
		}
		c.accept(id)
	}
	require.False(t, c.state.on, "not yet: the opener is incomplete")
	// After "<tool_call" a ">" fires the trigger; ">{" would too, with a
	// "{" the grammar refuses (it wants "\n" first), so it is masked
	// beforehand, in the row and in the one-token test alike.
	gt := ids(t, tok, ">{")[0]
	require.False(t, c.allows(c.state, gt))
	require.Equal(t, []int32{gt}, c.refusedAt(c.state.w))
	row := make([]float32, tok.Size())
	masked, ok := c.logits(c.state, row)
	require.True(t, ok)
	for id, v := range masked {
		require.Equal(t, int32(id) == gt, math.IsInf(float64(v), -1), "%q", tok.Piece(int32(id)))
	}
	require.True(t, c.allows(c.state, ids(t, tok, ">\n")[0]))
	c.accept(ids(t, tok, ">")[0])
	require.True(t, c.state.on, "the opener's last byte fires")
	// Now the grammar holds: the call's own text and nothing else.
	require.False(t, c.allows(c.state, ids(t, tok, "Hi")[0]))
	require.False(t, c.allows(c.state, ids(t, tok, "{")[0]))
	require.False(t, c.allows(c.state, 2), "no end inside a call")
	for _, id := range ids(t, tok, "\n", "{", `"name"`, ":", " ", `"set"`, ",", " ", `"arguments"`, ":", " ", "{", `"level"`, ":", " ") {
		require.True(t, c.allows(c.state, id), "%q", tok.Piece(id))
		c.accept(id)
	}
	require.False(t, c.allows(c.state, ids(t, tok, "Hi")[0]))
	require.False(t, c.allows(c.state, ids(t, tok, "<")[0]))
	require.True(t, c.allows(c.state, ids(t, tok, "7")[0]))
	for _, id := range ids(t, tok, "3", "}", "}", "\n</tool_call>") {
		require.True(t, c.allows(c.state, id), "%q", tok.Piece(id))
		c.accept(id)
	}
	require.True(t, c.allows(c.state, 2), "the call is whole: the answer may end")
}

// TestLazyTriggerCarriesPastOpener: a token that holds the opener and
// text after it fires and advances the grammar through that text.
func TestLazyTriggerCarriesPastOpener(t *testing.T) {
	tok := lazyTokenizer(t)
	c := lazyHermes(t, tok)
	c.accept(ids(t, tok, "Hi")[0])
	c.accept(ids(t, tok, "x<tool_call>\n{")[0])
	require.True(t, c.state.on)
	require.True(t, c.allows(c.state, ids(t, tok, `"name"`)[0]))
	require.False(t, c.allows(c.state, ids(t, tok, "{")[0]), "past the call's own '{'")
	// Control tokens are free output's (their text counts) but never the
	// grammar's.
	c = lazyHermes(t, tok)
	require.True(t, c.allows(c.state, 3))
	c.accept(3)
	require.False(t, c.state.on)
	c.accept(ids(t, tok, "<tool_call>")[0])
	require.True(t, c.state.on)
	require.False(t, c.allows(c.state, 3))
}

// TestLazyTriggerLead: a reply that begins with "{" (after blanks) is a
// bare call, held to the grammar; a "{" later in free text is not.
func TestLazyTriggerLead(t *testing.T) {
	tok := lazyTokenizer(t)
	c := lazyHermes(t, tok)
	c.accept(ids(t, tok, "\n")[0])
	c.accept(ids(t, tok, " ")[0])
	require.False(t, c.state.on)
	c.accept(ids(t, tok, "{\"name\": \"set\"")[0])
	require.True(t, c.state.on)
	require.True(t, c.allows(c.state, ids(t, tok, ",")[0]))
	require.False(t, c.allows(c.state, ids(t, tok, "}")[0]), "the arguments are required")

	c = lazyHermes(t, tok)
	c.accept(ids(t, tok, "Hi")[0])
	c.accept(ids(t, tok, " ")[0])
	c.accept(ids(t, tok, "{")[0])
	require.False(t, c.state.on, "a '{' after text is the text's")
	require.True(t, c.allows(c.state, ids(t, tok, "}")[0]))
	require.True(t, c.allows(c.state, 2))
}

// TestTriggerOpenerAutomaton: the opener's automaton falls back as a
// partial match breaks, so an opener that begins inside a false start is
// still found, in any split.
func TestTriggerOpenerAutomaton(t *testing.T) {
	_, err := newTrigger("abab!", grammar.State{}, nil)
	// A dead afterOpener is refused: the opener must begin the grammar.
	require.Error(t, err)
	g, err := grammar.Parse(`root ::= "abab!" [a-z]*`)
	require.NoError(t, err)
	trig, err := newTrigger("abab!", g.Start().Advance([]byte("abab!")), nil)
	require.NoError(t, err)
	text := "xabaababab!zz"
	for cut1 := 0; cut1 <= len(text); cut1++ {
		for cut2 := cut1; cut2 <= len(text); cut2++ {
			w := trig.start()
			fired := -1
			var st grammar.State
			for i, p := range []string{text[:cut1], text[cut1:cut2], text[cut2:]} {
				var f bool
				if w, st, f = trig.scan(w, []byte(p)); f {
					fired = i
					break
				}
			}
			require.GreaterOrEqual(t, fired, 0, "%d %d", cut1, cut2)
			require.False(t, st.Dead())
		}
	}
	w, _, fired := trig.scan(trig.start(), []byte("ababa!abab"))
	require.False(t, fired)
	require.Equal(t, int16(4), w.k)
}
