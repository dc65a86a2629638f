// Command tokenize encodes lines of text with the tokenizer of a GGUF model,
// for comparing lmstream's tokenizer against other implementations
// (tests/tokenizer/test_tokenizer_parity.py).
//
// Usage:
//
//	tokenize [-special] [-add-special] [-json] model.gguf < lines.txt
//	tokenize -pretokenize NAME [-json] < lines.txt
//
// Each input line (without its "\n") is encoded on its own and printed as a
// JSON array of ids on one output line. Lines are read as JSON strings when
// -json is given, so callers can pass text containing newlines or "\r".
// With -pretokenize no model is read: each line is split by the named
// pre-tokenizer (any tokenizer.ggml.pre name: smollm, gpt-2, llama-bpe,
// qwen2, tekken, ...) and printed as a JSON array
// of strings.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

func main() {
	special := flag.Bool("special", false, "recognise control-token texts such as <|im_start|> (EncodeOptions.ParseSpecial)")
	addSpecial := flag.Bool("add-special", false, "add BOS/EOS as the model's metadata asks")
	jsonIn := flag.Bool("json", false, "each input line is a JSON string")
	pre := flag.String("pretokenize", "", "only pre-tokenize with the named pre-tokenizer; no model is read")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tokenize [-special] [-add-special] [-json] model.gguf < lines")
		fmt.Fprintln(os.Stderr, "       tokenize -pretokenize NAME [-json] < lines")
		flag.PrintDefaults()
	}
	flag.Parse()
	var encode func(string) (any, error)
	switch {
	case *pre != "" && flag.NArg() == 0:
		encode = func(line string) (any, error) { return tokenizer.PreTokenize(*pre, line) }
	case *pre == "" && flag.NArg() == 1:
		f, err := gguf.Open(flag.Arg(0))
		if err != nil {
			fatal(err)
		}
		tok, err := tokenizer.FromGGUF(f)
		f.Close()
		if err != nil {
			fatal(err)
		}
		opts := tokenizer.EncodeOptions{ParseSpecial: *special, AddSpecial: *addSpecial}
		encode = func(line string) (any, error) {
			ids := tok.Encode(line, opts)
			if ids == nil {
				ids = []int32{}
			}
			return ids, nil
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		line := in.Text()
		if *jsonIn {
			if err := json.Unmarshal(in.Bytes(), &line); err != nil {
				fatal(fmt.Errorf("input line is not a JSON string: %w", err))
			}
		}
		v, err := encode(line)
		if err != nil {
			fatal(err)
		}
		if err := enc.Encode(v); err != nil {
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
