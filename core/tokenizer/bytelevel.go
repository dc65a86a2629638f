package tokenizer

import "unicode/utf8"

// GPT-2's byte-level BPE works on text in which every byte is one printable
// unicode character, so that vocabulary files never hold whitespace or
// control bytes: the printable Latin-1 bytes stand for themselves and the
// remaining 68 bytes (0-32, 127-160, 173) are shifted, in order, to U+0100
// onwards. " " becomes "Ġ" (U+0120), "\n" becomes "Ċ" (U+010A).
var (
	byteToRune [256]rune
	runeToByte [256 + 68]int16 // -1 where the rune stands for no byte
	// byteToUTF8 is byteToRune[b] already UTF-8 encoded, for building the
	// mapped form of a pre-token without per-rune encoding calls.
	byteToUTF8 [256]string
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	shifted := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = rune(256 + shifted)
			shifted++
		}
		byteToRune[b] = r
		runeToByte[r] = int16(b)
		byteToUTF8[b] = string(r)
	}
}

// appendByteLevelDecoded maps a byte-level token text back to the bytes it
// stands for. A rune outside the table (a vocabulary that stores some raw
// text) is copied through as its own UTF-8 rather than dropped, so no output
// is lost.
func appendByteLevelDecoded(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r >= 0 && int(r) < len(runeToByte) && runeToByte[r] >= 0 && !(r == utf8.RuneError && w == 1) {
			dst = append(dst, byte(runeToByte[r]))
		} else {
			dst = append(dst, s[i:i+w]...)
		}
		i += w
	}
	return dst
}

// appendByteLevelEncoded appends the byte-level form of s.
func appendByteLevelEncoded(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = append(dst, byteToUTF8[s[i]]...)
	}
	return dst
}
