// Command lmsbench measures the CPU engine on a GGUF model and prints a
// table: decode and prefill tokens/s at 1 and 2 threads, the cost of one
// forward pass over N tokens relative to one token, and the weight bytes read
// per second next to a memory-bandwidth measurement taken in the same run.
//
//	lmsbench [-model PATH] [-rounds 5] [-kernels SET] [-forward-only | -no-forward | -decode-only] [-long 4096,16384]
//
// -kernels runs lmstream on one kernel set (quant.KernelSetNames: generic,
// avx2, avx512vnni, amx; default the best the CPU has), so that a machine
// can measure every set it can execute: on an AVX-512 machine, -kernels
// avx2 is what a CPU without AVX-512 runs. Compare it with a llama.cpp
// built for the same instruction set (for AVX2: GGML_NATIVE=OFF
// GGML_AVX2=ON GGML_FMA=ON GGML_F16C=ON, no AVX-512). The load average
// is printed before and after: figures taken on a busy machine are not
// worth comparing.
//
// -decode-only measures decode (tg128, and at depth 256) and the
// bandwidth alone: no prefill, no forward passes over N tokens, and
// llama-bench runs no prompt either (quick decode A/B runs of a large
// model).
//
// -long adds, at 2 threads, a prompt of each length given (prefilled in
// passes of 512 tokens, llama-bench's micro-batch) and decode after a
// context of that length (llama-bench -d), where the model's trained
// context allows: what long conversations and documents cost.
//
// Every figure is the median of -rounds measurements, with the min–max
// spread: the machines are shared and noisy, so compare ratios taken in one
// run, never absolute numbers across runs.
//
// Decode's weight bytes a second over the memory bandwidth come twice:
// the median decode rate over the median bandwidth (measured up to
// minutes apart), and "paired": each decode round (tg128) over the
// bandwidth read just before and after it, the median of those ratios.
// On a shared VM host whose bandwidth moves by a third from one second to
// the next, the first compares a decode from one minute with a bandwidth
// from another; the paired one compares like with like.
//
// Peers: when LMSTREAM_PEER_LLAMA_BENCH names llama.cpp's llama-bench
// binary, or LMSTREAM_PEER_PYTHON a Python interpreter that has
// llama-cpp-python installed, the same decode and prefill figures are
// measured for llama.cpp in the same run and printed with ratios, and so
// is the forward pass over N tokens (llama-bench: a pN prompt pass at depth
// 256, which computes logits for the last token only; llama-cpp-python:
// llama_decode with all N logits, as lmstream measures its own). Both flash
// attention settings are run and each figure keeps llama.cpp's better one.
// Nothing here builds or installs llama.cpp.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/quant"
)

type figure struct {
	name, unit string
	samples    []float64
	peer       float64 // same figure for the peer, measured in this run (0: none)
}

