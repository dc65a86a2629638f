package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model/synth"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// familyGolden is llama.cpp's output on one synthetic model (see
// testdata/families/README.md): at every prompt position its top logits,
// then its greedy continuation.
type familyGolden struct {
	Vocab     int
	Positions []struct {
		Top    []int32
		Logits []float32
	}
	Greedy []int32
}

// vocabFile is the default model, whose vocabulary the synthetic models
// take; it skips where the file is absent (CI fetches it, and
// LMSTREAM_REQUIRE_MODELS makes the absence a failure).
func vocabFile(t *testing.T) *gguf.File {
	t.Helper()
	path, _ := filepath.Abs(defaultModelPath)
	testmodel.Need(t, path)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// tolFamily bounds |Δlogit| against llama.cpp on the float32 models,
// relative to the position's largest logit (at least 1). The golden data
// was recorded with llama.cpp's K/V cache in float32 (with a float16 cache
// llama.cpp also rounds each query and the softmax weights to float16,
// which adds about as much again); this package rounds K and V to float16.
// The worst seen over the set is 1.5e-3 (SmolLM3's four layers), most
// families stay under 1e-3.
const tolFamily = 2e-3

// tolQuantized is tolFamily for a model with quantized weights (gpt-oss's
// MXFP4 experts, whose inputs both sides quantize to Q8_0). There a value
// near a rounding boundary turns the float16 rounding of K and V (this
// package's, not the recording's) into a whole Q8_0 step, and such steps
// move this small model's logits a lot: two equally valid roundings of
// the activations (against the stored float16 scale, as this package
// does, or the unrounded one, as GGML does) move its top logits by up to
// 6.4e-3 relative, and llama.cpp's differ from these by up to 7.7e-3 (the
// float32 gpt-oss file, gpt-oss-f32, stays within tolFamily). A real
// fault is larger: leaving out the experts' down biases (σ = 0.1) moves
// every position by 2.1e-2 or more, up to 0.22.
const tolQuantized = 1e-2

// TestFamiliesMatchLlamaCpp runs each synthetic model of every family
// over the golden prompt and compares with llama.cpp: the top logits at
// every position within tolFamily, and the 32 greedy tokens identical.
// LMSTREAM_SYNTH_DIR=dir writes the model files there (to record the
// golden data with llama.cpp).
func TestFamiliesMatchLlamaCpp(t *testing.T) { checkFamilies(t, synth.Set(), tolFamily) }

// tolQuantTypes is tolQuantized for QuantSet's models, whose every matrix
// is quantized (two layers and the head): both sides quantize the
// activations to Q8_0 or Q8_K blocks, rounding against different scales
// (see tolQuantized), and each matrix adds its own share. The worst seen
// is 3.0e-2 (Q6_K), most types stay under 2e-2; llama.cpp also rounds the
// activations of float16 and bfloat16 weights to those types (3.8e-3 for
// bfloat16), which this package keeps in float32.
const tolQuantTypes = 4e-2

// TestQuantTypesMatchLlamaCpp is TestFamiliesMatchLlamaCpp for one model
// per weight type.
func TestQuantTypesMatchLlamaCpp(t *testing.T) { checkFamilies(t, synth.QuantSet(), tolQuantTypes) }

func checkFamilies(t *testing.T, specs []synth.Spec, tol float64) {
	if raceEnabled {
		t.Skip("too slow under -race; the tiny models cover the same code")
	}
	vocab := vocabFile(t)
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			data, err := synth.Write(spec, vocab)
			require.NoError(t, err)
			if dir := os.Getenv("LMSTREAM_SYNTH_DIR"); dir != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, spec.Name+".gguf"), data, 0o644))
			}
			raw, err := os.ReadFile(filepath.Join("testdata", "families", spec.Name+".json"))
			if os.IsNotExist(err) && os.Getenv("LMSTREAM_SYNTH_DIR") != "" {
				t.Skip("no golden data yet; the file was written for recording")
			}
			require.NoError(t, err)
			var g familyGolden
			require.NoError(t, json.Unmarshal(raw, &g))
			f, err := gguf.Parse(data)
			require.NoError(t, err)
			m, err := Load(f, 2)
			require.NoError(t, err)
			defer m.Close()
			m.SetContext(spec.Context)
			require.Equal(t, g.Vocab, m.Config().Vocab)

			c := m.NewCache(spec.Context)
			rows := run(t, m, new(Batch).chain(c, synth.Prompt, true))
			require.Len(t, g.Positions, len(rows))
			tol := tol
			quantized := spec.Weights != quant.F32 || spec.ExpertWeights != quant.F32
			if quantized {
				tol = max(tol, tolQuantized)
			}
			worst := 0.0
			for i, p := range g.Positions {
				scale := math.Max(1, math.Abs(float64(p.Logits[0])))
				// The top token is llama.cpp's, unless its runner-up is
				// within the tolerance twice over (a knife edge either
				// side of which is right).
				if float64(p.Logits[0]-p.Logits[1]) > 2*tol*scale {
					require.Equal(t, p.Top[0], argmax(rows[i]), "position %d: llama.cpp's top token", i)
				}
				for j, id := range p.Top {
					d := math.Abs(float64(rows[i][id]-p.Logits[j])) / scale
					worst = math.Max(worst, d)
					require.LessOrEqual(t, d, tol, "position %d, token %d: %g, llama.cpp %g", i, id, rows[i][id], p.Logits[j])
				}
			}
			// The continuation follows llama.cpp's greedy tokens: each must
			// be ours, or a near tie within the tolerance (after which
			// free-running sequences would part, and nothing more would
			// be compared).
			commitAll(t, c)
			row, same := rows[len(rows)-1], 0
			for k, want := range g.Greedy {
				if k > 0 {
					row = run(t, m, new(Batch).chain(c, g.Greedy[k-1:k], false))[0]
					commitAll(t, c)
				}
				top := argmax(row)
				if top == want {
					same++
					continue
				}
				gap := float64(row[top]-row[want]) / math.Max(1, math.Abs(float64(row[top])))
				require.LessOrEqual(t, gap, 2*tol, "greedy token %d: llama.cpp's %d, ours %d", k, want, top)
			}
			if !quantized {
				require.Equal(t, len(g.Greedy), same, "greedy tokens")
			}
			t.Logf("%s: max relative Δlogit %.2g over %d positions, %d of %d greedy tokens identical, the rest near ties",
				spec.Name, worst, len(rows), same, len(g.Greedy))
		})
	}
}

