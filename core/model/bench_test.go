package model

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Benchmarks on the default model (skipped when it is absent). Run:
//
//	go test -run '^$' -bench . -benchtime 3s ./core/model
//
// LMSTREAM_BENCH_MODEL=/abs/path.gguf runs them on another model, and
// LMSTREAM_BENCH_NS=8,9,10 gives BenchmarkForwardN its pass sizes.
//
// Each reports tokens/s (tok/s). Decode keeps the context depth fixed: the
// token is written to scratch and never committed.

func BenchmarkDecode(b *testing.B) {
	for _, threads := range []int{1, 2} {
		for _, ctx := range []int{0, 256, 1024} {
			b.Run(fmt.Sprintf("threads=%d/ctx=%d", threads, ctx), func(b *testing.B) {
				m, _ := realModel(b, threads)
				c := m.NewCache(ctx + 8)
				if ctx > 0 {
					toks := make([]int32, ctx)
					for i := range toks {
						toks[i] = int32(100 + i%1000)
					}
					run(b, m, new(Batch).chain(c, toks, false))
					commitAll(b, c)
				}
				bt := new(Batch).chain(c, []int32{4649}, true)
				logits := make([]float32, m.Config().Vocab)
				b.ResetTimer()
				for range b.N {
					if err := m.Forward(bt, logits); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkPrefill is pp512: one Forward over a 512-token chain from an
// empty cache, logits for the last token only.
func BenchmarkPrefill(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d/pp512", threads), func(b *testing.B) {
			m, _ := realModel(b, threads)
			c := m.NewCache(512)
			toks := make([]int32, 512)
			for i := range toks {
				toks[i] = int32(100 + i%1000)
			}
			bt := new(Batch).chain(c, toks, false)
			logits := make([]float32, m.Config().Vocab)
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(bt, logits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(512*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkForwardN is one forward pass over N new tokens (a chain) with
// 256 cached, logits for all N, 2 threads: the cost of verifying N draft
// tokens. It reports ms per pass and T(N)/T(1) (T(1) from the N=1 run of
// the same invocation).
func BenchmarkForwardN(b *testing.B) {
	var t1 float64
	for _, n := range benchNs() {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			m, _ := realModel(b, 2)
			c := m.NewCache(256 + 64)
			toks := make([]int32, 256)
			for i := range toks {
				toks[i] = int32(100 + i%1000)
			}
			run(b, m, new(Batch).chain(c, toks, false))
			commitAll(b, c)
			bt := new(Batch).chain(c, toks[:n], true)
			logits := make([]float32, n*m.Config().Vocab)
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(bt, logits); err != nil {
					b.Fatal(err)
				}
			}
			ms := b.Elapsed().Seconds() * 1e3 / float64(b.N)
			if n == 1 {
				t1 = ms
			}
			b.ReportMetric(ms, "ms/pass")
			if t1 > 0 {
				b.ReportMetric(ms/t1, "T(N)/T(1)")
			}
		})
	}
}

// BenchmarkAttention is one layer's attention items for a decode token
// (N=1) and chains of 16 and 64 tokens, with 256 cached, 1 thread, run in
// order on one attnBuf (attendItems).
func BenchmarkAttention(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		m, _ := realModel(b, 1)
		c := m.NewCache(256 + 64)
		toks := make([]int32, 256)
		for i := range toks {
			toks[i] = int32(100 + i%1000)
		}
		run(b, m, new(Batch).chain(c, toks, false))
		commitAll(b, c)
		bt := new(Batch).chain(c, toks[:n], false)
		run(b, m, bt) // leaves q, the plan and the scratch K/V of bt in place
		ab := new(attnBuf)
		m.planAttnItems(bt)
		b.Run(fmt.Sprintf("N=%d/items", n), func(b *testing.B) {
			for range b.N {
				m.attendItems(5, m.s.attItems, ab)
			}
		})
	}
}

// BenchmarkAttentionLayer is one layer's whole attention step (m.attention:
// items spread over the pool) for N chain tokens over a cache of the given
// depth, at 1 and 2 threads: decode (N=1) and a prefill chunk (N=64).
func BenchmarkAttentionLayer(b *testing.B) {
	for _, depth := range []int{256, 4096} {
		for _, threads := range []int{1, 2} {
			m, _ := realModel(b, threads)
			c := m.NewCache(depth + 64)
			toks := make([]int32, depth)
			for i := range toks {
				toks[i] = int32(100 + i%1000)
			}
			run(b, m, new(Batch).chain(c, toks, false))
			commitAll(b, c)
			for _, n := range []int{1, 64} {
				b.Run(fmt.Sprintf("depth=%d/threads=%d/N=%d", depth, threads, n), func(b *testing.B) {
					bt := new(Batch).chain(c, toks[:n], false)
					run(b, m, bt)
					b.ResetTimer()
					for range b.N {
						m.attention(bt, 5)
					}
				})
			}
		}
	}
}

// BenchmarkDecodeStreams is one decode step of S separate sequences, each
// with 256 tokens cached, logits for all: the engine's pass at S busy
// slots without speculation, next to BenchmarkForwardN's chain of S tokens
// of one sequence (the cost curve the scheduler prices with), 2 threads.
func BenchmarkDecodeStreams(b *testing.B) {
	for _, n := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("S=%d", n), func(b *testing.B) {
			m, _ := realModel(b, 2)
			toks := make([]int32, 256)
			for i := range toks {
				toks[i] = int32(100 + i%1000)
			}
			bt := new(Batch)
			for range n {
				c := m.NewCache(256 + 8)
				run(b, m, new(Batch).chain(c, toks, false))
				commitAll(b, c)
				bt.chain(c, []int32{4649}, true)
			}
			logits := make([]float32, n*m.Config().Vocab)
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(bt, logits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/pass")
		})
	}
}

// benchNs is BenchmarkForwardN's pass sizes: the positive numbers of
// LMSTREAM_BENCH_NS, or powers of two to 64.
func benchNs() []int {
	var ns []int
	for _, f := range strings.Split(os.Getenv("LMSTREAM_BENCH_NS"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return []int{1, 2, 4, 8, 16, 32, 64}
	}
	return ns
}

// BenchmarkLongChat is a long chat's late turn against its first, as the
// 20-turn chat of tests/serve/bench_turns.py sends them to a server that
// keeps the conversation's entries (logits for the last token only): turn
// 20 prefills about 70 new tokens over 2,580 cached positions, turn 1 a
// 130-token prompt from an empty cache. The cached entries are filled
// (kv.Cache.Fill), not computed. It reports ms per pass, the process's CPU
// time per pass (steadier than wall time on a machine with other work),
// and for turn 20 both over turn 1's (issue 48's goal: at most 1.5).
func BenchmarkLongChat(b *testing.B) {
	for _, threads := range []int{1, 2} {
		var first, firstCPU float64
		for _, tc := range []struct {
			name      string
			cached, n int
		}{{"turn1", 0, 130}, {"turn20", 2580, 70}} {
			b.Run(fmt.Sprintf("threads=%d/%s", threads, tc.name), func(b *testing.B) {
				m, _ := realModel(b, threads)
				c := m.NewCache(tc.cached + tc.n)
				if err := c.Fill(tc.cached); err != nil {
					b.Fatal(err)
				}
				toks := make([]int32, tc.n)
				for i := range toks {
					toks[i] = int32(100 + i%1000)
				}
				bt := new(Batch).chain(c, toks, false)
				logits := make([]float32, m.Config().Vocab)
				cpu0 := cpuSeconds()
				b.ResetTimer()
				for range b.N {
					if err := m.Forward(bt, logits); err != nil {
						b.Fatal(err)
					}
				}
				ms := b.Elapsed().Seconds() * 1e3 / float64(b.N)
				cpu := (cpuSeconds() - cpu0) * 1e3 / float64(b.N)
				b.ReportMetric(ms, "ms/pass")
				b.ReportMetric(cpu, "cpu-ms/pass")
				if tc.cached == 0 {
					first, firstCPU = ms, cpu
				} else if first > 0 {
					b.ReportMetric(ms/first, "T/T(turn1)")
					b.ReportMetric(cpu/firstCPU, "cpu/cpu(turn1)")
				}
			})
		}
	}
}

// cpuSeconds is the CPU time the process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