func (f *figure) median() float64 {
	s := append([]float64(nil), f.samples...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func (f *figure) spread() string {
	s := append([]float64(nil), f.samples...)
	sort.Float64s(s)
	return fmt.Sprintf("%.4g–%.4g", s[0], s[len(s)-1])
}

func main() {
	path := flag.String("model", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF model")
	rounds := flag.Int("rounds", 5, "measurements per figure")
	forwardOnly := flag.Bool("forward-only", false, "measure only the forward passes T(N) (kernel work: quick A/B runs)")
	noForward := flag.Bool("no-forward", false, "skip the forward passes T(N): decode, decode at depth, prefill and bandwidth only")
	decodeOnly := flag.Bool("decode-only", false, "decode, decode at depth and bandwidth only (no prefill, no forward passes T(N))")
	kernels := flag.String("kernels", "", "kernel set: "+strings.Join(quant.KernelSetNames, ", ")+" (default: the best this CPU runs)")
	longList := flag.String("long", "", "comma-separated context lengths: prefill of that many tokens and decode after them, 2 threads")
	flag.Parse()
	*noForward = *noForward || *decodeOnly
	var long []int
	for _, f := range strings.FieldsFunc(*longList, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-long: %q is not a length", f))
		}
		long = append(long, n)
	}
	if *kernels != "" {
		if err := quant.SelectKernels(*kernels); err != nil {
			fatal(err)
		}
	}
	loadBefore := loadAverage()
	f, err := gguf.Open(*path)
	if err != nil {
		fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f, 1)
	if err != nil {
		fatal(err)
	}
	// The bytes a decode step reads: every tensor but the token embedding,
	// of which it reads one row, unless the embedding doubles as the output
	// head (tied weights).
	weightBytes, decodeBytes, untied := 0, 0, false
	for _, t := range f.Tensors {
		untied = untied || t.Name == "output.weight"
	}
	for _, t := range f.Tensors {
		weightBytes += len(t.Data)
		if !(untied && t.Name == "token_embd.weight") {
			decodeBytes += len(t.Data)
		}
	}

	var figs []*figure
	add := func(name, unit string, measure func() float64) *figure {
		fg := &figure{name: name, unit: unit}
		for range *rounds {
			fg.samples = append(fg.samples, measure())
		}
		figs = append(figs, fg)
		return fg
	}

	bw := map[int]*figure{}
	decode := map[int]*figure{}
	prefill := map[int]*figure{}
	depth := map[int]*figure{}
	paired := map[int]*figure{} // each decode round over the bandwidth read just before and after it
	for _, threads := range []int{1, 2} {
		if *forwardOnly {
			break
		}
		m.SetThreads(threads)
		bw[threads] = add(fmt.Sprintf("memory read bandwidth, %d thread(s)", threads), "GB/s", func() float64 { return readBandwidth(threads) })
		paired[threads] = &figure{name: fmt.Sprintf("  the same, paired per decode round, %d thread(s)", threads), unit: "ratio"}
		decode[threads] = add(fmt.Sprintf("decode, ctx 0→128, %d thread(s)", threads), "tok/s", func() float64 {
			before := readBandwidth(threads)
			rate := decodeRate(m, 0, 128)
			read := (before + readBandwidth(threads)) / 2
			paired[threads].samples = append(paired[threads].samples, rate*float64(decodeBytes)/1e9/read)
			return rate
		})
		depth[threads] = add(fmt.Sprintf("decode at ctx 256, %d thread(s)", threads), "tok/s", func() float64 { return decodeRate(m, 256, 64) })
		if !*decodeOnly {
			prefill[threads] = add(fmt.Sprintf("prefill pp512, %d thread(s)", threads), "tok/s", func() float64 { return prefillRate(m, 512) })
		}
	}
	for _, threads := range []int{1, 2} {
		if *forwardOnly {
			break
		}
		figs = append(figs, &figure{
			name: fmt.Sprintf("weight bytes read in decode / bandwidth, %d thread(s)", threads), unit: "ratio",
			samples: []float64{decode[threads].median() * float64(decodeBytes) / 1e9 / bw[threads].median()},
		}, paired[threads])
	}
	m.SetThreads(2)
	var kept []int // the long lengths the model's context holds
	longPP, longTG := map[int]*figure{}, map[int]*figure{}
	for _, n := range long {
		if n+64 > m.Config().ContextTrain {
			fmt.Fprintf(os.Stderr, "lmsbench: -long %d: past the model's trained context (%d)\n", n, m.Config().ContextTrain)
			continue
		}
		kept = append(kept, n)
		r := min(*rounds, 2)
		fg := &figure{name: fmt.Sprintf("prefill pp%d, 2 threads", n), unit: "tok/s"}
		for range r {
			fg.samples = append(fg.samples, prefillChunked(m, n, 512))
		}
		longPP[n] = fg
		tg := &figure{name: fmt.Sprintf("decode at ctx %d, 2 threads", n), unit: "tok/s"}
		for range r {
			tg.samples = append(tg.samples, decodeAfterFill(m, n, 32))
		}
		longTG[n] = tg
		figs = append(figs, fg, tg)
	}
	var t1 float64
	forwardN := map[int]*figure{}
	ratioN := map[int]*figure{}
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		if *noForward {
			break
		}
		fg := add(fmt.Sprintf("forward over N=%d at ctx 256, 2 threads", n), "ms", func() float64 { return forwardMs(m, 256, n) })
		forwardN[n] = fg
		if n == 1 {
			t1 = fg.median()
		} else {
			ratioN[n] = &figure{name: fmt.Sprintf("  T(%d)/T(1)", n), unit: "ratio", samples: []float64{fg.median() / t1}}
			figs = append(figs, ratioN[n])
		}
	}

	var peer map[string]float64
	var peerErr error
	switch {
	case os.Getenv("LMSTREAM_PEER_LLAMA_BENCH") != "":
		peer, peerErr = llamaBench(os.Getenv("LMSTREAM_PEER_LLAMA_BENCH"), *path, *rounds, !*noForward && !*forwardOnly, !*forwardOnly, *decodeOnly, kept)
	case os.Getenv("LMSTREAM_PEER_PYTHON") != "":
		peer, peerErr = llamaCpp(os.Getenv("LMSTREAM_PEER_PYTHON"), *path, *rounds)
	}
	if peer != nil || peerErr != nil {
		err := peerErr
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer: llama.cpp not measured:", err)
		} else {
			for threads := 1; threads <= 2; threads++ {
				decode[threads].peer = peer[fmt.Sprintf("tg128_t%d", threads)]
				if prefill[threads] != nil {
					prefill[threads].peer = peer[fmt.Sprintf("pp512_t%d", threads)]
				}
				depth[threads].peer = peer[fmt.Sprintf("tgd256_t%d", threads)]
			}
			for n, fg := range longPP {
				fg.peer = peer[fmt.Sprintf("pp%d_t2", n)]
				longTG[n].peer = peer[fmt.Sprintf("tgd%d_t2", n)]
			}
			for n, fg := range forwardN {
				fg.peer = peer[fmt.Sprintf("forward_n%d", n)]
				if p1 := peer["forward_n1"]; ratioN[n] != nil && p1 > 0 {
					ratioN[n].peer = fg.peer / p1
				}
			}
		}
	}

	fmt.Printf("model %s (%.1f MB of weights, %.1f MB read a decode step), Go %s, GOMAXPROCS %d, %d rounds\n\n", *path, float64(weightBytes)/1e6, float64(decodeBytes)/1e6, runtime.Version(), runtime.GOMAXPROCS(0), *rounds)
	fmt.Printf("CPU %s, %d logical CPUs, kernels %s\n", cpuModel(), runtime.NumCPU(), quant.Kernels())
	fmt.Printf("load average (1, 5, 15 min) before: %s, after: %s\n\n", loadBefore, loadAverage())
	fmt.Printf("ratio = lmstream ÷ llama.cpp: above 1 is better for tok/s, below 1 for ms and T(N)/T(1)\n\n")
	fmt.Printf("%-52s %10s %-6s %-17s %12s %8s\n", "figure", "median", "unit", "min–max", "llama.cpp", "ratio")
	for _, fg := range figs {
		peer, ratio := "", ""
		if fg.peer > 0 {
			peer, ratio = fmt.Sprintf("%.4g", fg.peer), fmt.Sprintf("%.2f×", fg.median()/fg.peer)
		}
		spread := ""
		if len(fg.samples) > 1 {
			spread = fg.spread()
		}
		fmt.Printf("%-52s %10.4g %-6s %-17s %12s %8s\n", fg.name, fg.median(), fg.unit, spread, peer, ratio)
	}
}

