package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// TestForwardHead: logits for the first token ids only are exactly those
// ids' logits of a full pass, with the head tied or untied, and the cache
// holds the same entries.
func TestForwardHead(t *testing.T) {
	for _, untied := range []bool{false, true} {
		s := defaultTiny(quant.Q8_0)
		s.untied = untied
		m, _ := tinyModel(t, s, 1)
		toks := []int32{1, 17, 40, 3, 88}
		full := make([]float32, len(toks)*s.vocab)
		cf := m.NewCache(16)
		require.NoError(t, m.Forward(new(Batch).chain(cf, toks, true), full))
		for _, rows := range []int{32, 64, 70} {
			w := rows / 16 * 16
			got := make([]float32, len(toks)*w)
			ch := m.NewCache(16)
			require.NoError(t, m.ForwardHead(new(Batch).chain(ch, toks, true), got, rows))
			for i := range toks {
				require.Equal(t, full[i*s.vocab:i*s.vocab+w], got[i*w:(i+1)*w], "untied %v rows %d token %d", untied, rows, i)
			}
			wantK, wantV := cf.Entries(1, 0, 0, len(toks))
			gotK, gotV := ch.Entries(1, 0, 0, len(toks))
			require.Equal(t, wantK, gotK)
			require.Equal(t, wantV, gotV)
		}
		// Too few floats for the rows asked is an error, not a write past them.
		require.Error(t, m.ForwardHead(new(Batch).chain(m.NewCache(16), toks, true), make([]float32, 10), 32))
		// The full head is back for the next Forward.
		again := make([]float32, len(toks)*s.vocab)
		require.NoError(t, m.Forward(new(Batch).chain(m.NewCache(16), toks, true), again))
		require.Equal(t, full, again)
	}
}
