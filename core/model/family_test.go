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
	Greedy       []int32
	GreedyMargin []float32 `json:"greedy_margin"` // llama.cpp's top logit less its runner-up, per greedy step
}

// vocabFile is the default model, whose vocabulary the synthetic models
// take; it skips where the file is absent (CI fetches it, and
// LMSTREAM_REQUIRE_MODELS makes the absence a failure).
func vocabFile(t *testing.T) *gguf.File {
	t.Helper()
	path, _ := filepath.Abs(defaultModelPath)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("LMSTREAM_REQUIRE_MODELS") != "" {
			t.Fatalf("default model not found at %s: %v", path, err)
		}
		t.Skipf("default model not found at %s (run `make model`): %v", path, err)
	}
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

// TestFamiliesMatchLlamaCpp runs each synthetic model of every family
// over the golden prompt and compares with llama.cpp: the top logits at
// every position within tolFamily, and the 32 greedy tokens identical.
// LMSTREAM_SYNTH_DIR=dir writes the model files there (to record the
// golden data with llama.cpp).
func TestFamiliesMatchLlamaCpp(t *testing.T) { checkFamilies(t, synth.Set(), tolFamily) }

// tolQuantTypes is tolFamily for the quantized weight types: both sides
// quantize activations the same way (Q8_0 or Q8_K blocks), but llama.cpp
// rounds them to float16 or bfloat16 for float16 and bfloat16 weights,
// where this package keeps float32.
const tolQuantTypes = 3e-2

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
			require.Len(t, g.GreedyMargin, len(g.Greedy))
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
			commitAll(t, c)
			// The greedy tokens are llama.cpp's up to the first step whose
			// runner-up is within the tolerance twice over: past a knife
			// edge either continuation is right.
			edge := 2 * tol * topScale(g)
			got := []int32{argmax(rows[len(rows)-1])}
			n := 0
			for i := range g.Greedy {
				if float64(g.GreedyMargin[i]) <= edge {
					break
				}
				require.Equal(t, g.Greedy[i], got[i], "greedy token %d", i)
				n++
				if i+1 < len(g.Greedy) {
					row := run(t, m, new(Batch).chain(c, got[i:i+1], false))
					commitAll(t, c)
					got = append(got, argmax(row[0]))
				}
			}
			t.Logf("%s: max relative Δlogit %.2g over %d positions, %d of %d greedy tokens identical (then a knife edge)",
				spec.Name, worst, len(rows), n, len(g.Greedy))
		})
	}
}

// topScale is the largest top logit of the prompt positions (at least 1),
// the scale the tolerances are relative to.
func topScale(g familyGolden) float64 {
	s := 1.0
	for _, p := range g.Positions {
		s = math.Max(s, math.Abs(float64(p.Logits[0])))
	}
	return s
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
