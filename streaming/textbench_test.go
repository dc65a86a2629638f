package streaming

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchStops are typical chat stop strings; the benchmark texts contain
// their first bytes (newlines, '#', '<') but never a whole stop, so the
// matcher leaves its root state regularly yet never finishes early.
var benchStops = []string{"\n\nUser:", "###", "</s>"}

const benchTextSize = 1 << 20

// asciiEnglish builds about n bytes of English prose with the occasional
// newline, markdown heading and tag.
func asciiEnglish(n int) []byte {
	r := rand.New(rand.NewPCG(10, 11))
	words := strings.Fields(`the model streams text to the consumer while a speculative
		decoder proposes several tokens at once and the verifier accepts a prefix
		of them so that each iteration may deliver more than one token of output
		which is why the stream must never split a character or leak a stop string`)
	var buf bytes.Buffer
	for buf.Len() < n {
		switch r.IntN(40) {
		case 0:
			buf.WriteString(".\n")
		case 1:
			buf.WriteString("\n## Section\n")
		case 2:
			buf.WriteString(" <b>bold</b> ")
		default:
			buf.WriteString(words[r.IntN(len(words))])
			buf.WriteByte(' ')
		}
	}
	return buf.Bytes()[:n]
}

// mixedText builds about n bytes mixing CJK, emoji, accented Latin and ASCII,
// as a multilingual chat reply would.
func mixedText(n int) []byte {
	r := rand.New(rand.NewPCG(12, 13))
	parts := []string{"中文文本", "流式输出", "日本語の文章", "한국어", "😀", "🎉🚀", "café", "naïve", "the ", "model ", "，", "。", "\n", "# ", "<"}
	var buf bytes.Buffer
	for buf.Len() < n {
		buf.WriteString(parts[r.IntN(len(parts))])
	}
	// Cut at a character boundary.
	b := buf.Bytes()
	for n > 0 && isCont(b[n]) {
		n--
	}
	return b[:n]
}

// tokenSizes is a fixed pseudo-random sequence of push sizes of 1..8 bytes,
// like the pieces of byte-level BPE tokens.
var tokenSizes = func() []int {
	r := rand.New(rand.NewPCG(14, 15))
	s := make([]int, 4096)
	for i := range s {
		s[i] = 1 + r.IntN(8)
	}
	return s
}()

// runPipeline sanitizes then stop-matches text in pieces of the given sizes,
// as the decode stage does per iteration, with one output chunk per push.
// It returns the concatenated output when collect is set.
func runPipeline(s *Sanitizer, m *StopMatcher, text []byte, sizes []int, tmp, out []byte, collect bool) ([]byte, []byte) {
	s.Reset()
	m.Reset()
	var all []byte
	for k := 0; len(text) > 0; k++ {
		n := min(sizes[k%len(sizes)], len(text))
		tmp = s.Write(tmp[:0], text[:n])
		out, _ = m.Push(out[:0], tmp)
		if collect {
			all = append(all, out...)
		}
		text = text[n:]
	}
	tmp = s.Flush(tmp[:0])
	out, _ = m.Push(out[:0], tmp)
	out = m.Flush(out)
	if collect {
		all = append(all, out...)
	}
	return all, tmp
}

func benchPipeline(b *testing.B, text []byte, sizes []int) {
	for _, st := range benchStops {
		if bytes.Contains(text, []byte(st)) {
			b.Fatalf("benchmark text contains stop %q", st)
		}
	}
	var s Sanitizer
	m := NewStopMatcher(benchStops, false)
	tmp := make([]byte, 0, 64<<10+64)
	out := make([]byte, 0, 64<<10+64)
	// The pipeline must be lossless on this text; check before timing.
	if all, _ := runPipeline(&s, m, text, sizes, tmp, out, true); !bytes.Equal(all, text) {
		b.Fatal("pipeline altered the text")
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		runPipeline(&s, m, text, sizes, tmp, out, false)
	}
}

func BenchmarkText(b *testing.B) {
	ascii := asciiEnglish(benchTextSize)
	mixed := mixedText(benchTextSize)
	bulk := []int{64 << 10}
	b.Run("ascii/bulk64k", func(b *testing.B) { benchPipeline(b, ascii, bulk) })
	b.Run("ascii/token1-8", func(b *testing.B) { benchPipeline(b, ascii, tokenSizes) })
	b.Run("mixed/bulk64k", func(b *testing.B) { benchPipeline(b, mixed, bulk) })
	b.Run("mixed/token1-8", func(b *testing.B) { benchPipeline(b, mixed, tokenSizes) })
}

// The components alone, to see where the time of the pipeline goes.
func BenchmarkSanitizerBulk(b *testing.B) {
	for _, tc := range []struct {
		name string
		text []byte
	}{{"ascii", asciiEnglish(benchTextSize)}, {"mixed", mixedText(benchTextSize)}} {
		b.Run(tc.name, func(b *testing.B) {
			var s Sanitizer
			dst := make([]byte, 0, 64<<10+64)
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				for p := tc.text; len(p) > 0; p = p[min(64<<10, len(p)):] {
					dst = s.Write(dst[:0], p[:min(64<<10, len(p))])
				}
			}
		})
	}
}

func BenchmarkStopMatcherBulk(b *testing.B) {
	for _, tc := range []struct {
		name string
		text []byte
	}{{"ascii", asciiEnglish(benchTextSize)}, {"mixed", mixedText(benchTextSize)}} {
		b.Run(tc.name, func(b *testing.B) {
			m := NewStopMatcher(benchStops, false)
			dst := make([]byte, 0, 64<<10+64)
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				m.Reset()
				for p := tc.text; len(p) > 0; {
					n := min(64<<10, len(p))
					for n < len(p) && isCont(p[n]) {
						n++ // pushes must be whole characters
					}
					dst, _ = m.Push(dst[:0], p[:n])
					p = p[n:]
				}
			}
		})
	}
}
