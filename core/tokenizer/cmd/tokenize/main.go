// Command tokenize encodes lines of text with the tokenizer of a GGUF model,
// for comparing lmstream's tokenizer against other implementations
// (tests/tokenizer/test_tokenizer_parity.py).
//
// Usage:
//
//	tokenize [-special] model.gguf < lines.txt
//
// Each input line (without its "\n") is encoded on its own and printed as a
// JSON array of ids on one output line. Lines are read as JSON strings when
// -json is given, so callers can pass text containing newlines or "\r".
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/core/tokenizer/internal/ggufmeta"
)

func main() {
	special := flag.Bool("special", false, "recognise control-token texts such as <|im_start|> (EncodeOptions.ParseSpecial)")
	addSpecial := flag.Bool("add-special", false, "add BOS/EOS as the model's metadata asks")
	jsonIn := flag.Bool("json", false, "each input line is a JSON string")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tokenize [-special] [-add-special] [-json] model.gguf < lines")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	cfg, err := ggufmeta.TokenizerConfig(flag.Arg(0))
	if err != nil {
		fatal(err)
	}
	tok, err := tokenizer.New(cfg)
	if err != nil {
		fatal(err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	opts := tokenizer.EncodeOptions{ParseSpecial: *special, AddSpecial: *addSpecial}
	for in.Scan() {
		line := in.Text()
		if *jsonIn {
			if err := json.Unmarshal(in.Bytes(), &line); err != nil {
				fatal(fmt.Errorf("input line is not a JSON string: %w", err))
			}
		}
		ids := tok.Encode(line, opts)
		if ids == nil {
			ids = []int32{}
		}
		if err := enc.Encode(ids); err != nil {
			fatal(err)
		}
	}
	if err := in.Err(); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "tokenize:", err)
	os.Exit(1)
}
