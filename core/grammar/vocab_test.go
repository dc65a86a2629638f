package grammar_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// Every live state of a compiled grammar has a character some class
// takes (classes that match nothing are never entered), and a grammar
// fitted to a vocabulary (Trie.Fit) only characters whose every byte is a
// token of its own, so the mask always allows a token: the output never
// meets "no token of the vocabulary can continue". On the models'
// vocabularies (without their special tokens, which the constraint never
// allows), a grammar of rare characters is followed to its end, and one
// that needs a byte no token spells is refused.
func TestFittedGrammarsAlwaysGoOn(t *testing.T) {
	for _, name := range []string{"SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "gemma-3-270m-q4_k_m.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "..", "models", name)
			testmodel.Need(t, path)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			n := tok.Size()
			pieces := make([][]byte, n)
			eog := make([]bool, n)
			var single [256]bool
			for id := range int32(n) {
				eog[id] = tok.EOG(id)
				if !tok.IsSpecial(id) {
					pieces[id] = tok.Piece(id)
					if len(pieces[id]) == 1 {
						single[pieces[id][0]] = true
					}
				}
			}
			trie := grammar.NewTrie(pieces, eog)
			var missing []byte
			for c := range 256 {
				if utf8Byte := c < 0xc0 || c >= 0xc2 && c <= 0xf4; utf8Byte && !single[c] {
					missing = append(missing, byte(c))
				}
			}
			t.Logf("bytes without a token of their own: % x", missing)
			// JSON never needs what a vocabulary lacks here.
			js := grammar.JSONObject()
			if f, err := trie.Fit(js); err != nil || f.Start().Dead() {
				t.Fatalf("JSON objects: %v", err)
			}
			// Characters of each UTF-8 length, rare ones among them,
			// walked on the fitted grammar's mask taking the lowest
			// allowed token each time: the output always goes on to the
			// end, spelled byte by byte where no longer token fits.
			g, err := grammar.Parse(`root ::= [\x01-\x08] [\u07FF] [\uFFFD] [\U00040000-\U0010FFFF] [\x7F]`)
			if err != nil {
				t.Fatal(err)
			}
			if g, err = trie.Fit(g); err != nil {
				t.Fatal(err)
			}
			m := grammar.NewMatcher(trie)
			s := g.Start()
			var out []byte
			for !s.Accepting() {
				mask := m.Mask(s)
				next := int32(-1)
				for id := range int32(n) {
					if grammar.Allowed(mask, id) && !eog[id] {
						next = id
						break
					}
				}
				if next < 0 || len(out) > 16 {
					t.Fatalf("after %q no token continues", out)
				}
				out = append(out, pieces[next]...)
				s = s.Advance(pieces[next])
			}
			for _, c := range missing {
				if c < 0x80 {
					g, err := grammar.Parse(fmt.Sprintf(`root ::= [\x%02X]`, c))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := trie.Fit(g); err == nil {
						t.Errorf("a grammar of byte %#02x alone, which no token spells, is accepted", c)
					}
				}
			}
		})
	}
}