// readBandwidth reads a 256 MB buffer (far beyond the caches) on threads
// goroutines with quant.ReadSum's SIMD loads, as decode streams the
// weights.
func readBandwidth(threads int) float64 {
	buf := bandwidthBuf()
	best := 0.0
	for range 3 { // the best of three: a shared machine only ever slows a pass down
		best = max(best, readPass(buf, threads))
	}
	return best
}

func readPass(buf []byte, threads int) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	sums := make([]uint64, threads*8)
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[t*8] = quant.ReadSum(buf[t*len(buf)/threads : (t+1)*len(buf)/threads])
		}()
	}
	wg.Wait()
	return float64(len(buf)) / time.Since(start).Seconds() / 1e9
}

// bandwidthBuf is the probe's buffer, on huge pages as the packed weights
// are: on 4 KiB pages the probe read a 2-core KVM Xeon's memory at 6-10
// GB/s while a 1.5B decode step streamed its weights at 23.
var bandwidthBuf = sync.OnceValue(func() []byte {
	const size = 256 << 20
	b := quant.NewArena(size).Bytes(size)
	if b == nil {
		b = make([]byte, size)
	}
	for i := range b {
		b[i] = byte(i)
	}
	return b
})

func chain(c *kv.Cache, toks []int32, allLogits bool) *model.Batch {
	b := &model.Batch{}
	base := c.Len()
	for i, t := range toks {
		b.Tokens = append(b.Tokens, t)
		b.Cache = append(b.Cache, c)
		b.Pos = append(b.Pos, base+i)
		b.Parent = append(b.Parent, i-1)
		b.Logits = append(b.Logits, allLogits || i == len(toks)-1)
	}
	return b
}

func tokens(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(100 + (i*7919)%5000)
	}
	return t
}

func commitAll(c *kv.Cache, n int) {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if err := c.Commit(idx); err != nil {
		fatal(err)
	}
}

