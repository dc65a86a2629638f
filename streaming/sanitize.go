package streaming

import "encoding/binary"

// replacement is U+FFFD REPLACEMENT CHARACTER encoded as UTF-8.
const replacement = "\uFFFD"

// leadInfo classifies every possible first byte of a UTF-8 sequence, following
// the Unicode table of well-formed byte sequences (Table 3-7). The low three
// bits hold the sequence length (0: the byte can never start a sequence, so it
// is an invalid subpart on its own); the high nibble indexes secondRange,
// which carries the restricted range of the second byte. Restricting the
// second byte is what rejects overlongs (E0 80..9F, F0 80..8F), surrogates
// (ED A0..BF) and code points above U+10FFFF (F4 90..BF) at the earliest
// byte that proves them wrong, which is exactly where the maximal-subpart
// rule places the cut.
var leadInfo = func() (t [256]uint8) {
	for b := 0x00; b <= 0x7F; b++ {
		t[b] = 1
	}
	for b := 0xC2; b <= 0xDF; b++ {
		t[b] = 2 | rangeAny<<4
	}
	t[0xE0] = 3 | rangeE0<<4
	for b := 0xE1; b <= 0xEF; b++ {
		t[b] = 3 | rangeAny<<4
	}
	t[0xED] = 3 | rangeED<<4
	t[0xF0] = 4 | rangeF0<<4
	for b := 0xF1; b <= 0xF3; b++ {
		t[b] = 4 | rangeAny<<4
	}
	t[0xF4] = 4 | rangeF4<<4
	// 80..C1 and F5..FF stay 0: continuation bytes without a leader, the
	// always-overlong C0/C1, and leaders of code points above U+10FFFF.
	return t
}()

const (
	rangeAny = iota // 80..BF
	rangeE0         // A0..BF: shorter forms would be overlong
	rangeED         // 80..9F: A0..BF would encode a surrogate
	rangeF0         // 90..BF: shorter forms would be overlong
	rangeF4         // 80..8F: 90..BF would exceed U+10FFFF
)

var secondRange = [...]struct{ lo, hi byte }{
	rangeAny: {0x80, 0xBF},
	rangeE0:  {0xA0, 0xBF},
	rangeED:  {0x80, 0x9F},
	rangeF0:  {0x90, 0xBF},
	rangeF4:  {0x80, 0x8F},
}

// isCont reports whether b is a continuation byte (10xxxxxx).
func isCont(b byte) bool { return b&0xC0 == 0x80 }

// Sanitizer turns a stream of raw bytes, arriving in arbitrary pieces, into
// well-formed UTF-8.
//
// Token pieces from byte-level BPE and byte-fallback vocabularies routinely
// split a character across tokens, so a piece cannot be decoded on its own.
// The Sanitizer holds back an incomplete trailing sequence for as long as it
// may still complete, and replaces bytes with U+FFFD as soon as they are
// known to be invalid. Its output for any split of the input equals Python's
// bytes.decode("utf-8", "replace") of the whole input (one U+FFFD per maximal
// invalid subpart), which is what invariant I2 of the stream contract
// promises every binding.
//
// The zero value is ready to use. The state is a few bytes held inline, so a
// Sanitizer never touches the heap itself.
type Sanitizer struct {
	buf [4]byte // held bytes of an incomplete sequence: a leader and the valid continuations seen so far
	n   uint8   // number of bytes held in buf (0..3)
}

// Write appends to dst the text that p completes and returns the extended
// slice. An incomplete trailing sequence that may still complete is held
// back; invalid bytes become U+FFFD as soon as they are known to be invalid.
func (s *Sanitizer) Write(dst, p []byte) []byte {
	i := 0
	if s.n > 0 {
		dst, i = s.resume(dst, p)
		if s.n > 0 {
			return dst // p ended before the held sequence was decided
		}
	}
	// Valid bytes are not appended one by one: start marks the beginning of
	// the current run of well-formed text, which is copied into dst in one
	// append when the run ends (an invalid subpart, a held tail, or the end).
	start := i
	n := len(p)
	for i < n {
		// Fast path: eight ASCII bytes at a time. Generated text is mostly
		// ASCII, and even CJK text has ASCII spaces and punctuation.
		for i+8 <= n && binary.LittleEndian.Uint64(p[i:])&0x8080808080808080 == 0 {
			i += 8
		}
		if i >= n {
			break
		}
		b := p[i]
		if b < 0x80 {
			i++
			continue
		}
		info := leadInfo[b]
		size := int(info & 7)
		if size == 0 {
			dst = append(dst, p[start:i]...)
			dst = append(dst, replacement...)
			i++
			start = i
			continue
		}
		r := secondRange[info>>4]
		if i+size <= n {
			// The whole sequence is inside p: decide it with straight-line
			// checks. k counts the leading bytes that are valid so far; a
			// sequence that turns invalid after k bytes is one maximal
			// subpart of length k, and the byte that broke it is examined
			// again as a fresh start.
			k := 1
			if c := p[i+1]; c >= r.lo && c <= r.hi {
				k = 2
				if size > 2 && isCont(p[i+2]) {
					k = 3
					if size > 3 && isCont(p[i+3]) {
						k = 4
					}
				}
			}
			if k == size {
				i += size
				continue
			}
			dst = append(dst, p[start:i]...)
			dst = append(dst, replacement...)
			i += k
			start = i
			continue
		}
		// The sequence runs past the end of p. Check what is there; if it is
		// valid so far it may still complete, so hold it for the next Write.
		k := 1
		for i+k < n {
			c := p[i+k]
			if k == 1 && (c < r.lo || c > r.hi) || k > 1 && !isCont(c) {
				break
			}
			k++
		}
		dst = append(dst, p[start:i]...)
		if i+k < n {
			dst = append(dst, replacement...)
			i += k
			start = i
			continue
		}
		s.n = uint8(copy(s.buf[:], p[i:]))
		return dst
	}
	return append(dst, p[start:]...)
}

// resume continues a held sequence with the first bytes of p. It returns the
// index of the first byte of p not consumed; s.n stays non-zero when p ran
// out before the sequence completed or failed.
func (s *Sanitizer) resume(dst, p []byte) ([]byte, int) {
	info := leadInfo[s.buf[0]]
	size := int(info & 7)
	r := secondRange[info>>4]
	for j, c := range p {
		k := int(s.n) // position of c inside the sequence
		if k == 1 && (c < r.lo || c > r.hi) || k > 1 && !isCont(c) {
			// The held prefix is a maximal invalid subpart; c starts afresh.
			s.n = 0
			return append(dst, replacement...), j
		}
		s.buf[k] = c
		s.n++
		if int(s.n) == size {
			s.n = 0
			return append(dst, s.buf[:size]...), j + 1
		}
	}
	return dst, len(p)
}

// Flush appends the replacement for any held bytes and resets the state. The
// held bytes are always a valid-so-far prefix of one sequence, hence one
// maximal subpart and one U+FFFD, as Python does at the end of its input.
func (s *Sanitizer) Flush(dst []byte) []byte {
	if s.n > 0 {
		dst = append(dst, replacement...)
		s.n = 0
	}
	return dst
}

// Held returns the number of bytes held back, waiting for the rest of a
// sequence.
func (s *Sanitizer) Held() int { return int(s.n) }

// Reset drops any held bytes without emitting them, for reuse on a new
// stream.
func (s *Sanitizer) Reset() { s.n = 0 }
