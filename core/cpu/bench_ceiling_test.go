package cpu

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lmstream/lmstream/core/runtime"
	"github.com/lmstream/lmstream/spec/sim"
	"github.com/lmstream/lmstream/streaming"
)

// BenchmarkNGramCeiling asks how fast any n-gram drafter could make a
// prompt set on this machine. It decodes each prompt greedily and plainly,
// then replays the answers against the engine's own cost curve (measured
// as at start-up) with two drafters that know the future:
//
//   - "newest": the rule the n-gram index drafts by (the newest occurrence
//     of the longest matching suffix, orders 2 to 32, matched again at
//     every drafted token), drafting exactly the tokens that will be
//     accepted. No rejected token is ever verified.
//   - "any": at every drafted token, any earlier occurrence of any suffix
//     of order 2 to 32 that is followed by the right token: a tree with
//     every n-gram continuation in it, pruned to the accepted path for free.
//
// A pass drafting d tokens costs T(d+1), plain decoding T(1) a token, and
// nothing else is charged (sampling, verification, the index), so each
// figure is a ceiling: the engine's measured speedup (BenchmarkSpeculation)
// can only come below it. Drafts are capped at 15 tokens, a 16-token pass.
//
//	LMSTREAM_SPEC_MODEL=$PWD/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
//	LMSTREAM_SPEC_DRAFT=$PWD/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
//	LMSTREAM_SPEC_SETS=edit,rewrite,code \
//	go test -run '^$' -bench NGramCeiling -benchtime 1x -timeout 0 ./core/cpu
//
// LMSTREAM_SPEC_TOKENS sets the tokens per answer (128).
func BenchmarkNGramCeiling(b *testing.B) {
	skipWithoutModel(b)
	_, _, tokens, _ := specBenchEnv("")
	const maxDraft = 15
	var out strings.Builder
	for b.Loop() {
		ns, ts, err := MeasureCurve(specBenchModel(), 2, maxDraft+1)
		if err != nil {
			b.Fatal(err)
		}
		curve := sim.Curve{Name: "measured", N: ns, T: ts}
		fmt.Fprintf(&out, "\ncurve: T(1) %.1f ms, T(2)/T(1) %.3f, T(4) %.3f, T(8) %.3f, T(16) %.3f\n",
			ms(curve.At(1)), ratio(curve, 2), ratio(curve, 4), ratio(curve, 8), ratio(curve, 16))
		fmt.Fprintf(&out, "%-9s %8s %16s %16s\n", "set", "answers", "newest ceiling", "any ceiling")
		for _, set := range strings.Split(envOr("LMSTREAM_SPEC_SETS", "grounded,chat"), ",") {
			answers := greedyAnswers(b, loadPrompts(b, set+".jsonl"), tokens)
			fmt.Fprintf(&out, "%-9s %8d %15.2fx %15.2fx\n", set, len(answers),
				replayCeiling(answers, curve, maxDraft, newestContinues),
				replayCeiling(answers, curve, maxDraft, anyContinues))
		}
	}
	printTable(out.String())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(c sim.Curve, n int) float64 { return float64(c.At(n)) / float64(c.At(1)) }

// answer is a prompt's tokens, as the engine fed them, and its greedy
// answer.
type answer struct{ prompt, out []int32 }

// greedyAnswers decodes each prompt plainly and greedily, one at a time.
func greedyAnswers(b *testing.B, prompts []string, maxTokens int) []answer {
	cfg, err := runtime.ParseConfig([]byte(benchConfig("")))
	if err != nil {
		b.Fatal(err)
	}
	be, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	bk := be.(*Backend)
	rt := runtime.Start(bk, cfg.MaxSlots, cfg.MaxQueue)
	defer rt.Close()
	var answers []answer
	for _, p := range prompts {
		text, err := bk.RenderChat([]runtime.Message{{Role: "user", Content: p}}, true)
		if err != nil {
			b.Fatal(err)
		}
		prompt, _ := bk.Tokenize(text, true, true)
		req, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": p}},
			"max_tokens": maxTokens, "speculate": false})
		ch := streaming.NewChannel()
		if err := rt.Submit(req, []*streaming.Channel{ch}); err != nil {
			b.Fatal(err)
		}
		var ids []int32
		for {
			c, err := ch.WaitPop(5 * time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, c.TokenIDs...)
			if c.Finished {
				break
			}
		}
		ch.Release()
		answers = append(answers, answer{prompt, ids})
	}
	return answers
}

