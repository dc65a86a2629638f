// Command trim writes a copy of a Llama-family GGUF model keeping only its
// first layers: a real model small enough to carry to a GPU machine for the
// CUDA backend's tests (the default model's 30 layers are 93 MB; 4 are
// about 40 MB). The output is a valid model in its own right: block_count
// says how many layers it has, and its answers are those of a shallower
// network, which is all a GPU-against-CPU comparison needs.
//
//	go run ./tests/gpu/trim -layers 4 models/SmolLM2-135M-Instruct.Q4_1.gguf out.gguf
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
)

func main() {
	layers := flag.Int("layers", 4, "layers to keep")
	flag.Parse()
	if flag.NArg() != 2 || *layers < 1 {
		fmt.Fprintln(os.Stderr, "usage: trim [-layers N] in.gguf out.gguf")
		os.Exit(2)
	}
	if err := trim(flag.Arg(0), flag.Arg(1), *layers); err != nil {
		fmt.Fprintln(os.Stderr, "trim:", err)
		os.Exit(1)
	}
}

func trim(in, out string, layers int) error {
	f, err := gguf.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v := kv.Value
		if strings.HasSuffix(kv.Key, ".block_count") {
			if v, err = gguf.ValueOf(uint32(layers)); err != nil {
				return err
			}
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return err
		}
	}
	for _, t := range f.Tensors {
		if rest, ok := strings.CutPrefix(t.Name, "blk."); ok {
			i, err := strconv.Atoi(rest[:strings.IndexByte(rest, '.')])
			if err != nil {
				return fmt.Errorf("tensor %s: %w", t.Name, err)
			}
			if i >= layers {
				continue
			}
		}
		if err := w.AddTensor(t.Name, t.Type, t.Dims, t.Data); err != nil {
			return err
		}
	}
	return w.WriteFile(out)
}
