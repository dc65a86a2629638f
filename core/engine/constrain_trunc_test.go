package engine

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// TestTruncatedConstrainedSamplingIsTheMaskedOne: with top-k, top-p and
// min-p, constraint.sample finds the likeliest allowed tokens by testing
// them one at a time instead of masking the vocabulary; on the default
// model's 49,152-token vocabulary and a JSON schema's grammar, at many
// states along random valid outputs and with random model-like rows (the
// grammar's tokens favoured or not), the distribution it settles on is
// the masked row's bit for bit, and seeded samplers draw the same token
// through constraint.sample as from the masked row.
func TestTruncatedConstrainedSamplingIsTheMaskedOne(t *testing.T) {
	modelPath := filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	testmodel.Need(t, modelPath)
	f, err := gguf.Open(modelPath)
	require.NoError(t, err)
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	require.NoError(t, err)
	b := &Backend{tok: tok}
	trie := b.vocabTrie()
	g, err := grammar.FromSchema([]byte(truncSchema))
	require.NoError(t, err)
	vocab := tok.Size()

	settings := []sample.Params{
		{Temperature: 0.8, TopK: 40},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1, MinP: 0.05},
		{Temperature: 0.7, TopK: 50, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1},
	}
	steps := 120
	if testing.Short() || race.Enabled {
		steps = 40
	}
	r := rand.New(rand.NewPCG(3, 4))
	row := make([]float32, vocab)
	for si, p := range settings {
		p.Seed, p.HasSeed = uint64(si), true
		ref, err := sample.New(p, vocab)
		require.NoError(t, err)
		fast, err := sample.New(p, vocab)
		require.NoError(t, err)
		c := newConstraint(g, trie, nil)
		s := g.Start()
		settled := 0
		for range steps {
			mask := c.m.Mask(s)
			var allowed []int32
			for id := range int32(vocab) {
				if grammar.Allowed(mask, id) {
					allowed = append(allowed, id)
				}
			}
			// A model's row: a broad bulk and a few strong tokens, most of
			// them the grammar's (a model following it), some not.
			for i := range row {
				row[i] = float32(r.NormFloat64() * 2.5)
			}
			// Peaked rows (a model sure of the next token, as a JSON
			// document's syntax mostly makes it) and flatter ones.
			top := float32(8 + 10*r.Float64())
			for range 1 + r.IntN(8) {
				row[allowed[r.IntN(len(allowed))]] = top + float32(r.NormFloat64()*3)
			}
			for range r.IntN(6) {
				row[r.IntN(vocab)] = top + float32(r.NormFloat64()*2)
			}
			masked, ok := c.logits(inGrammar(s), row)
			require.True(t, ok)
			want := ref.Distribution(masked).Clone()
			got, settles := fast.DistributionAllowed(row, func(id int32) bool { return trie.Allows(s, id) })
			if settles {
				settled++
				require.Equal(t, want.IDs, got.IDs, "setting %+v", p)
				require.Equal(t, want.Probs, got.Probs, "setting %+v", p)
			}
			// The decoder's path (the scan, or the mask where it does not
			// settle) draws what the masked row draws with the same seed.
			masked, _ = c.logits(inGrammar(s), row)
			wantTok := ref.Sample(masked)
			gotTok, ok := c.sample(inGrammar(s), row, fast)
			require.True(t, ok)
			require.Equal(t, wantTok, gotTok)
			ref.Accept(gotTok)
			fast.Accept(gotTok)
			if tok.EOG(gotTok) {
				s = g.Start()
				continue
			}
			s = s.Advance(tok.Piece(gotTok))
			require.False(t, s.Dead())
		}
		t.Logf("setting %+v: the scan settled %d of %d steps", p, settled, steps)
		require.Greater(t, settled, 0, "the scan never settled: untested")
	}
}

// truncSchema has free strings (most tokens allowed), numbers, an enum
// and fixed keys (few allowed), so the scan meets every kind of state.
const truncSchema = `{"type":"array","items":{"type":"object","properties":{
  "name":{"type":"string","maxLength":40},"age":{"type":"integer"},
  "height":{"type":"number"},"role":{"enum":["admin","user","guest"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
  "required":["name","age","role"]}}`
