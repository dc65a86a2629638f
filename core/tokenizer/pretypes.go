package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// preTokenizer is what a tokenizer.ggml.pre name stands for: the stages that
// cut text into pre-tokens (each stage splits every piece the previous one
// made, as llama.cpp applies its list of regexes), and the per-vocabulary
// switches llama.cpp sets along with them.
type preTokenizer struct {
	stages []stage
	// ignoreMerges: a pre-token that is itself a vocabulary entry is that
	// token, whatever the merges would make of it (Hugging Face's
	// ignore_merges).
	ignoreMerges bool
	// addBOS is the default of tokenizer.ggml.add_bos_token for files that
	// leave it out.
	addBOS bool
}

// split appends the pre-tokens of s to dst; scratch is a buffer for the
// intermediate stages. Both are returned for reuse.
func (p *preTokenizer) split(dst, scratch []span, s string) ([]span, []span) {
	dst = p.stages[0](dst[:0], s, 0)
	for _, st := range p.stages[1:] {
		scratch = scratch[:0]
		for _, sp := range dst {
			scratch = st(scratch, s[sp.start:sp.end], sp.start)
		}
		dst, scratch = scratch, dst
	}
	return dst, scratch
}

func pipeline(stages ...stage) preTokenizer { return preTokenizer{stages: stages} }

// The stages that recur.
var (
	stageGPT2      stage = splitGPT2
	stageNumber          = isolate(upTo(1, isNumber))      // \p{N}
	stageNumbers         = isolate(runOf(isNumber))        // \p{N}+
	stageNumbers3        = isolate(upTo(3, isNumber))      // \p{N}{1,3}
	stageCJKKana         = isolate(runOf(cjkKana.hasText)) // [一-龥぀-ゟ゠-ヿ]+
	stageDeepSeek3       = isolate((&wordRegex{
		asciiPunctWord: true, word: wordLettersMarks, leadNotPS: true,
		punct: punctPunctSymbol, tail: tailNewlines,
	}).match)
)

// preTokenizers maps each pre-tokenizer type llama.cpp knows to its
// stages; preNames maps every tokenizer.ggml.pre name llama.cpp accepts for
// a byte-level BPE vocabulary to a type. Both follow llama.cpp 34af94cd9
// (src/llama-vocab.cpp), whose splits are the reference.
var preTokenizers = map[string]preTokenizer{
	// The original GPT-2 regex:
	// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
	"gpt2": pipeline(stageGPT2),
	// llama.cpp's choice for a file without a pre-tokenizer, or "default".
	"default": pipeline(isolate(runOf(defaultPunct)), stageGPT2, stageNumbers, isolate(matchThreeDigits)),
	// Every \p{N} alone, then GPT-2's regex (one scanner does both).
	"starcoder": pipeline(splitSmolLM),
	"falcon":    pipeline(isolate(runOf(falconPunct)), stageGPT2, isolate(matchThreeDigits)),
	// Llama-3's regex, which Qwen2 varies with single digits and Qwen3.5
	// with marks joining letters.
	"llama3": {stages: []stage{splitLlama3}, ignoreMerges: true, addBOS: true},
	"qwen2":  pipeline(splitQwen2),
	"qwen35": pipeline(splitQwen35),
	"jais2": pipeline(isolate((&wordRegex{
		leadingContraction: true, word: wordLetters, digits: 3, tail: tailNewlines, spaceCascade: true,
	}).match)),
	"chatglm4": pipeline(splitLlama3),
	"deepseek-llm": pipeline(isolate(matchNewline), isolate(deepseekLLMLetters), isolate(deepseekLLMPunct),
		splitTrailingSpace, isolate(runOf(deepseekCJK.hasText)), stageNumbers),
	"deepseek-coder": pipeline(isolate(matchNewline), isolate(spaceThen(isLetter)), isolate(spaceThen(isPunctCollapsed)),
		isolate(runOf(deepseekCJK.hasText)), stageNumber),
	"deepseek3": pipeline(stageNumbers3, stageCJKKana, stageDeepSeek3),
	"youtu": {stages: []stage{isolate(matchYoutuCJK), isolate((&wordRegex{
		word: wordLettersMarks, suffixContraction: true, digits: 1, tail: tailNewlinesSlash,
	}).match)}, ignoreMerges: true},
	"bloom":  pipeline(isolate(matchBloom)),
	"viking": pipeline(isolate(matchBloom), stageNumber),
	"tekken": {stages: []stage{isolate((&wordRegex{
		word: wordCased, digits: 1, tail: tailNewlinesSlash,
	}).match)}, ignoreMerges: true, addBOS: true},
	"chameleon": {stages: []stage{isolate(matchSentinel), isolate(matchImageToken), isolate(matchChameleonSpace),
		stageNumber, isolate(matchChameleonPunct), stageGPT2}, addBOS: true},
	"gpt4o": pipeline(isolate((&wordRegex{
		word: wordCased, suffixContraction: true, digits: 3, tail: tailNewlinesSlash,
	}).match)),
	"granite-embed-multi-97m": {stages: []stage{isolate((&wordRegex{
		word: wordCasedMarks, suffixContraction: true, digits: 3, tail: tailNewlinesSlash,
	}).match)}, ignoreMerges: true},
	"tiny-aya": pipeline(splitDigitGroups, isolate((&wordRegex{
		word: wordLettersMarks, suffixContraction: true, digits: 3, tail: tailNewlinesSlash,
	}).match)),
	"kimi-k2":  pipeline(splitKimiK2),
	"superbpe": pipeline(stageNumbers, splitSuperBPEDigits),
	"bailingmoe": pipeline(isolate((&wordRegex{
		leadingContraction: true, word: wordLetters, digits: 1, tail: tailNewlines,
	}).match)),
	"seed-coder": pipeline(isolate((&wordRegex{
		leadingContraction: true, word: wordLetters, digits: 1, tail: tailNone,
	}).match)),
	"afmoe":  pipeline(splitDigitGroups, isolate(runOf(afmoeCJK.hasText)), stageDeepSeek3),
	"laguna": pipeline(splitNewlines, splitQwen2),
	"exaone-moe": pipeline(isolate((&wordRegex{
		leadingContraction: true, word: wordPhrase, digits: 1, tail: tailOneNewlineOrSlash,
	}).match)),
	"minicpm5": {stages: []stage{stageNumbers3, isolate((&wordRegex{
		leadingContraction: true, word: wordLetters, digits: -1, tail: tailNewlines,
	}).match)}, ignoreMerges: true},
}