// TestFamilyFilesLoad: every synthetic model loads (whether or not golden
// data exists for it yet), and its configuration says what its family and
// metadata ask for.
func TestFamilyFilesLoad(t *testing.T) {
	vocab := vocabFile(t)
	for _, spec := range synth.Set() {
		data, err := synth.Write(spec, vocab)
		require.NoError(t, err, spec.Name)
		f, err := gguf.Parse(data)
		require.NoError(t, err, spec.Name)
		cfg, err := ReadConfig(f)
		require.NoError(t, err, spec.Name)
		require.Equal(t, spec.Arch, cfg.Arch)
		require.NotEmpty(t, cfg.Extras(), spec.Name)
	}
}

// TestPhi3WindowOnEveryLayer checks Phi-3's sliding window, which
// llama.cpp does not apply (so there is no golden for it) and
// transformers applies on every layer: with L layers and a window of W
// positions (the query's own included), position p depends on positions
// p-L(W-1) to p and on none before. Changing the token just outside
// that reach leaves p's logits exactly as they were; changing the first
// one inside it does not.
func TestPhi3WindowOnEveryLayer(t *testing.T) {
	vocab := vocabFile(t)
	const window, p = 6, 24
	spec := synth.Set()[0]
	for _, s := range synth.Set() {
		if s.Arch == "phi3" {
			spec = s
		}
	}
	require.Equal(t, "phi3", spec.Arch)
	spec.KV = map[string]any{"attention.sliding_window": uint32(window)}
	spec.LongRope = false
	data, err := synth.Write(spec, vocab)
	require.NoError(t, err)
	f, err := gguf.Parse(data)
	require.NoError(t, err)
	m, err := Load(f, 2)
	require.NoError(t, err)
	defer m.Close()
	cfg := m.Config()
	for li := range cfg.Layers {
		require.True(t, cfg.Local(li), "layer %d", li)
	}
	reach := cfg.Layers * (window - 1)
	prompt := make([]int32, p+1)
	for i := range prompt {
		prompt[i] = int32(100 + 7*i)
	}
	logitsAt := func(tokens []int32) []float32 {
		c := m.NewCache(spec.Context)
		rows := run(t, m, new(Batch).chain(c, tokens, true))
		return rows[p]
	}
	base := logitsAt(prompt)
	changed := func(at int) bool {
		other := append([]int32(nil), prompt...)
		other[at] += 3
		got := logitsAt(other)
		for i := range got {
			if got[i] != base[i] {
				return true
			}
		}
		return false
	}
	require.False(t, changed(p-reach-1), "a token outside the window's reach changed the logits")
	require.True(t, changed(p-reach), "the farthest token inside the window's reach changed nothing")
}
