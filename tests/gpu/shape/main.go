// Command shape writes a model's skeleton (its metadata and tensor list,
// no data) or a model filled with random values from one: how the GPU
// check times full-size models of shapes it cannot carry (package shapes).
//
//	shape -skeleton [-no-vocab] models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf qwen-1.5b.skel.gguf
//	shape -fill [-vocab qwen.vocab.gguf] qwen-1.5b.skel.gguf qwen-1.5b-shaped.gguf
//
// -vocab-only writes the tokenizer.* keys alone (a model-less GGUF) for
// -fill -vocab.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/tests/gpu/shapes"
)

func main() {
	skeleton := flag.Bool("skeleton", false, "write in.gguf's skeleton to out")
	noVocab := flag.Bool("no-vocab", false, "with -skeleton: leave out the tokenizer")
	vocabOnly := flag.Bool("vocab-only", false, "write in.gguf's tokenizer keys alone to out")
	fill := flag.Bool("fill", false, "write the model the skeleton in.gguf describes to out, its values random")
	vocab := flag.String("vocab", "", "with -fill: a file whose tokenizer keys the model takes")
	seed := flag.Uint64("seed", 1, "with -fill: the random values' seed")
	flag.Parse()
	modes := 0
	for _, m := range []bool{*skeleton, *vocabOnly, *fill} {
		if m {
			modes++
		}
	}
	if flag.NArg() != 2 || modes != 1 {
		fmt.Fprintln(os.Stderr, "usage: shape (-skeleton [-no-vocab] | -vocab-only | -fill [-vocab file] [-seed n]) in.gguf out.gguf")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *skeleton, *noVocab, *vocabOnly, *vocab, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(1)
	}
}

func run(in, out string, skeleton, noVocab, vocabOnly bool, vocabPath string, seed uint64) error {
	f, err := gguf.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	switch {
	case skeleton:
		return shapes.Skeleton(f, out, !noVocab)
	case vocabOnly:
		w := gguf.NewWriter()
		for _, kv := range f.KV {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				if err := w.AddKV(kv.Key, kv.Value); err != nil {
					return err
				}
			}
		}
		return w.WriteFile(out)
	}
	var v *gguf.File
	if vocabPath != "" {
		if v, err = gguf.Open(vocabPath); err != nil {
			return err
		}
		defer v.Close()
	}
	return shapes.Fill(f, v, seed, out)
}
