//go:build !noasm

package model

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"

	"github.com/lmstream/lmstream/core/quant"
)

// kernelSets lists the assembly kernel sets this machine can run: AVX-512
// machines run both.
func kernelSets() []string {
	var sets []string
	if cpu.X86.HasAVX512F {
		sets = append(sets, "avx512")
	}
	if canAVX2 {
		sets = append(sets, "avx2")
	}
	return sets
}

// useKernels selects a kernel set (one of kernelSets) until the test ends.
func useKernels(tb testing.TB, set string) {
	a512, a2 := haveAVX512, haveAVX2
	tb.Cleanup(func() {
		haveAVX512, haveAVX2 = a512, a2
		haveSIMD = haveAVX512 || haveAVX2
	})
	haveAVX512, haveAVX2 = set == "avx512", set == "avx2"
	haveSIMD = haveAVX512 || haveAVX2
}

// On a machine with both sets, the AVX2 kernels give the AVX-512 kernels'
// logits bit for bit: a chain prefill with every logit, then decode steps,
// on models whose heads take the grouped path (hd 64 and 128) and the
// per-head one (hd 48).
func TestKernelSetsAgree(t *testing.T) {
	if len(kernelSets()) < 2 {
		t.Skip("needs AVX-512 and AVX2 (to compare the two kernel sets)")
	}
	hd48, hd128, qwen := defaultTiny(quant.Q8_0), defaultTiny(quant.Q4_1), defaultTiny(quant.Q8_0)
	hd48.embd = 192
	hd128.embd, hd128.heads, hd128.kvHeads = 512, 4, 1
	qwen.arch = "qwen2"
	for name, spec := range map[string]tinySpec{"Q4_1": defaultTiny(quant.Q4_1), "hd48": hd48, "hd128": hd128, "qwen2": qwen} {
		t.Run(name, func(t *testing.T) {
			m, _ := tinyModel(t, spec, 2)
			r := rand.New(rand.NewPCG(7, 7))
			toks := randTokens(r, 75, m.Config().Vocab)
			logits := map[string][][]float32{}
			for _, set := range kernelSets() {
				t.Run(set, func(t *testing.T) {
					useKernels(t, set)
					c := m.NewCache(96)
					rows := run(t, m, new(Batch).chain(c, toks[:70], true))
					commitAll(t, c)
					for _, tok := range toks[70:] {
						rows = append(rows, run(t, m, new(Batch).chain(c, []int32{tok}, true))...)
						commitAll(t, c)
					}
					logits[set] = rows
				})
			}
			require.Equal(t, logits["avx512"], logits["avx2"])
		})
	}
}
