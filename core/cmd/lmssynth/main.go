// Command lmssynth writes the synthetic models of core/model/synth (one
// per family and feature, random weights under a real vocabulary) as GGUF
// files: the files llama.cpp's golden data for core/model is recorded on,
// and files any family can be tried with (`make run MODEL=dir/qwen3.gguf`).
//
//	lmssynth -vocab models/SmolLM2-135M-Instruct.Q4_1.gguf -out DIR [-only NAME]
//
// -only qwen3moe-bench writes synth.BenchMoE, the Qwen3-MoE-shaped file
// the mixture-of-experts speed and memory figures are taken on.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model/synth"
)

func main() {
	vocab := flag.String("vocab", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "a model file whose vocabulary the files take")
	out := flag.String("out", "", "the directory to write NAME.gguf files into")
	only := flag.String("only", "", "write only this spec")
	list := flag.Bool("list", false, "list the specs and exit")
	flag.Parse()
	if *list {
		for _, s := range append(synth.Set(), synth.QuantSet()...) {
			fmt.Printf("%s\t%s\t%s\n", s.Name, s.Arch, s.Weights)
		}
		return
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "lmssynth: -out DIR is required")
		os.Exit(2)
	}
	if err := run(*vocab, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "lmssynth:", err)
		os.Exit(1)
	}
}

func run(vocabPath, out, only string) error {
	v, err := gguf.Open(vocabPath)
	if err != nil {
		return err
	}
	defer v.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	specs := append(synth.Set(), synth.QuantSet()...)
	if only == synth.BenchMoE().Name { // 1.5 GB: written only when asked for
		specs = append(specs, synth.BenchMoE())
	}
	n := 0
	for _, s := range specs {
		if only != "" && s.Name != only {
			continue
		}
		data, err := synth.Write(s, v)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		path := filepath.Join(out, s.Name+".gguf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		fmt.Println(path)
		n++
	}
	if n == 0 {
		return fmt.Errorf("no spec called %q (-list lists them)", only)
	}
	return nil
}
