package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/spec/sim"
	"github.com/lmstream/lmstream/streaming"
)

// BenchmarkNGramCeiling asks how fast an n-gram drafter could make a
// prompt set on this machine. It decodes each prompt greedily and plainly,
// then replays the answers against the engine's own cost curve (measured
// as at start-up) with three drafters:
//
//   - "foresight, newest": the rule the n-gram index drafts by (the newest
//     occurrence of the longest matching suffix, orders 1 to 32, matched
//     again at every drafted token), drafting exactly the tokens that will
//     be accepted. No rejected token is ever verified.
//   - "foresight, any": at every drafted token, any earlier occurrence of
//     any suffix that is followed by the right token: a tree with every
//     n-gram continuation in it, pruned to the accepted path for free.
//   - "order rates": no foresight. The newest-longest rule (orders 1 to 8)
//     knows in advance how often a match of each order was right over the
//     whole set, and drafts while the path's probability pays for the
//     next token's share of the pass (the engine's stop rule, on the
//     curve's slope at that depth).
//   - "order rates, 2-8": the same, over the orders the index drafts from
//     (spec.NGramDrafter's defaults: no one-token matches). It is what
//     the engine's n-gram drafter can know, short of per-request
//     calibration and trees. On the Qwen2.5-Coder 1.5B's edit answers
//     (session 23, the 2-core Zen 5 EPYC) it came to 1.32x when the
//     memory was fast (T(1) 16.6 ms) and 1.43x on a slow minute's curve
//     (T(1) 24.6 ms), where the engine measured 1.44x. Most of those
//     answers are new text: of their 682 tokens, 238 are what the newest
//     occurrence of their longest match of 2 to 8 tokens predicted, so
//     even that rule drafting exactly those, for free, would stay under
//     682/(682-238) = 1.54x.
//
// A pass drafting d tokens costs T(d+1), plain decoding T(1) a token, and
// nothing else is charged (sampling, verification, the index), so the
// foresight figures are ceilings and the last is about the best a drafter
// that knows only match lengths can do; the engine's measured speedup is
// BenchmarkSpeculation's. Drafts are capped at 15 tokens, a 16-token pass.
//
//	LMSTREAM_SPEC_MODEL=$PWD/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
//	LMSTREAM_SPEC_DRAFT=$PWD/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
//	LMSTREAM_SPEC_SETS=edit,rewrite,code \
//	go test -run '^$' -bench NGramCeiling -benchtime 1x -timeout 0 ./core/engine
//
// LMSTREAM_SPEC_TOKENS sets the tokens per answer (128).
func BenchmarkNGramCeiling(b *testing.B) {
	skipWithoutModel(b)
	_, _, tokens, _ := specBenchEnv("")
	const maxDraft = 15
	var out strings.Builder
	for b.Loop() {
		curve, err := MeasureCurve("cpu", loadCPU, specBenchModel(), benchThreads, maxDraft+1, 1)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "\ncurve: T(1) %.1f ms, T(2)/T(1) %.3f, T(4) %.3f, T(8) %.3f, T(16) %.3f\n",
			ms(curve.At(1)), ratio(curve, 2), ratio(curve, 4), ratio(curve, 8), ratio(curve, 16))
		fmt.Fprintf(&out, "%-9s %8s %18s %16s %12s %17s\n", "set", "answers", "foresight, newest", "foresight, any", "order rates", "order rates, 2-8")
		for _, set := range strings.Split(envOr("LMSTREAM_SPEC_SETS", "grounded,chat"), ",") {
			answers := greedyAnswers(b, loadPrompts(b, set+".jsonl"), tokens)
			fmt.Fprintf(&out, "%-9s %8d %17.2fx %15.2fx %11.2fx %16.2fx\n", set, len(answers),
				replayCeiling(answers, curve, maxDraft, newestContinues),
				replayCeiling(answers, curve, maxDraft, anyContinues),
				replayOrderRates(answers, curve, maxDraft, ceilingMinOrder),
				replayOrderRates(answers, curve, maxDraft, indexMinOrder))
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
	bk, rt := startBench(b, benchConfig(""))
	defer rt.Close()
	var answers []answer
	for _, p := range prompts {
		text, err := bk.RenderChat([]loop.Message{{Role: "user", Content: p}}, true, nil)
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
	ceilingMinOrder = 1
	// indexMinOrder is the shortest match spec.NGramDrafter drafts from
	// by default.
	indexMinOrder   = 2
	ceilingMaxOrder = 32
)

// replay is plain decoding's time over a drafter's, on the curve. For
// each pass, pass(ctx, rest) says how many tokens the drafter drafts after
// ctx and how many of them the rest of the answer accepts; the pass costs
// T(drafted+1) and emits the accepted tokens and the target's own next
// one. pass must not keep ctx.
func replay(answers []answer, curve sim.Curve, pass func(ctx, rest []int32) (drafted, accepted int)) float64 {
	var plain, spec time.Duration
	for _, a := range answers {
		ctx := append([]int32(nil), a.prompt...)
		for i := 0; i < len(a.out); {
			d, acc := pass(ctx, a.out[i:])
			spec += curve.At(d + 1)
			emit := min(acc+1, len(a.out)-i)
			ctx = append(ctx, a.out[i:i+emit]...)
			i += emit
		}
		plain += time.Duration(len(a.out)) * curve.At(1)
	}
	return float64(plain) / float64(spec)
}

// replayCeiling replays a foreseeing drafter: each pass drafts the longest
// run of answer tokens that proposes accepts (at most maxDraft), all of
// them accepted.
func replayCeiling(answers []answer, curve sim.Curve, maxDraft int, proposes continues) float64 {
	return replay(answers, curve, func(ctx, rest []int32) (int, int) {
		d := 0
		for d < maxDraft && d < len(rest) && proposes(append(ctx, rest[:d]...), rest[d]) {
			d++
		}
		return d, d
	})
}

// newestContinues: the newest earlier occurrence of the longest suffix of
// ctx (orders ceilingMinOrder to ceilingMaxOrder) is followed by want.
func newestContinues(ctx []int32, want int32) bool {
	next, order := newestLongest(ctx, ceilingMinOrder, ceilingMaxOrder)
	return order > 0 && next == want
}

// newestLongest is the token after the newest earlier occurrence of the
// longest suffix of ctx of order minOrder to maxOrder, and that order (0
// when none occurs).
func newestLongest(ctx []int32, minOrder, maxOrder int) (next int32, order int) {
	for k := min(maxOrder, len(ctx)-1); k >= minOrder; k-- {
		for end := len(ctx) - 1; end >= k; end-- {
			if equalTokens(ctx[end-k:end], ctx[len(ctx)-k:]) {
				return ctx[end], k
			}
		}
	}
	return 0, 0
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

// rateMaxOrder is the longest match the "order rates" drafter looks for,
// the index's default.
const rateMaxOrder = 8

// replayOrderRates is plain decoding's time over that of a drafter without
// foresight: it chains newestLongest's proposals (orders minOrder to
// rateMaxOrder), each taken as right with its order's hit rate over all
// the answers, while the path's probability times T(1) exceeds what the
// next drafted token adds to the pass.
func replayOrderRates(answers []answer, curve sim.Curve, maxDraft, minOrder int) float64 {
	var hits, seen [rateMaxOrder + 1]float64
	for _, a := range answers {
		ctx := append([]int32(nil), a.prompt...)
		for _, t := range a.out {
			if next, k := newestLongest(ctx, minOrder, rateMaxOrder); k > 0 {
				seen[k]++
				if next == t {
					hits[k]++
				}
			}
			ctx = append(ctx, t)
		}
	}
	return replay(answers, curve, func(ctx, rest []int32) (int, int) {
		d, p := 0, 1.0
		path := append([]int32(nil), ctx...)
		for d < maxDraft {
			next, k := newestLongest(path, minOrder, rateMaxOrder)
			if k == 0 || seen[k] == 0 {
				break
			}
			p *= hits[k] / seen[k]
			if p*float64(curve.At(1)) <= float64(curve.At(d+2)-curve.At(d+1)) {
				break
			}
			path = append(path, next)
			d++
		}
		acc := 0
		for acc < d && acc < len(rest) && path[len(ctx)+acc] == rest[acc] {
			acc++
		}
		return d, acc
	})
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
// nothing else, the newest-occurrence rule misses what only an older
// occurrence continues, and the order-rates drafter drafts as far as its
// rates pay.
func TestReplayCeiling(t *testing.T) {
	flat := sim.Flat(time.Millisecond)
	// 1 has no earlier context; then "1" is followed by 2, "1 2" by 3, ...
	copyable := []answer{{prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, out: []int32{1, 2, 3, 4, 5}}}
	for name, p := range map[string]continues{"newest": newestContinues, "any": anyContinues} {
		if got := replayCeiling(copyable, flat, 15, p); got != 5.0/2 {
			t.Errorf("%s: copy after a plain token: %v, want 5/2", name, got)
		}
		if got := replayCeiling(copyable, flat, 1, p); got != 5.0/3 {
			t.Errorf("%s: one token a draft: %v, want 5/3", name, got)
		}
	}
	// Every match of the copy was right, so the rates are 1 and it drafts
	// the whole copy; an order never seen is not drafted from.
	if got := replayOrderRates(copyable, flat, 15, ceilingMinOrder); got != 5.0/2 {
		t.Errorf("order rates, copy: %v, want 5/2", got)
	}
	// "7 8" was last followed by 3 ("9 7 8", the longest match, too),
	// before that by 4: only "any" drafts 4.
	older := []answer{{prompt: []int32{7, 8, 4, 9, 7, 8, 3, 9, 7, 8}, out: []int32{4, 5}}}
	if got := replayCeiling(older, flat, 15, newestContinues); got != 1 {
		t.Errorf("newest: %v, want 1 (nothing drafted)", got)
	}
	if got := replayCeiling(older, flat, 15, anyContinues); got != 2 {
		t.Errorf("any: %v, want 2 (4 drafted)", got)
	}
	// Both of its matches were wrong (rate 0): the order-rates drafter
	// drafts nothing, where a drafted token costs a tenth of a pass.
	gentle := sim.Curve{Name: "gentle", N: []int{1, 2}, T: []time.Duration{time.Millisecond, 1100 * time.Microsecond}}
	if got := replayOrderRates(older, gentle, 15, ceilingMinOrder); got != 1 {
		t.Errorf("order rates, wrong matches: %v, want 1", got)
	}
	// Only a one-token match ("1", last followed by 5) predicts this
	// answer: the index's orders (2 and up) draft nothing from it, and
	// their one match ("1 5", followed by 9 where 7 came) has rate 0.
	oneToken := []answer{{prompt: []int32{1, 5, 9}, out: []int32{1, 5, 7}}}
	if got := replayOrderRates(oneToken, flat, 15, ceilingMinOrder); got != 1.5 {
		t.Errorf("order rates 1-8, a one-token match: %v, want 1.5", got)
	}
	if got := replayOrderRates(oneToken, flat, 15, indexMinOrder); got != 1 {
		t.Errorf("order rates 2-8, a one-token match: %v, want 1", got)
	}
	// A pass of d+1 tokens costs T(d+1): here 1 + 5 ms against 5 ms
	// plain, as the last pass verifies 4 drafts and the answer then ends.
	linear := sim.Curve{Name: "linear", N: []int{1, 2}, T: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
	if got := replayCeiling(copyable, linear, 15, anyContinues); got != 5.0/6 {
		t.Errorf("linear curve: %v, want 5/6", got)
	}
}
