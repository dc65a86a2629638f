// Command trim writes a copy of a Llama-family GGUF model with its first
// layers only: a real model small enough to carry to a GPU machine for the
// CUDA backend's tests (the default model's 30 layers are 93 MB; 4 are
// about 40 MB). See package layers.
//
//	go run ./tests/gpu/trim -layers 4 models/SmolLM2-135M-Instruct.Q4_1.gguf out.gguf
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/tests/gpu/layers"
)

func main() {
	n := flag.Int("layers", 4, "layers to keep")
	flag.Parse()
	if flag.NArg() != 2 || *n < 1 {
		fmt.Fprintln(os.Stderr, "usage: trim [-layers N] in.gguf out.gguf")
		os.Exit(2)
	}
	f, err := gguf.Open(flag.Arg(0))
	if err == nil {
		err = layers.Rewrite(f, *n, flag.Arg(1))
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trim:", err)
		os.Exit(1)
	}
}