// decodeRate feeds n tokens one at a time after a context of ctx tokens.
func decodeRate(m *model.Model, ctx, n int) float64 {
	c := m.NewCache(ctx + n + 1)
	logits := make([]float32, m.Config().Vocab)
	if ctx > 0 {
		forward(m, chain(c, tokens(ctx), false), logits)
		commitAll(c, ctx)
	}
	start := time.Now()
	for i := range n {
		forward(m, chain(c, []int32{int32(200 + i)}, true), logits)
		commitAll(c, 1)
	}
	return float64(n) / time.Since(start).Seconds()
}

// prefillChunked is the rate of a prompt of n tokens fed in passes of
// chunk tokens, logits for the last token only.
func prefillChunked(m *model.Model, n, chunk int) float64 {
	c := m.NewCache(n)
	logits := make([]float32, m.Config().Vocab)
	toks := tokens(n)
	start := time.Now()
	for from := 0; from < n; from += chunk {
		to := min(n, from+chunk)
		forward(m, chain(c, toks[from:to], false), logits)
		commitAll(c, to-from)
	}
	return float64(n) / time.Since(start).Seconds()
}

// decodeAfterFill is the decode rate of n tokens after a context of ctx
// entries (Fill writes them: attention reads them as it reads a prompt's).
func decodeAfterFill(m *model.Model, ctx, n int) float64 {
	c := m.NewCache(ctx + n + 1)
	if err := c.Fill(ctx); err != nil {
		fatal(err)
	}
	logits := make([]float32, m.Config().Vocab)
	start := time.Now()
	for i := range n {
		forward(m, chain(c, []int32{int32(200 + i)}, true), logits)
		commitAll(c, 1)
	}
	return float64(n) / time.Since(start).Seconds()
}

func prefillRate(m *model.Model, n int) float64 {
	c := m.NewCache(n)
	logits := make([]float32, m.Config().Vocab)
	start := time.Now()
	forward(m, chain(c, tokens(n), false), logits)
	return float64(n) / time.Since(start).Seconds()
}

// forwardMs is one pass over n new tokens (logits for all, as a speculative
// verification needs) after ctx cached ones; the best of three, since one
// pass is short enough for a scheduler hiccup to dominate.
func forwardMs(m *model.Model, ctx, n int) float64 {
	c := m.NewCache(ctx + n)
	logits := make([]float32, n*m.Config().Vocab)
	forward(m, chain(c, tokens(ctx), false), logits)
	commitAll(c, ctx)
	best := 0.0
	for range 3 {
		start := time.Now()
		forward(m, chain(c, tokens(n), true), logits)
		if ms := float64(time.Since(start).Microseconds()) / 1e3; best == 0 || ms < best {
			best = ms
		}
		if err := c.Truncate(ctx); err != nil {
			fatal(err)
		}
	}
	return best
}

func forward(m *model.Model, b *model.Batch, logits []float32) {
	if err := m.Forward(b, logits); err != nil {
		fatal(err)
	}
}

// llamaCpp measures llama.cpp (through an installed llama-cpp-python) on the
// same model: decode of 128 tokens, decode of 64 after 256, a 512-token
// prefill and the forward pass over N tokens, median of rounds, each at
// llama.cpp's better flash-attention setting (off and on are both run).
func llamaCpp(python, path string, rounds int) (map[string]float64, error) {
	const script = `
import json, sys, time, statistics
from llama_cpp import Llama
path, rounds = sys.argv[1], int(sys.argv[2])
out = {}
def best(key, v, lower=False):
    if key not in out or (v < out[key] if lower else v > out[key]):
        out[key] = v
toks = [100 + (i * 7919) % 5000 for i in range(512)]
# Flash attention off and on: each figure keeps llama.cpp's better setting.
for fa in (False, True):
    for t in (1, 2):
        m = Llama(model_path=path, n_ctx=1024, n_threads=t, n_threads_batch=t, n_batch=512, flash_attn=fa, verbose=False)
        tg, pp, td = [], [], []
        for _ in range(rounds):
            m.reset(); s = time.perf_counter(); m.eval(toks); pp.append(512 / (time.perf_counter() - s))
            m.reset(); m.eval([200]); s = time.perf_counter()
            for i in range(128): m.eval([201 + i])
            tg.append(128 / (time.perf_counter() - s))
            m.reset(); m.eval(toks[:256]); s = time.perf_counter()
            for i in range(64): m.eval([201 + i])
            td.append(64 / (time.perf_counter() - s))
        best(f"tg128_t{t}", statistics.median(tg)); best(f"pp512_t{t}", statistics.median(pp)); best(f"tgd256_t{t}", statistics.median(td))
        del m
    # One pass over N new tokens after 256 cached, logits for all N, 2 threads,
    # through llama_decode itself (no Python per token): best of 3 passes per
    # round, median of rounds, as lmsbench measures its own.
    try:
        import llama_cpp
        m = Llama(model_path=path, n_ctx=1024, n_threads=2, n_threads_batch=2, n_batch=512, n_ubatch=512, flash_attn=fa, verbose=False)
        ctx = m._ctx.ctx
        mem = llama_cpp.llama_get_memory(ctx)
        b = llama_cpp.llama_batch_init(512, 0, 1)
        def decode(ts, pos0, all_logits):
            b.n_tokens = len(ts)
            for i, tok in enumerate(ts):
                b.token[i] = tok; b.pos[i] = pos0 + i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0
                b.logits[i] = 1 if all_logits or i == len(ts) - 1 else 0
            if llama_cpp.llama_decode(ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
        decode(toks[:256], 0, False)
        for n in (1, 2, 4, 8, 16, 32, 64):
            meds = []
            for _ in range(rounds):
                bst = None
                for _ in range(3):
                    llama_cpp.llama_memory_seq_rm(mem, 0, 256, -1)
                    s = time.perf_counter(); decode(toks[:n], 256, True); ms = (time.perf_counter() - s) * 1e3
                    bst = ms if bst is None else min(bst, ms)
                meds.append(bst)
            best(f"forward_n{n}", statistics.median(meds), lower=True)
        del m
    except Exception as e:
        print("forward over N not measured:", e, file=sys.stderr)
print(json.dumps(out))
`
	out, err := exec.Command(python, "-c", script, path, fmt.Sprint(rounds)).Output()
	if err != nil {
		return nil, err
	}
	res := map[string]float64{}
	return res, json.Unmarshal(out, &res)
}

