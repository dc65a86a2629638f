package tokenizer

import "unicode/utf8"

// MaxInputBytesPerToken is the most input bytes one token of Encode's
// output can stand for, or 0 when no such bound holds. A caller can then
// refuse a text that cannot fit in n tokens — len(text) > n ×
// MaxInputBytesPerToken() means Encode would return more than n tokens —
// without encoding it.
//
// Why it holds: Encode drops nothing and normalises nothing; every output
// token covers input bytes equal in number to its piece (a merged BPE token
// is the byte-level decoding of the bytes it merged; a special or
// user-defined token is its text; a byte token is one byte), except that
// SentencePiece's "▁" prefix and the BOS and EOS Encode adds cover no input
// at all, and an UNK covers one byte (byte-level BPE) or one UTF-8 character
// (SentencePiece without byte tokens). So no token covers more than the
// longest piece, or more than a character for an UNK. The exception is a
// vocabulary that can drop input: byte-level BPE missing a byte symbol, or
// SentencePiece missing a byte token, with no UNK to stand in. There the
// bound is 0. It is 0 for WordPiece too: its normaliser drops whitespace,
// controls and accents, so any length of text may make no token at all.
func (t *Tokenizer) MaxInputBytesPerToken() int {
	if t.kind == modelWPM {
		return 0
	}
	longest := 1
	for _, p := range t.pieces {
		longest = max(longest, len(p))
	}
	var missing bool
	switch t.kind {
	case modelBPE:
		for _, id := range t.byteTok {
			missing = missing || id < 0
		}
	case modelSPM:
		for _, id := range t.spmByteToks {
			missing = missing || id < 0
		}
		if missing {
			longest = max(longest, utf8.UTFMax)
		}
	}
	if missing && t.unk < 0 {
		return 0
	}
	return longest
}
