package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
)

// argmaxRunner is the CPU runner with ForwardArgmax, as a GPU runner has
// it: a double below the engine, counting the passes that took that path.
type argmaxRunner struct {
	model.CPU
	passes int
}

func (r *argmaxRunner) ForwardArgmax(b *model.Batch, ids []int32) error {
	v := r.Config().Vocab
	logits := make([]float32, len(ids)*v)
	if err := r.Forward(b, logits); err != nil {
		return err
	}
	for i := range ids {
		best := 0
		for j, x := range logits[i*v : (i+1)*v] {
			if x > logits[i*v+best] {
				best = j
			}
		}
		ids[i] = int32(best)
	}
	r.passes++
	return nil
}

// argmaxBackend is tinyBackend's engine over the tiny model at path on an
// argmaxRunner, closed with the test.
func argmaxBackend(t *testing.T, path string) (loop.Backend, *argmaxRunner) {
	t.Helper()
	var ar *argmaxRunner
	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + path + `","max_slots":2,"threads":1,"context_length":64,"spec_budget":6,"spec_max_depth":3,"spec_max_width":2,"spec_adaptive":false,"spec_min_prob":0.25}`))
	require.NoError(t, err)
	be, err := New(cfg, "argmax-test", func(f *gguf.File, threads int) (model.Runner, error) {
		m, err := model.Load(f, threads)
		if err != nil {
			return nil, err
		}
		ar = &argmaxRunner{CPU: model.CPU{Model: m}}
		return ar, nil
	})
	require.NoError(t, err)
	t.Cleanup(func() { be.Close() })
	return be, ar
}

// TestArgmaxPassesDecodeTheSame: with a runner that can hand back argmaxes,
// greedy requests (plain and speculating) take that path and decode the
// tokens the logits path decodes; sampled and penalised requests keep the
// rows.
func TestArgmaxPassesDecodeTheSame(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	be, ar := argmaxBackend(t, path)
	plain := tinyBackend(t, path, "", "")
	prompt := []int32{3, 9, 4, 3, 9, 4, 3, 9}
	for _, d := range []drafterKind{draftNone, draftNGram} {
		before := ar.passes
		got := generate(t, be.(*Backend), prompt, sample.Params{}, d, 24)
		require.Equal(t, generate(t, plain, prompt, sample.Params{}, d, 24), got, "greedy, drafter %s", d)
		require.Greater(t, ar.passes, before, "greedy, drafter %s: no argmax pass", d)
	}
	before := ar.passes
	for _, p := range []sample.Params{{Temperature: 0.8, HasSeed: true, Seed: 3}, {RepetitionPenalty: 1.3}} {
		got := generate(t, be.(*Backend), prompt, p, draftNGram, 16)
		require.Equal(t, generate(t, plain, prompt, p, draftNGram, 16), got, "%+v", p)
	}
	require.Equal(t, before, ar.passes, "a sampled or penalised request took the argmax path")
}
