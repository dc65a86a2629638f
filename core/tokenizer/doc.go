// Package tokenizer turns text into token ids and token ids back into bytes
// for the vocabulary families that GGUF files carry:
//
//   - "gpt2": byte-level BPE (SmolLM, Llama-3, Qwen2, GPT-2). Text is cut
//     into pre-tokens by the scanner that Config.Pre names, each pre-token's
//     bytes are mapped through GPT-2's byte-to-unicode table, and the ranked
//     merges are applied.
//   - "llama": SentencePiece BPE (Llama-2, Mistral, TinyLlama). Spaces
//     become "▁", the pair whose concatenation is the best-scoring vocabulary
//     entry is merged repeatedly, and anything left that is not in the
//     vocabulary falls back to "<0xNN>" byte tokens.
//   - "bert": WordPiece (BERT, BGE), for completeness: the engine runs no
//     BERT-architecture model. The text is lower-cased, accents stripped,
//     and cut at whitespace, punctuation and CJK ideographs; each word is
//     covered greedily by the longest token, or becomes [UNK]. It follows
//     llama.cpp, whose converter marks word starts with "▁" instead of
//     marking continuations with "##" (wordpiece.go).
//
// The package takes plain data (Config), not a file: whoever reads the GGUF
// fills it from the tokenizer.* metadata keys.
//
// # Pre-tokenizers
//
// tokenizer.ggml.pre names how a byte-level vocabulary cuts text before
// merging. Every name llama.cpp accepts for one is accepted here
// (PreTokenizerNames), with llama.cpp's splits as the reference: each name
// stands for a list of regexes applied in turn, each splitting the pieces
// the previous one made (pretypes.go). The regexes use lookahead and
// Unicode classes that Go's regexp lacks, so each is a small hand-written,
// linear-time scanner that reproduces the leftmost-first alternation
// llama.cpp runs, including its quirks: the regexes it runs through
// std::regex see every non-ASCII character only as its category, so there
// \p{Lu} and \p{Ll} both mean any letter, and only ASCII letters have a
// case (words.go). \p{L}, \p{N}, \p{P}, \p{S}, \p{M} are the Unicode 15.1
// general categories and \s is White_Space (uclass.go). An unknown name,
// or one llama.cpp uses for vocabularies that are not byte-level (gemma4),
// is refused by name.
//
// Invalid UTF-8 is where this package and llama.cpp part: llama.cpp
// replaces each invalid byte by U+FFFD before anything else, while here the
// bytes are kept (classed like U+FFFD) so that Decode(Encode(s)) == s.
//
// # Special tokens
//
// IsSpecial reports control tokens (type 3), unknown tokens (type 2) and the
// configured BOS and EOS ids: the tokens a reader does not want to see when
// skipping specials. User-defined tokens (type 4) are not special: they are
// vocabulary additions meant to read as text (Hugging Face's non-special
// added tokens), so Decode keeps them even when skipping specials.
//
// The same split governs Encode: the text of a user-defined token is always
// recognised inside the input (as Hugging Face and llama.cpp both do), while
// the text of a control token such as "<|im_start|>" is recognised only with
// EncodeOptions.ParseSpecial, so that untrusted user text cannot smuggle in
// control tokens.
//
// # Streaming contract
//
// Piece(id) is the exact byte contribution of one token to the output, and
// Decode is nothing more than the concatenation of pieces:
//
//	bytes.Join(Piece(id) for id in ids) == Decode(ids, false)
//
// The streaming layer relies on this to emit text token by token. It follows
// that Decode does not strip the leading space that SentencePiece's
// add_space_prefix puts in front of the first word; pieces may also end in
// the middle of a UTF-8 sequence (byte tokens, byte-level BPE).
//
// A Tokenizer is immutable after New and safe for concurrent use; the only
// shared mutable state is a bounded, mutex-guarded cache of encoded words.
package tokenizer
