package streaming

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// splitSizes turns fuzzer bytes into piece sizes (0..15 each), so the fuzzer
// controls where the input is cut, including empty pieces.
func splitSizes(splits []byte) []int {
	sizes := make([]int, 0, 2*len(splits))
	for _, b := range splits {
		sizes = append(sizes, int(b&0x0F), int(b>>4))
	}
	return sizes
}

// FuzzSanitizer checks that any split of any input decodes exactly as the
// Table 3-7 oracle decodes the whole input.
func FuzzSanitizer(f *testing.F) {
	f.Add([]byte("hello"), []byte{0x11})
	f.Add([]byte("\xF0\x9F\x98\x80"), []byte{0x12})
	f.Add([]byte("\xE4\xB8\x41"), []byte{0x01})
	f.Fuzz(func(t *testing.T, data, splits []byte) {
		// The checks after every piece are quadratic; long inputs only
		// slow the fuzzer down without reaching new states.
		if len(data) > 1024 {
			data = data[:1024]
		}
		if len(splits) > 512 {
			splits = splits[:512]
		}
		want := string(oracleDecode(data))
		if got := string(sanitizeSplit(t, data, splitSizes(splits))); got != want {
			t.Fatalf("input %x splits %x: got %q want %q", data, splits, got, want)
		}
	})
}

// FuzzStopMatcher checks the matcher against the brute-force oracles. The
// stops come '|'-separated in one string; the text is made well-formed first
// because Push requires it, and is cut only at character boundaries.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello ### world", "###", []byte{0x23}, false)
	f.Add("a中文b", "中文|文b", []byte{0x11}, true)
	f.Fuzz(func(t *testing.T, text, stopList string, splits []byte, include bool) {
		// The oracles are quadratic; keep inputs short so the fuzzer stays fast.
		if len(text) > 256 {
			text = text[:256]
		}
		if len(stopList) > 64 {
			stopList = stopList[:64]
		}
		text = strings.ToValidUTF8(text, "\uFFFD")
		stops := strings.Split(strings.ToValidUTF8(stopList, "\uFFFD"), "|")
		if len(stops) > 8 {
			stops = stops[:8]
		}
		var pieces []string
		rest := text
		for _, n := range splitSizes(splits) {
			if rest == "" {
				break
			}
			k := 0
			for ; n > 0 && k < len(rest); n-- {
				_, sz := utf8.DecodeRuneInString(rest[k:])
				k += sz
			}
			pieces = append(pieces, rest[:k])
			rest = rest[k:]
		}
		pieces = append(pieces, rest)
		checkStopSplit(t, stops, include, pieces)
	})
}
