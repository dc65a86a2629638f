// Package modelfile tests what a runtime does with a model file that is
// broken, hostile or changed while in use: a GGUF mutator that loads
// thousands of damaged files in child processes under an address-space
// limit (mutator_test.go), and a model file truncated under a live runtime
// (truncate_test.go).
package modelfile

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// The test binary re-executes itself as a child that loads one file:
// childFile names the file, childAS the address-space limit in bytes.
const (
	childFile = "LMSTREAM_MUTANT_FILE"
	childAS   = "LMSTREAM_MUTANT_AS"
)

// Child exit statuses. A Go panic exits 2 and a signal is a signal, so
// neither can pass for these.
const (
	exitGenerated  = 0
	exitCleanError = 3
	exitSetupError = 4
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childFile); path != "" {
		os.Exit(child(path))
	}
	os.Exit(m.Run())
}

// child loads the model at path the way the cpu backend does (gguf.Open,
// model.Load, tokenizer.FromGGUF, the vocabulary check) and, when that
// succeeds, generates a few tokens greedily. A load error is reported and
// is a clean exit; anything else going wrong is a crash the parent counts.
func child(path string) int {
	if as, err := strconv.ParseUint(os.Getenv(childAS), 10, 64); err == nil && as > 0 {
		lim := unix.Rlimit{Cur: as, Max: as}
		if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			return exitSetupError
		}
	}
	clean := func(err error) int {
		fmt.Fprintln(os.Stderr, "clean error:", err)
		return exitCleanError
	}
	f, err := gguf.Open(path)
	if err != nil {
		return clean(err)
	}
	defer f.Close()
	m, err := model.Load(f, 1)
	if err != nil {
		return clean(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return clean(err)
	}
	cfg := m.Config()
	if tok.Size() != cfg.Vocab {
		return clean(fmt.Errorf("tokenizer has %d tokens but the model's output has %d", tok.Size(), cfg.Vocab))
	}
	prompt := tok.Encode("Hello world", tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	const gen = 4
	ctx := min(cfg.ContextTrain, 64)
	switch {
	case len(prompt) == 0:
		return clean(fmt.Errorf("the prompt is empty in this vocabulary"))
	case len(prompt)+gen > ctx:
		return clean(fmt.Errorf("prompt of %d tokens does not fit a context of %d", len(prompt), ctx))
	}
	cache := m.NewCache(ctx)
	logits := make([]float32, cfg.Vocab)
	next := prompt
	var out []int32
	for range gen {
		if err := forward(m, cache, next, logits); err != nil {
			return clean(err)
		}
		best := 0
		for i, v := range logits {
			if v > logits[best] || math.IsNaN(float64(logits[best])) {
				best = i
			}
		}
		out = append(out, int32(best))
		_ = tok.Piece(int32(best))
		next = []int32{int32(best)}
	}
	fmt.Fprintln(os.Stderr, "generated", out)
	return exitGenerated
}

// forward feeds toks as a chain after the cache's committed tokens, writes
// the last one's logits and commits them all.
func forward(m *model.Model, c *kv.Cache, toks []int32, logits []float32) error {
	b := &model.Batch{}
	for i, t := range toks {
		b.Tokens = append(b.Tokens, t)
		b.Cache = append(b.Cache, c)
		b.Pos = append(b.Pos, c.Len()+i)
		b.Parent = append(b.Parent, i-1)
		b.Logits = append(b.Logits, i == len(toks)-1)
	}
	if err := m.Forward(b, logits); err != nil {
		return err
	}
	idx := make([]int, len(toks))
	for i := range idx {
		idx[i] = i
	}
	return c.Commit(idx)
}