// continues reports whether a drafter that knows the future would propose
// want after ctx.
type continues func(ctx []int32, want int32) bool

const (
	ceilingMinOrder = 2
	ceilingMaxOrder = 32
)

// replayCeiling is plain decoding's time over a foreseeing drafter's, on
// the curve: each pass drafts the longest run of answer tokens that
// proposes accepts (at most maxDraft) and emits them plus the target's own
// next token.
func replayCeiling(answers []answer, curve sim.Curve, maxDraft int, proposes continues) float64 {
	var plain, spec time.Duration
	for _, a := range answers {
		ctx := append([]int32(nil), a.prompt...)
		for i := 0; i < len(a.out); {
			d := 0
			for d < maxDraft && i+d < len(a.out) && proposes(append(ctx, a.out[i:i+d]...), a.out[i+d]) {
				d++
			}
			spec += curve.At(d + 1)
			emit := min(d+1, len(a.out)-i)
			ctx = append(ctx, a.out[i:i+emit]...)
			i += emit
		}
		plain += time.Duration(len(a.out)) * curve.At(1)
	}
	return float64(plain) / float64(spec)
}

// newestContinues: the newest earlier occurrence of the longest suffix of
// ctx (orders ceilingMinOrder to ceilingMaxOrder) is followed by want.
func newestContinues(ctx []int32, want int32) bool {
	ok := false
	eachOccurrence(ctx, func(next int32) bool {
		ok = next == want
		return false
	})
	return ok
}

// anyContinues: some earlier occurrence of some suffix of ctx is followed
// by want.
func anyContinues(ctx []int32, want int32) bool {
	ok := false
	eachOccurrence(ctx, func(next int32) bool {
		ok = next == want
		return !ok
	})
	return ok
}

// eachOccurrence calls f with the token after each earlier occurrence of
// ctx's suffixes, longest suffix first and newest first within a length,
// until f returns false.
func eachOccurrence(ctx []int32, f func(next int32) bool) {
	for k := min(ceilingMaxOrder, len(ctx)-1); k >= ceilingMinOrder; k-- {
		suffix := ctx[len(ctx)-k:]
		for end := len(ctx) - 1; end >= k; end-- {
			if equalTokens(ctx[end-k:end], suffix) && !f(ctx[end]) {
				return
			}
		}
	}
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestReplayCeiling: the foreseeing drafters draft what was copyable and
// nothing else, and the newest-occurrence rule misses what only an older
// occurrence continues.
func TestReplayCeiling(t *testing.T) {
	flat := sim.Flat(time.Millisecond)
	// 1 and 2 have no earlier two-token context; then "1 2" copies 3 4 5.
	copyable := []answer{{prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, out: []int32{1, 2, 3, 4, 5}}}
	for name, p := range map[string]continues{"newest": newestContinues, "any": anyContinues} {
		if got := replayCeiling(copyable, flat, 15, p); got != 5.0/3 {
			t.Errorf("%s: copy after two plain tokens: %v, want 5/3", name, got)
		}
		if got := replayCeiling(copyable, flat, 1, p); got != 5.0/4 {
			t.Errorf("%s: one token a draft: %v, want 5/4", name, got)
		}
	}
	// "7 8" was last followed by 3, before that by 4: only "any" drafts 4.
	older := []answer{{prompt: []int32{7, 8, 4, 9, 7, 8, 3, 9, 7, 8}, out: []int32{4, 5}}}
	if got := replayCeiling(older, flat, 15, newestContinues); got != 1 {
		t.Errorf("newest: %v, want 1 (nothing drafted)", got)
	}
	if got := replayCeiling(older, flat, 15, anyContinues); got != 2 {
		t.Errorf("any: %v, want 2 (4 drafted)", got)
	}
	// A pass of d+1 tokens costs T(d+1): here 1 + 1 + 4 ms against 5 ms
	// plain, as the last pass verifies 3 drafts and the answer then ends.
	linear := sim.Curve{Name: "linear", N: []int{1, 2}, T: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
	if got := replayCeiling(copyable, linear, 15, anyContinues); got != 5.0/6 {
		t.Errorf("linear curve: %v, want 5/6", got)
	}
}