// cpuModel is the CPU's model name from /proc/cpuinfo ("unknown" elsewhere).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute load averages
// ("unknown" elsewhere).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// llamaBench measures llama.cpp with its own llama-bench on the same model
// (the forward passes over N tokens only when forward is set, the decode
// and prefill figures when basic is, prefill not when decodeOnly is, and
// at 2 threads a prompt of each long length and decode after one).
func llamaBench(bin, path string, rounds int, forward, basic, decodeOnly bool, long []int) (map[string]float64, error) {
	type result struct {
		Threads int     `json:"n_threads"`
		Prompt  int     `json:"n_prompt"`
		Gen     int     `json:"n_gen"`
		Depth   int     `json:"n_depth"`
		AvgNs   float64 `json:"avg_ns"`
		AvgTs   float64 `json:"avg_ts"`
	}
	out := map[string]float64{}
	best := func(key string, v float64, lower bool) {
		if old, ok := out[key]; !ok || (lower && v < old) || (!lower && v > old) {
			out[key] = v
		}
	}
	r := fmt.Sprint(rounds)
	var runs [][]string
	if basic {
		pp := "512"
		if decodeOnly {
			pp = "0"
		}
		runs = append(runs, []string{"-t", "1,2", "-p", pp, "-n", "128"}, []string{"-t", "1,2", "-p", "0", "-n", "64", "-d", "256"})
	}
	for _, n := range long {
		runs = append(runs, []string{"-t", "2", "-p", fmt.Sprint(n), "-n", "0", "-r", fmt.Sprint(min(rounds, 2))},
			[]string{"-t", "2", "-p", "0", "-n", "32", "-d", fmt.Sprint(n), "-r", fmt.Sprint(min(rounds, 2))})
	}
	if forward {
		runs = append(runs, []string{"-t", "2", "-p", "1,2,4,8,16,32,64", "-n", "0", "-d", "256"})
	}
	for _, args := range runs {
		cmd := exec.Command(bin, append([]string{"-m", path, "-fa", "0,1", "-r", r, "-o", "json"}, args...)...)
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s %v: %w", bin, args, err)
		}
		var res []result
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, fmt.Errorf("llama-bench output: %w", err)
		}
		for _, x := range res {
			switch {
			case x.Gen > 0 && x.Depth == 0:
				best(fmt.Sprintf("tg128_t%d", x.Threads), x.AvgTs, false)
			case x.Gen > 0:
				best(fmt.Sprintf("tgd%d_t%d", x.Depth, x.Threads), x.AvgTs, false)
			case x.Depth == 0:
				best(fmt.Sprintf("pp%d_t%d", x.Prompt, x.Threads), x.AvgTs, false)
			default:
				best(fmt.Sprintf("forward_n%d", x.Prompt), x.AvgNs/1e6, true)
			}
		}
	}
	return out, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "lmsbench:", err)
	os.Exit(1)
}