var preNames = map[string]string{
	"": "default", "default": "default",

	"gpt-2": "gpt2", "phi-2": "gpt2", "jina-es": "gpt2", "jina-de": "gpt2", "gigachat": "gpt2",
	"jina-v2-es": "gpt2", "jina-v2-de": "gpt2", "a.x-4.0": "gpt2", "mellum": "gpt2", "modern-bert": "gpt2",
	"jina-v1-en": "gpt2", "jina-v2-code": "gpt2", "roberta-bpe": "gpt2", "exaone4": "gpt2",
	"mpt": "gpt2", "olmo": "gpt2", "jais": "gpt2", "trillion": "gpt2", "granite-docling": "gpt2",

	"starcoder": "starcoder", "refact": "starcoder", "command-r": "starcoder", "smollm": "starcoder",
	"codeshell": "starcoder", "exaone": "starcoder", "minerva-7b": "starcoder", "mellum2": "starcoder",

	"falcon": "falcon",

	"llama3": "llama3", "llama-v3": "llama3", "llama-bpe": "llama3", "falcon3": "llama3", "falcon-h1": "llama3",
	"pixtral": "llama3", "midm-2.0": "llama3", "lfm2": "llama3", "jina-v5-nano": "llama3",
	"dbrx": "chatglm4", "smaug-bpe": "chatglm4", "glm4": "chatglm4", "chatglm-bpe": "chatglm4",

	"qwen2": "qwen2", "deepseek-r1-qwen": "qwen2", "kormo": "qwen2", "f2llmv2": "qwen2", "megrez": "qwen2",
	"stablelm2": "qwen2", "hunyuan": "qwen2", "solar-open": "qwen2", "grok-2": "qwen2",
	"qwen35": "qwen35",

	"jais-2":         "jais2",
	"deepseek-llm":   "deepseek-llm",
	"deepseek-coder": "deepseek-coder",
	"deepseek-v3":    "deepseek3", "hunyuan-dense": "deepseek3", "joyai-llm": "deepseek3",
	"youtu":     "youtu",
	"poro-chat": "bloom", "bloom": "bloom", "gpt3-finnish": "bloom",
	"viking":    "viking",
	"tekken":    "tekken",
	"chameleon": "chameleon",
	"gpt-4o":    "gpt4o", "llama4": "gpt4o", "kanana2": "gpt4o", "talkie": "gpt4o", "minimax-m2": "gpt4o",
	"granite-embed-multi-97m": "granite-embed-multi-97m",
	"tiny_aya":                "tiny-aya", "cohere2moe": "tiny-aya",
	"kimi-k2":    "kimi-k2",
	"superbpe":   "superbpe",
	"bailingmoe": "bailingmoe", "bailingmoe2": "bailingmoe", "llada-moe": "bailingmoe",
	"seed-coder": "seed-coder",
	"afmoe":      "afmoe",
	"laguna":     "laguna",
	"exaone-moe": "exaone-moe",
	"minicpm5":   "minicpm5",
}

// notByteLevel are the pre-tokenizer names llama.cpp runs on vocabularies
// stored as raw UTF-8 rather than GPT-2's byte-level alphabet (Gemma 4's,
// with "▁" for spaces; a whitespace splitter's). This package has no such
// BPE, so they are refused by name.
var notByteLevel = []string{"gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"}

// preTokenizerFor returns what tokenizer.ggml.pre names.
func preTokenizerFor(name string) (*preTokenizer, error) {
	typ, ok := preNames[name]
	if !ok {
		for _, n := range notByteLevel {
			if n == name {
				return nil, fmt.Errorf("tokenizer: pre-tokenizer %q (tokenizer.ggml.pre) is for a vocabulary that is not byte-level, which is not supported", name)
			}
		}
		return nil, fmt.Errorf("tokenizer: unsupported pre-tokenizer %q (tokenizer.ggml.pre); supported: %s", name, strings.Join(PreTokenizerNames(), ", "))
	}
	p := preTokenizers[typ]
	return &p, nil
}

// PreTokenizerNames lists the tokenizer.ggml.pre values accepted for a
// byte-level BPE vocabulary, sorted.
func PreTokenizerNames() []string {
	var names []string
	for n := range preNames {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// defaultAddBOS is llama.cpp's default for tokenizer.ggml.add_bos_token
// with a byte-level BPE vocabulary of the named pre-tokenizer.
func defaultAddBOS(pre string) bool {
	typ, ok := preNames[pre]
	return ok && preTokenizers[typ].addBOS
}

// PreTokenize splits text the way the byte-level BPE pre-tokenizer named by
// tokenizer.ggml.pre does, before any byte mapping or merging. It is exposed
// for diagnostics and for checking the scanners against a regex engine.
func PreTokenize(pre, text string) ([]string, error) {
	p, err := preTokenizerFor(pre)
	if err != nil {
		return nil, err
	}
	spans, _ := p.split(nil, nil, text)
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = text[sp.start:sp.end]
	}
	return out, nil
}
